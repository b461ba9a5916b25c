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
//! account we do not enforce yet (`nkey`, `mappings`, `msg_trace`) are refused at start-up
//! through [`crate::options::UNSUPPORTED`], before this parser runs; unknown keys are an error,
//! as in nats-server.

use std::collections::BTreeSet;

use jsproto::api::account::AccountLimits;

use super::config::{parse_permissions, parse_users, NkeyUserConfig, UserConfig};
use crate::conf::{parse_size, ConfError, Item, Value};

mod cycles;

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
    /// `exports`: what other accounts may import from this one.
    pub exports: Vec<Export>,
    /// `imports`: streams and services this account takes from others.
    pub imports: Vec<Import>,
    /// `limits`: its connections, subscriptions and payloads.
    pub limits: ClientLimits,
}

/// An account's `limits { max_connections, max_subscriptions, max_payload }` (nats-server's
/// `parseAccountLimits`); `-1` (the default) or `0`: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// `max_connections` / `max_conn`: clients logged into the account at once; one more
    /// gets `-ERR 'maximum account active connections exceeded'` and is closed.
    pub max_connections: i64,
    /// `max_subscriptions` / `max_subs`: subscriptions per client; one more gets
    /// `-ERR 'maximum subscriptions exceeded'` (the connection stays).
    pub max_subscriptions: i64,
    /// `max_payload` / `max_pay`: bytes (headers and payload) per message; a larger one gets
    /// `-ERR 'Maximum Payload Violation'` and the client is closed.
    pub max_payload: i64,
    /// `max_leafnodes` / `max_leafs` (there are no leaf nodes here).
    pub max_leafnodes: i64,
}

impl Default for ClientLimits {
    /// No limits.
    fn default() -> Self {
        ClientLimits {
            max_connections: -1,
            max_subscriptions: -1,
            max_payload: -1,
            max_leafnodes: -1,
        }
    }
}

impl ClientLimits {
    /// `max_connections`, when set.
    pub fn connections(&self) -> Option<usize> {
        usize::try_from(self.max_connections)
            .ok()
            .filter(|&n| n > 0)
    }

    /// `max_subscriptions`, when set.
    pub fn subscriptions(&self) -> Option<usize> {
        usize::try_from(self.max_subscriptions)
            .ok()
            .filter(|&n| n > 0)
    }

    /// `max_payload`, when set.
    pub fn payload(&self) -> Option<usize> {
        usize::try_from(self.max_payload).ok().filter(|&n| n > 0)
    }
}

/// Whether an export or import is of a stream (messages flow to the importer's
/// subscribers) or of a service (the importer's requests reach the exporter's responders,
/// and their responses come back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    /// `stream`.
    Stream,
    /// `service`.
    Service,
}

/// How many responses a service export's request may get (`response` / `response_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseType {
    /// `singleton` (the default): one.
    #[default]
    Singleton,
    /// `stream`: any number, until the response threshold passes.
    Stream,
    /// `chunked`: as `stream`.
    Chunked,
}

/// Default `response_threshold`: how long a service import's response subject stays open
/// (nats-server's `DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD`, 2 minutes).
pub const DEFAULT_RESPONSE_THRESHOLD: std::time::Duration = std::time::Duration::from_secs(120);

/// One entry of an account's `exports`.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// Stream or service.
    pub kind: ShareKind,
    /// The exported subject (wildcards allowed).
    pub subject: String,
    /// `accounts`: the only accounts allowed to import it; empty: every account (public).
    pub accounts: Vec<String>,
    /// A service's `response` type (ignored for streams).
    pub response: ResponseType,
    /// A service's `response_threshold`.
    pub threshold: std::time::Duration,
}

/// One entry of an account's `imports`.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    /// Stream or service.
    pub kind: ShareKind,
    /// The exporting account.
    pub account: String,
    /// The subject in the exporting account (must lie within one of its exports).
    pub subject: String,
    /// The subject in this account: `prefix.subject` for a stream import with `prefix`, `to`
    /// when given (with the same wildcards in the same places), else `subject`.
    pub local: String,
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
            exports: Vec::new(),
            imports: Vec::new(),
            limits: ClientLimits::default(),
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
    check_imports(&accounts, item)?;
    Ok(accounts)
}

