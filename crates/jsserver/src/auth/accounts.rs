//! The `accounts { }` block, read as nats-server reads it (`parseAccounts`,
//! `parseJetStreamForAccount` in `server/opts.go`): each account its own subject space, its
//! own users and, when enabled, its own JetStream with limits.
//!
//! ```text
//! accounts {
//!   ORDERS: {
//!     users: [ { user: shop, password: "$2a$11$..." } ]
//!     jetstream: { max_file: 10G, max_mem: 1G, max_streams: 10, max_consumers: 100 }
//!     default_permissions: { subscribe: { deny: "internal.>" } }
//!   }
//!   BILLING: { users: [ { user: billing, password: "..." } ], jetstream: enabled }
//!   GUESTS: { users: [ { user: guest, password: "guest" } ] }   # no JetStream
//! }
//! ```
//!
//! Users of the `authorization` block belong to the global account `$G`. The settings of an
//! account we do not enforce yet (`imports`, `exports`, `nkey`, `mappings`, `limits`,
//! `msg_trace`) are refused at start-up through [`crate::options::REFUSED`], before this
//! parser runs; unknown keys are an error, as in nats-server.

use std::collections::BTreeSet;

use jsproto::api::account::AccountLimits;

use super::config::{parse_permissions, parse_users, NkeyUserConfig, UserConfig};
use crate::conf::{parse_size, ConfError, Item, Value};

/// The global account: clients of a server without accounts, and the `authorization`
/// block's users (nats-server's `globalAccountName`).
pub const GLOBAL_ACCOUNT: &str = "$G";

/// Account names nats-server reserves (`isReservedAccount`): the global account.
const RESERVED: &[&str] = &[GLOBAL_ACCOUNT];

/// One account of the `accounts` block.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountConfig {
    /// Its name (the block's key).
    pub name: String,
    /// Its users with a user name, each with the account's `default_permissions` when it has
    /// none of its own.
    pub users: Vec<UserConfig>,
    /// Its nkey users.
    pub nkeys: Vec<NkeyUserConfig>,
    /// `jetstream`: `None` when not enabled for the account (`disabled`, `false`, absent);
    /// else its limits, `-1` for unlimited (`enabled` / `true`: all unlimited).
    pub jetstream: Option<AccountLimits>,
}

/// Parses the `accounts` block: a map of account name to account (or nats-server's simple
/// array of names, accounts with no users).
///
/// # Errors
/// A reserved or duplicate name, a value of the wrong type, an unknown key, a bad user entry
/// or JetStream limit, a user or nkey in more than one account; each names the file and line.
pub fn parse_accounts(item: &Item) -> Result<Vec<AccountConfig>, ConfError> {
    let mut accounts = Vec::new();
    let mut seen_users = BTreeSet::new();
    let entries: Vec<(String, Option<&Item>, &Item)> = match &item.value {
        Value::Array(names) => names
            .iter()
            .map(|n| {
                n.as_str()
                    .map(|s| (s.to_owned(), None, n))
                    .ok_or_else(|| ConfError::at(n, "Expected account names to be strings"))
            })
            .collect::<Result<_, _>>()?,
        Value::Map(m) => m.iter().map(|(k, v)| (k.to_string(), Some(v), v)).collect(),
        _ => {
            return Err(ConfError::at(
                item,
                format!(
                    "Expected map entries for accounts, got {}",
                    item.value.type_name()
                ),
            ))
        }
    };
    for (name, body, at) in entries {
        if body.is_some_and(|b| b.used_as_variable) {
            continue;
        }
        if RESERVED.contains(&name.as_str()) {
            return Err(ConfError::at(at, format!("{name:?} is a Reserved Account")));
        }
        if accounts.iter().any(|a: &AccountConfig| a.name == name) {
            return Err(ConfError::at(
                at,
                format!("Duplicate Account Entry: {name}"),
            ));
        }
        let mut account = AccountConfig {
            name,
            users: Vec::new(),
            nkeys: Vec::new(),
            jetstream: None,
        };
        if let Some(body) = body {
            parse_account(body, &mut account)?;
        }
        for user in account
            .users
            .iter()
            .map(|u| u.user.as_str())
            .chain(account.nkeys.iter().map(|u| u.nkey.as_str()))
        {
            if !seen_users.insert(user.to_owned()) {
                return Err(ConfError::at(
                    at,
                    format!("Duplicate user {user:?} detected"),
                ));
            }
        }
        accounts.push(account);
    }
    Ok(accounts)
}

fn parse_account(item: &Item, account: &mut AccountConfig) -> Result<(), ConfError> {
    let Some(block) = item.as_map() else {
        return Err(ConfError::at(item, "Expected map entries for accounts"));
    };
    let mut default_permissions = None;
    for (key, v) in block.iter() {
        match key.to_ascii_lowercase().as_str() {
            "users" => (account.nkeys, account.users) = parse_users(v)?,
            "jetstream" => account.jetstream = parse_jetstream(v)?,
            "default_permissions" => default_permissions = Some(parse_permissions(v)?),
            _ if v.used_as_variable => {}
            _ => {
                return Err(ConfError::at(
                    v,
                    format!("unknown field {key:?} in account {:?}", account.name),
                ))
            }
        }
    }
    if let Some(defaults) = default_permissions {
        for u in account.users.iter_mut().filter(|u| u.permissions.is_none()) {
            u.permissions = Some(defaults.clone());
        }
        for u in account.nkeys.iter_mut().filter(|u| u.permissions.is_none()) {
            u.permissions = Some(defaults.clone());
        }
    }
    Ok(())
}