/// Every import names a defined account, lies within one of that account's exports of its
/// kind that this account may use (nats-server's `checkStreamImportAuthorized`), and closes
/// no loop with the imports before it ([`cycles`]); checked in nats-server's order (stream
/// imports, then service imports; here the accounts in the file's order), the first fault
/// reported with nats-server's words.
fn check_imports(accounts: &[AccountConfig], at: &Item) -> Result<(), ConfError> {
    let mut added = cycles::Added::new(accounts);
    for (kind, name) in [
        (ShareKind::Stream, "stream"),
        (ShareKind::Service, "service"),
    ] {
        for a in accounts {
            for i in a.imports.iter().filter(|i| i.kind == kind) {
                check_import(accounts, a, i, name, at)?;
                added.add(&a.name, i).map_err(|e| {
                    ConfError::at(
                        at,
                        format!("Error adding {name} import {:?}: {e}", i.subject),
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// The import `i` of `a` names a defined account and one of its exports open to `a`.
fn check_import(
    accounts: &[AccountConfig],
    a: &AccountConfig,
    i: &Import,
    kind: &str,
    at: &Item,
) -> Result<(), ConfError> {
    let Some(exporter) = accounts.iter().find(|e| e.name == i.account) else {
        return Err(ConfError::at(
            at,
            format!("{:?} account not defined for {kind} import", i.account),
        ));
    };
    let authorized = exporter.exports.iter().any(|e| {
        e.kind == i.kind
            && jsproto::subject::is_subset(i.subject.as_bytes(), e.subject.as_bytes())
            && (e.accounts.is_empty() || e.accounts.contains(&a.name))
    });
    if !authorized {
        return Err(ConfError::at(
            at,
            format!(
                "Error adding {kind} import {:?}: {kind} import not authorized",
                i.subject
            ),
        ));
    }
    Ok(())
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
            "exports" => account.exports = parse_exports(v)?,
            "imports" => account.imports = parse_imports(v)?,
            "limits" => account.limits = parse_limits(v)?,
            _ if v.used_as_variable => {}
            _ => return Err(ConfError::at(v, format!("unknown field {key:?}"))),
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

/// `limits { max_connections, max_subscriptions, max_payload, max_leafnodes }`.
fn parse_limits(item: &Item) -> Result<ClientLimits, ConfError> {
    let Some(m) = item.as_map() else {
        return Err(ConfError::at(
            item,
            "Expected account limits to be a map/struct",
        ));
    };
    let mut limits = ClientLimits::default();
    for (key, v) in m.iter() {
        let n = || -> Result<i64, ConfError> {
            match &v.value {
                Value::Integer(n) => Some(*n),
                Value::String(s) => parse_size(s),
                _ => None,
            }
            .ok_or_else(|| ConfError::at(v, format!("Expected a number for {key:?}")))
        };
        match key.to_ascii_lowercase().as_str() {
            "max_connections" | "max_conn" => limits.max_connections = n()?,
            "max_subscriptions" | "max_subs" => limits.max_subscriptions = n()?,
            "max_payload" | "max_pay" => limits.max_payload = n()?,
            "max_leafnodes" | "max_leafs" => limits.max_leafnodes = n()?,
            _ if v.used_as_variable => {}
            _ => {
                return Err(ConfError::at(
                    v,
                    format!("Unknown field {key:?} parsing account limits"),
                ))
            }
        }
    }
    Ok(limits)
}

fn entries<'a>(what: &str, item: &'a Item) -> Result<&'a [Item], ConfError> {
    match &item.value {
        Value::Array(a) => Ok(a),
        _ => Err(ConfError::at(
            item,
            format!("{what} should be an array, got {}", item.value.type_name()),
        )),
    }
}

fn text(key: &str, item: &Item) -> Result<String, ConfError> {
    item.as_str()
        .map(str::to_owned)
        .ok_or_else(|| ConfError::at(item, format!("Expected {key} to be a string")))
}

fn valid_subject(s: &str, at: &Item) -> Result<(), ConfError> {
    if jsproto::subject::is_valid_subject(s.as_bytes()) {
        Ok(())
    } else {
        Err(ConfError::at(at, format!("invalid subject {s:?}")))
    }
}

fn not_supported(key: &str, at: &Item) -> ConfError {
    ConfError::at(
        at,
        format!("{key:?} is not supported yet in an account's imports and exports"),
    )
}

/// `exports: [ { stream: SUBJECT } | { service: SUBJECT, response, response_threshold },
/// accounts: [..] ]` (nats-server's `parseExportStreamOrService`).
fn parse_exports(item: &Item) -> Result<Vec<Export>, ConfError> {
    let mut out = Vec::new();
    for entry in entries("Exports", item)? {
        let Some(m) = entry.as_map() else {
            return Err(ConfError::at(
                entry,
                "Export Items should be a map with type entry",
            ));
        };
        let mut export = Export {
            kind: ShareKind::Stream,
            subject: String::new(),
            accounts: Vec::new(),
            response: ResponseType::default(),
            threshold: DEFAULT_RESPONSE_THRESHOLD,
        };
        let mut service_only = None;
        for (key, v) in m.iter() {
            match key.to_ascii_lowercase().as_str() {
                "stream" | "service" => {
                    if !export.subject.is_empty() {
                        return Err(ConfError::at(v, "Detected both a stream and a service"));
                    }
                    export.kind = if key.eq_ignore_ascii_case("stream") {
                        ShareKind::Stream
                    } else {
                        ShareKind::Service
                    };
                    export.subject = text(key, v)?;
                    valid_subject(&export.subject, v)?;
                }
                "response" | "response_type" => {
                    service_only = Some(v);
                    export.response = match text(key, v)?.to_ascii_lowercase().as_str() {
                        "single" | "singleton" => ResponseType::Singleton,
                        "stream" => ResponseType::Stream,
                        "chunk" | "chunked" => ResponseType::Chunked,
                        other => {
                            return Err(ConfError::at(
                                v,
                                format!("Unknown response type: {other:?}"),
                            ))
                        }
                    };
                }
                "threshold" | "response_threshold" | "response_max_time" | "response_time" => {
                    service_only = Some(v);
                    let t = text(key, v)?;
                    let nanos = jsproto::duration::parse_go_duration(&t).ok_or_else(|| {
                        ConfError::at(
                            v,
                            format!(
                                "Expected response threshold to be a parseable time duration, \
                                 got {t:?}"
                            ),
                        )
                    })?;
                    export.threshold = std::time::Duration::from_nanos(nanos.max(0) as u64);
                }
                "accounts" => {
                    for a in entries("accounts", v)? {
                        export.accounts.push(text("account name", a)?);
                    }
                }
                "latency" | "account_token_position" | "allow_trace" => {
                    return Err(not_supported(key, v))
                }
                _ if v.used_as_variable => {}
                _ => return Err(ConfError::at(v, format!("unknown field {key:?}"))),
            }
        }
        if export.subject.is_empty() {
            return Err(ConfError::at(
                entry,
                "Export Items need a stream or a service",
            ));
        }
        if let (ShareKind::Stream, Some(v)) = (export.kind, service_only) {
            return Err(ConfError::at(
                v,
                "Detected response directive on non-service",
            ));
        }
        out.push(export);
    }
    Ok(out)
}

/// `imports: [ { stream: { account, subject }, prefix | to } | { service: { account, subject },
/// to } ]` (nats-server's `parseImportStreamOrService`).
fn parse_imports(item: &Item) -> Result<Vec<Import>, ConfError> {
    let mut out: Vec<Import> = Vec::new();
    for entry in entries("Imports", item)? {
        let Some(m) = entry.as_map() else {
            return Err(ConfError::at(
                entry,
                "Import Items should be a map with type entry",
            ));
        };
        let mut import = Import {
            kind: ShareKind::Stream,
            account: String::new(),
            subject: String::new(),
            local: String::new(),
        };
        let (mut prefix, mut to) = (None, None);
        for (key, v) in m.iter() {
            match key.to_ascii_lowercase().as_str() {
                "stream" | "service" => {
                    if !import.account.is_empty() {
                        return Err(ConfError::at(v, "Detected both a stream and a service"));
                    }
                    import.kind = if key.eq_ignore_ascii_case("stream") {
                        ShareKind::Stream
                    } else {
                        ShareKind::Service
                    };
                    let Some(inner) = v.as_map() else {
                        return Err(ConfError::at(
                            v,
                            format!("{key} import should be a map with account and subject"),
                        ));
                    };
                    for (k, x) in inner.iter() {
                        match k.to_ascii_lowercase().as_str() {
                            "account" => import.account = text(k, x)?,
                            "subject" => import.subject = text(k, x)?,
                            _ if x.used_as_variable => {}
                            _ => return Err(ConfError::at(x, format!("unknown field {k:?}"))),
                        }
                    }
                    if import.account.is_empty() || import.subject.is_empty() {
                        return Err(ConfError::at(v, "Expect an account name and a subject"));
                    }
                    valid_subject(&import.subject, v)?;
                }
                "prefix" => prefix = Some((text(key, v)?, v)),
                "to" => to = Some((text(key, v)?, v)),
                "share" | "allow_trace" => {
                    if v.as_bool() == Some(true) {
                        return Err(not_supported(key, v));
                    }
                }
                _ if v.used_as_variable => {}
                _ => return Err(ConfError::at(v, format!("unknown field {key:?}"))),
            }
        }
        if import.account.is_empty() {
            return Err(ConfError::at(
                entry,
                "Import Items need a stream or a service",
            ));
        }
        import.local = match (import.kind, prefix, to) {
            (_, Some(_), Some((_, at))) => {
                return Err(ConfError::at(at, "Can not have both 'prefix' and 'to'"))
            }
            (ShareKind::Service, Some((_, at)), None) => {
                return Err(ConfError::at(at, "Detected prefix on a service import"))
            }
            (ShareKind::Stream, Some((p, at)), None) => {
                let local = format!("{p}.{}", import.subject);
                valid_subject(&local, at)?;
                local
            }
            (_, None, Some((t, at))) => {
                valid_subject(&t, at)?;
                if crate::account::imports::SubjectMap::new(&import.subject, &t).is_none() {
                    return Err(ConfError::at(
                        at,
                        format!(
                            "'to' {t:?} must have as many '*' as {:?} and end in '>' if it does",
                            import.subject
                        ),
                    ));
                }
                t
            }
            (_, None, None) => import.subject.clone(),
        };
        if import.kind == ShareKind::Service
            && out.iter().any(|o| {
                o.kind == ShareKind::Service
                    && o.local == import.local
                    && o.account == import.account
            })
        {
            return Err(ConfError::at(
                entry,
                format!(
                    "Duplicate service import subject {:?}, previously used in import for account \
                     {:?}",
                    import.local, import.account
                ),
            ));
        }
        out.push(import);
    }
    Ok(out)
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
                    _ => return Err(ConfError::at(v, format!("unknown field {key:?}"))),
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