/// An account's `jetstream`: a boolean, `enabled`/`disabled`, or a map of limits.
fn parse_jetstream(item: &Item) -> Result<Option<AccountLimits>, ConfError> {
    match &item.value {
        Value::Bool(on) => Ok(on.then(AccountLimits::default)),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "enabled" | "enable" => Ok(Some(AccountLimits::default())),
            "disabled" | "disable" => Ok(None),
            _ => Err(ConfError::at(
                item,
                format!("Expected 'enabled' or 'disabled' for string value, got '{s}'"),
            )),
        },
        Value::Map(m) => {
            let mut limits = AccountLimits::default();
            for (key, v) in m.iter() {
                let size = || -> Result<i64, ConfError> {
                    match &v.value {
                        Value::Integer(n) => Some(*n),
                        Value::String(s) => parse_size(s),
                        _ => None,
                    }
                    .ok_or_else(|| {
                        ConfError::at(v, format!("Expected a parseable size for {key:?}"))
                    })
                };
                match key.to_ascii_lowercase().as_str() {
                    "max_memory" | "max_mem" | "mem" | "memory" => limits.max_memory = size()?,
                    "max_store" | "max_file" | "max_disk" | "store" | "disk" => {
                        limits.max_storage = size()?
                    }
                    "max_streams" | "streams" => limits.max_streams = size()?,
                    "max_consumers" | "consumers" => limits.max_consumers = size()?,
                    "max_ack_pending" => limits.max_ack_pending = size()?,
                    "mem_max_stream_bytes" | "memory_max_stream_bytes" => {
                        limits.memory_max_stream_bytes = size()?
                    }
                    "disk_max_stream_bytes" | "store_max_stream_bytes" => {
                        limits.storage_max_stream_bytes = size()?
                    }
                    "max_bytes_required" | "max_stream_bytes" | "max_bytes" => {
                        limits.max_bytes_required = v.as_bool().ok_or_else(|| {
                            ConfError::at(v, format!("Expected a parseable bool for {key:?}"))
                        })?
                    }
                    _ if v.used_as_variable => {}
                    _ => {
                        return Err(ConfError::at(
                            v,
                            format!("unknown field {key:?} in an account's jetstream"),
                        ))
                    }
                }
            }
            Ok(Some(limits))
        }
        _ => Err(ConfError::at(
            item,
            format!(
                "Expected map, bool or string for an account's jetstream, got {}",
                item.value.type_name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<AccountConfig>, String> {
        let map = crate::conf::parse_str(text).map_err(|e| e.to_string())?;
        let item = map.get("accounts").expect("accounts key");
        parse_accounts(item).map_err(|e| e.to_string())
    }

    #[test]
    fn accounts_with_users_and_jetstream_limits() {
        let a = parse(
            "accounts {\n A: { users: [ {user: a, password: pa} ], jetstream: { max_file: 1K, \
             max_mem: \"2MB\", max_streams: 3, consumers: 4, max_bytes_required: true } }\n \
             B: { users: [ {user: b, password: pb} ], jetstream: enabled }\n C: { users: [ {user: c, \
             password: pc} ], default_permissions: { publish: \"c.>\" } }\n}\n",
        )
        .unwrap();
        assert_eq!(a.len(), 3);
        let js = a[0].jetstream.as_ref().unwrap();
        assert_eq!(
            (
                js.max_storage,
                js.max_memory,
                js.max_streams,
                js.max_consumers
            ),
            (1000, 2 << 20, 3, 4)
        );
        assert!(js.max_bytes_required);
        assert_eq!(js.max_ack_pending, -1);
        assert_eq!(a[1].jetstream, Some(AccountLimits::default()));
        assert_eq!(a[2].jetstream, None);
        assert_eq!(a[2].users[0].user, "c");
        assert!(
            a[2].users[0].permissions.is_some(),
            "default permissions applied"
        );
    }

    #[test]
    fn mistakes_are_refused() {
        let e = parse("accounts { $G: { } }").unwrap_err();
        assert!(e.contains("\"$G\" is a Reserved Account"), "{e}");
        let e =
            parse("accounts { A: { users: [{user: x}] }, B: { users: [{user: x}] } }").unwrap_err();
        assert!(e.contains("Duplicate user \"x\""), "{e}");
        let e = parse("accounts { A: { colour: red } }").unwrap_err();
        assert!(e.contains("unknown field \"colour\""), "{e}");
        let e = parse("accounts { A: { jetstream: maybe } }").unwrap_err();
        assert!(e.contains("Expected 'enabled' or 'disabled'"), "{e}");
        let e = parse("accounts { A: { jetstream: { max_file: lots } } }").unwrap_err();
        assert!(e.contains("parseable size"), "{e}");
        let e = parse("accounts: 5").unwrap_err();
        assert!(e.contains("Expected map entries"), "{e}");
    }

    #[test]
    fn a_list_of_names_makes_empty_accounts() {
        let a = parse("accounts: [A, B]").unwrap();
        assert_eq!(
            a.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
            ["A", "B"]
        );
        assert!(a
            .iter()
            .all(|a| a.users.is_empty() && a.jetstream.is_none()));
    }
}
