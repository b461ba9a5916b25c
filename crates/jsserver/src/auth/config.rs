//! The `authorization { ... }` block and the top-level `no_auth_user`, read as nats-server reads
//! them (`parseAuthorization`, `parseUsers`, `parseUserPermissions` in `server/opts.go`): the
//! same keys and aliases, the same defaults, and the same mistakes refused at start-up.
//!
//! ```text
//! authorization {
//!   timeout: 2                      # seconds to send CONNECT (a number or "2s")
//!   token: "s3cret"                 # or
//!   user: derek, password: "..."    # or
//!   users: [
//!     { user: alice, password: "$2a$11$...", permissions: { publish: "orders.>" } }
//!     { nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4 }
//!   ]
//!   default_permissions: { subscribe: { deny: "secret.>" } }
//! }
//! no_auth_user: alice
//! ```
//!
//! Stricter than nats-server (which then runs without authentication): a password without a
//! user (block or `--pass`) is refused.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use jsproto::subject::is_valid_subject;

use crate::conf::{ConfError, Item, Map, Value};

/// How long a client has to send CONNECT when authentication is required: 2 s, nats-server's
/// `AUTH_TIMEOUT` (without TLS).
pub const DEFAULT_AUTH_TIMEOUT: Duration = Duration::from_secs(2);
/// Replies a requester may send per request with `allow_responses` (nats-server's
/// `DEFAULT_ALLOW_RESPONSE_MAX_MSGS`).
pub const DEFAULT_RESPONSE_MAX_MSGS: i64 = 1;
/// How long a reply subject stays publishable with `allow_responses` (nats-server's
/// `DEFAULT_ALLOW_RESPONSE_EXPIRATION`, 2 minutes).
pub const DEFAULT_RESPONSE_EXPIRES: Duration = Duration::from_secs(120);

/// A password or token: compared, never shown (`Debug` prints `[REDACTED]`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, for comparing.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether none was given (nats-server treats an empty value as unset).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("[REDACTED]")
        }
    }
}

/// Who may connect, and what they may do: the `authorization` block, `no_auth_user` and the
/// `--user`/`--pass`/`--auth` flags. Empty strings mean "not set", as in nats-server.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthOptions {
    /// The single user (`authorization { user }`, `--user`).
    pub user: String,
    /// Its password, plain or bcrypt (`authorization { password }`, `--pass`).
    pub password: Secret,
    /// The token (`authorization { token }`, `--auth`), plain or bcrypt.
    pub token: Secret,
    /// `users: [...]` entries with a user name.
    pub users: Vec<UserConfig>,
    /// `users: [...]` entries with an `nkey`.
    pub nkeys: Vec<NkeyUserConfig>,
    /// Time to send CONNECT (`authorization { timeout }`). Default [`DEFAULT_AUTH_TIMEOUT`].
    pub timeout: Duration,
    /// The user (or nkey) taken by a client that sends no credentials (`no_auth_user`).
    pub no_auth_user: String,
    /// `authorization { proxy_required: true }`: the single user or token only through a
    /// trusted proxy. No proxy can be trusted here (`proxies` is refused), so such logins fail.
    pub proxy_required: bool,
    /// The `accounts` block: accounts with their own users (the users above belong to the
    /// global account `$G`).
    pub accounts: Vec<super::accounts::AccountConfig>,
    /// `system_account` / `system`: the account of the server's own events and monitoring
    /// requests ([`crate::system`]); empty: none.
    pub system_account: String,
}

impl Default for AuthOptions {
    fn default() -> Self {
        AuthOptions {
            user: String::new(),
            password: Secret::default(),
            token: Secret::default(),
            users: Vec::new(),
            nkeys: Vec::new(),
            timeout: DEFAULT_AUTH_TIMEOUT,
            no_auth_user: String::new(),
            proxy_required: false,
            accounts: Vec::new(),
            system_account: String::new(),
        }
    }
}

impl AuthOptions {
    /// Whether clients must authenticate (INFO `auth_required`, before `no_auth_user`): users
    /// or nkeys, a single user, or a token configured.
    pub fn required(&self) -> bool {
        self.all_users().next().is_some()
            || self.all_nkeys().next().is_some()
            || !self.user.is_empty()
            || !self.token.is_empty()
    }

    /// Every user with a user name and the account it belongs to: the `authorization`
    /// block's (in the global account `$G`), then each account's.
    pub fn all_users(&self) -> impl Iterator<Item = (&UserConfig, &str)> {
        let global = self
            .users
            .iter()
            .map(|u| (u, super::accounts::GLOBAL_ACCOUNT));
        global.chain(
            self.accounts
                .iter()
                .flat_map(|a| a.users.iter().map(move |u| (u, a.name.as_str()))),
        )
    }

    /// Every nkey user and its account, as [`AuthOptions::all_users`].
    pub fn all_nkeys(&self) -> impl Iterator<Item = (&NkeyUserConfig, &str)> {
        let global = self
            .nkeys
            .iter()
            .map(|u| (u, super::accounts::GLOBAL_ACCOUNT));
        global.chain(
            self.accounts
                .iter()
                .flat_map(|a| a.nkeys.iter().map(move |u| (u, a.name.as_str()))),
        )
    }

    /// Cross-checks once the config file and flags are merged (nats-server's `validateAuth`).
    ///
    /// # Errors
    /// A message naming the problem: a `system_account` that is not configured, the same user or nkey twice (in the `authorization`
    /// block and an account, or in two accounts), a password without a user, or a
    /// `no_auth_user` that is not one of the users or nkeys.
    pub fn validate(&self) -> Result<(), String> {
        let sys = &self.system_account;
        if !sys.is_empty() && !self.accounts.iter().any(|a| &a.name == sys) {
            return Err(format!(
                "system_account: {sys:?} is not an account of the accounts block"
            ));
        }
        let mut names = BTreeSet::new();
        for name in self
            .all_users()
            .map(|(u, _)| u.user.as_str())
            .chain(self.all_nkeys().map(|(u, _)| u.nkey.as_str()))
        {
            if !names.insert(name) {
                return Err(format!("Duplicate user {name:?} detected"));
            }
        }
        if !self.password.is_empty() && self.user.is_empty() {
            return Err(
                "authorization: a password is set without a user (jsserver refuses this \
                 rather than run without authentication)"
                    .into(),
            );
        }
        let n = &self.no_auth_user;
        if n.is_empty() {
            return Ok(());
        }
        if self.all_users().next().is_none() && self.all_nkeys().next().is_none() {
            return Err(format!(
                "no_auth_user: {n:?} present, but users/nkeys are not defined"
            ));
        }
        if self.all_users().any(|(u, _)| &u.user == n)
            || self.all_nkeys().any(|(u, _)| &u.nkey == n)
        {
            return Ok(());
        }
        Err(format!(
            "no_auth_user: {n:?} not present as user or nkey in authorization block or account \
             configuration"
        ))
    }
}

/// A `users` entry with a user name.
#[derive(Debug, Clone, PartialEq)]
pub struct UserConfig {
    /// `user` / `username`.
    pub user: String,
    /// `pass` / `password`, plain or bcrypt.
    pub password: Secret,
    /// Its own `permissions`, else the block's `default_permissions`; `None`: everything.
    pub permissions: Option<Permissions>,
    /// `allowed_connection_types` (upper case); empty: all.
    pub connection_types: BTreeSet<String>,
    /// `proxy_required: true` (such logins fail: no proxy is trusted).
    pub proxy_required: bool,
}

/// A `users` entry with an `nkey`.
#[derive(Debug, Clone, PartialEq)]
pub struct NkeyUserConfig {
    /// The user's public nkey (`U...`).
    pub nkey: String,
    /// As [`UserConfig::permissions`].
    pub permissions: Option<Permissions>,
    /// As [`UserConfig::connection_types`].
    pub connection_types: BTreeSet<String>,
    /// As [`UserConfig::proxy_required`].
    pub proxy_required: bool,
}

/// A user's `permissions { publish, subscribe, allow_responses }`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Permissions {
    /// `publish` / `pub` (`import`).
    pub publish: Option<SubjectPermission>,
    /// `subscribe` / `sub` (`export`); entries may be `"subject queue"`.
    pub subscribe: Option<SubjectPermission>,
    /// `allow_responses` / `publish_allow_responses`.
    pub response: Option<ResponsePermission>,
}

/// `allow` and `deny` subject lists.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SubjectPermission {
    /// `None`: no allow list (everything not denied). `Some(empty)` only for publish with
    /// `allow_responses` and no allow list: nothing but replies.
    pub allow: Option<Vec<String>>,
    /// Denied subjects (wildcards allowed).
    pub deny: Vec<String>,
}

/// `allow_responses`: a client that received a request may publish to its reply subject.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsePermission {
    /// Replies per request (`max`); negative: unlimited. Default [`DEFAULT_RESPONSE_MAX_MSGS`].
    pub max_msgs: i64,
    /// How long the reply subject stays open (`expires`); `None`: forever (a negative value).
    /// Default [`DEFAULT_RESPONSE_EXPIRES`].
    pub expires: Option<Duration>,
}

impl Default for ResponsePermission {
    fn default() -> Self {
        ResponsePermission {
            max_msgs: DEFAULT_RESPONSE_MAX_MSGS,
            expires: Some(DEFAULT_RESPONSE_EXPIRES),
        }
    }
}

/// What an `authorization` block sets.
#[derive(Debug, Default)]
pub struct AuthorizationBlock {
    /// `user` / `username`.
    pub user: String,
    /// `pass` / `password`.
    pub password: Secret,
    /// `token`.
    pub token: Secret,
    /// `users` entries with a user name.
    pub users: Vec<UserConfig>,
    /// `users` entries with an nkey.
    pub nkeys: Vec<NkeyUserConfig>,
    /// `timeout`, if given (and not zero).
    pub timeout: Option<Duration>,
    /// `proxy_required`.
    pub proxy_required: bool,
}

fn type_name(item: &Item) -> &'static str {
    item.value.type_name()
}

fn string(key: &str, item: &Item) -> Result<String, ConfError> {
    item.as_str().map(str::to_owned).ok_or_else(|| {
        ConfError::at(
            item,
            format!("{key}: expected a string, got {}", type_name(item)),
        )
    })
}

fn boolean(key: &str, item: &Item) -> Result<bool, ConfError> {
    item.as_bool().ok_or_else(|| {
        ConfError::at(
            item,
            format!("{key}: expected a boolean, got {}", type_name(item)),
        )
    })
}

fn map<'a>(key: &str, item: &'a Item) -> Result<&'a Map, ConfError> {
    item.as_map().ok_or_else(|| {
        ConfError::at(
            item,
            format!("{key}: expected a map, got {}", type_name(item)),
        )
    })
}

/// `unknown field "KEY"`, as nats-server, unless the key is only a variable.
fn unknown(key: &str, item: &Item) -> Result<(), ConfError> {
    crate::conf::unknown_field(key, item).map_or(Ok(()), Err)
}

/// Parses an `authorization` block (nats-server's `parseAuthorization`). Warnings (a high
/// timeout, plain-text passwords) are added to `warnings`.
///
/// # Errors
/// A wrong type or unknown key, an invalid subject in permissions, an invalid nkey, a user
/// entry without a user, duplicate users or nkeys, or both a user/password and a token (or
/// either with a `users` array); each names the file and line.
pub fn parse_authorization(
    item: &Item,
    warnings: &mut Vec<String>,
) -> Result<AuthorizationBlock, ConfError> {
    let block = map("authorization", item)?;
    let mut auth = AuthorizationBlock::default();
    let mut users_given = false;
    let mut default_permissions = None;
    for (key, v) in block.iter() {
        match key.to_ascii_lowercase().as_str() {
            "user" | "username" => auth.user = string(key, v)?,
            "pass" | "password" => auth.password = Secret::new(string(key, v)?),
            "token" => auth.token = Secret::new(string(key, v)?),
            "timeout" => {
                let seconds = match &v.value {
                    Value::Integer(n) => *n as f64,
                    Value::Float(f) => *f,
                    Value::String(s) => {
                        let nanos = jsproto::duration::parse_go_duration(s).ok_or_else(|| {
                            ConfError::at(
                                v,
                                format!(
                                    "error parsing authorization config, 'timeout' {s:?} is not \
                                     a duration"
                                ),
                            )
                        })?;
                        nanos as f64 / 1e9
                    }
                    _ => {
                        return Err(ConfError::at(
                            v,
                            "error parsing authorization config, 'timeout' wrong type",
                        ))
                    }
                };
                if !seconds.is_finite() || seconds < 0.0 {
                    return Err(ConfError::at(
                        v,
                        "error parsing authorization config, 'timeout' must not be negative",
                    ));
                }
                if seconds > 60.0 {
                    warnings.push(
                        ConfError::at(
                            v,
                            format!(
                                "timeout of {seconds} seconds is high, consider keeping it under \
                                 60 seconds. possibly caused by unquoted duration; use '1m' \
                                 instead of 1m, for example"
                            ),
                        )
                        .to_string(),
                    );
                }
                auth.timeout = (seconds > 0.0).then(|| Duration::from_secs_f64(seconds));
            }
            "users" => {
                let (nkeys, users) = parse_users(v)?;
                users_given = true;
                auth.nkeys = nkeys;
                auth.users = users;
            }
            "default_permission" | "default_permissions" | "permissions" => {
                default_permissions = Some(parse_permissions(v)?);
            }
            "proxy_required" => auth.proxy_required = boolean(key, v)?,
            _ => unknown(key, v)?,
        }
    }
    if let Some(defaults) = default_permissions {
        for u in auth.users.iter_mut().filter(|u| u.permissions.is_none()) {
            u.permissions = Some(defaults.clone());
        }
        for u in auth.nkeys.iter_mut().filter(|u| u.permissions.is_none()) {
            u.permissions = Some(defaults.clone());
        }
    }
    if (!auth.user.is_empty() || !auth.password.is_empty()) && !auth.token.is_empty() {
        return Err(ConfError::at(item, "Cannot have a user/pass and token"));
    }
    if users_given && !auth.user.is_empty() {
        return Err(ConfError::at(
            item,
            "Can not have a single user/pass and a users array",
        ));
    }
    if users_given && !auth.token.is_empty() {
        return Err(ConfError::at(
            item,
            "Can not have a token and a users array",
        ));
    }
    let mut names = BTreeSet::new();
    for u in &auth.users {
        if !names.insert(u.user.as_str()) {
            return Err(ConfError::at(
                item,
                format!("Duplicate user {:?} detected", u.user),
            ));
        }
    }
    for u in &auth.nkeys {
        if !names.insert(u.nkey.as_str()) {
            return Err(ConfError::at(
                item,
                format!("Duplicate nkey {:?} detected", u.nkey),
            ));
        }
    }
    let plain = |p: &Secret| !p.is_empty() && !super::is_bcrypt(p.expose());
    if plain(&auth.password)
        || auth
            .users
            .iter()
            .any(|u| !super::is_bcrypt(u.password.expose()))
    {
        let warning = "Plaintext passwords detected, use nkeys or bcrypt";
        // Said once, whichever of this block and `accounts` comes first.
        if !warnings.iter().any(|w| w == warning) {
            warnings.push(warning.into());
        }
    }
    Ok(auth)
}

/// A `users` array (nats-server's `parseUsers`): user/password entries and nkey entries.
pub(crate) fn parse_users(
    item: &Item,
) -> Result<(Vec<NkeyUserConfig>, Vec<UserConfig>), ConfError> {
    let Value::Array(entries) = &item.value else {
        return Err(ConfError::at(
            item,
            format!(
                "Expected users field to be an array, got {}",
                type_name(item)
            ),
        ));
    };
    let mut nkeys = Vec::new();
    let mut users = Vec::new();
    for entry in entries {
        let Some(fields) = entry.as_map() else {
            return Err(ConfError::at(
                entry,
                format!(
                    "Expected user entry to be a map/struct, got {}",
                    type_name(entry)
                ),
            ));
        };
        let (mut nkey, mut user, mut password) = (String::new(), String::new(), Secret::default());
        let mut permissions = None;
        let mut connection_types = BTreeSet::new();
        let mut proxy_required = false;
        for (key, v) in fields.iter() {
            match key.to_ascii_lowercase().as_str() {
                "nkey" => nkey = string(key, v)?,
                "user" | "username" => user = string(key, v)?,
                "pass" | "password" => password = Secret::new(string(key, v)?),
                "permission" | "permissions" | "authorization" => {
                    permissions = Some(parse_permissions(v)?);
                }
                "allowed_connection_types" | "connection_types" | "clients" => {
                    connection_types = parse_connection_types(v)?;
                }
                "proxy_required" => proxy_required = boolean(key, v)?,
                _ => unknown(key, v)?,
            }
        }
        if nkey.is_empty() && user.is_empty() {
            return Err(ConfError::at(entry, "User entry requires a user"));
        }
        if nkey.is_empty() {
            users.push(UserConfig {
                user,
                password,
                permissions,
                connection_types,
                proxy_required,
            });
            continue;
        }
        if !is_valid_public_user_key(&nkey) {
            return Err(ConfError::at(entry, "Not a valid public nkey for a user"));
        }
        if !user.is_empty() || !password.is_empty() {
            return Err(ConfError::at(
                entry,
                "Nkey users do not take usernames or passwords",
            ));
        }
        nkeys.push(NkeyUserConfig {
            nkey,
            permissions,
            connection_types,
            proxy_required,
        });
    }
    Ok((nkeys, users))
}

/// Whether `key` is a user's public nkey (`U` and 55 more base32 characters, good checksum).
pub fn is_valid_public_user_key(key: &str) -> bool {
    key.starts_with('U')
        && nkeys::KeyPair::from_public_key(key)
            .is_ok_and(|k| k.key_pair_type() == nkeys::KeyPairType::User)
}

/// `allowed_connection_types` (a name or a list of names): see [`super::conn_types`].
fn parse_connection_types(item: &Item) -> Result<BTreeSet<String>, ConfError> {
    const FIELD: &str = "allowed connection types";
    let values: Vec<&Item> = match &item.value {
        Value::Array(a) => a.iter().collect(),
        Value::String(_) => vec![item],
        _ => {
            return Err(ConfError::at(
                item,
                format!(
                    "error parsing {FIELD}: unsupported type {}",
                    type_name(item)
                ),
            ))
        }
    };
    let mut names = Vec::with_capacity(values.len());
    for v in values {
        names.push(v.as_str().ok_or_else(|| {
            ConfError::at(
                v,
                format!(
                    "error parsing {FIELD}: unsupported type in array {}",
                    type_name(v)
                ),
            )
        })?);
    }
    super::conn_types::parse_connection_types(names).map_err(|e| ConfError::at(item, e))
}

/// A `permissions` map (nats-server's `parseUserPermissions`).
pub fn parse_permissions(item: &Item) -> Result<Permissions, ConfError> {
    let Some(fields) = item.as_map() else {
        return Err(ConfError::at(
            item,
            format!(
                "Expected permissions to be a map/struct, got {}",
                type_name(item)
            ),
        ));
    };
    let mut p = Permissions::default();
    for (key, v) in fields.iter() {
        match key.to_ascii_lowercase().as_str() {
            "pub" | "publish" | "import" => p.publish = parse_subject_permission(v, false)?,
            "sub" | "subscribe" | "export" => p.subscribe = parse_subject_permission(v, true)?,
            "publish_allow_responses" | "allow_responses" => {
                p.response = match &v.value {
                    Value::Bool(true) => Some(ResponsePermission::default()),
                    Value::Bool(false) => None,
                    Value::Map(m) => Some(parse_allow_responses(m)?),
                    _ => {
                        return Err(ConfError::at(
                            v,
                            "error parsing response permissions, expected a boolean or a map",
                        ))
                    }
                };
            }
            _ => {
                if !v.used_as_variable {
                    return Err(ConfError::at(
                        v,
                        format!("Unknown field {key:?} parsing permissions"),
                    ));
                }
            }
        }
    }
    if p.response.is_some() {
        // Replies only, unless publish has an allow list of its own.
        let publish = p.publish.get_or_insert_with(SubjectPermission::default);
        publish.allow.get_or_insert_with(Vec::new);
    }
    Ok(p)
}

fn parse_allow_responses(m: &Map) -> Result<ResponsePermission, ConfError> {
    let mut rp = ResponsePermission::default();
    for (key, v) in m.iter() {
        match key.to_ascii_lowercase().as_str() {
            "max" | "max_msgs" | "max_messages" | "max_responses" => {
                let n = v.as_int().ok_or_else(|| {
                    ConfError::at(
                        v,
                        format!("{key}: expected an integer, got {}", type_name(v)),
                    )
                })?;
                // 0 keeps the default; negative means unlimited.
                if n != 0 {
                    rp.max_msgs = n;
                }
            }
            "expires" | "expiration" | "ttl" => {
                let Some(s) = v.as_str() else {
                    return Err(ConfError::at(
                        v,
                        "error parsing expires, not a duration string",
                    ));
                };
                let nanos = jsproto::duration::parse_go_duration(s).ok_or_else(|| {
                    ConfError::at(v, format!("error parsing expires: invalid duration {s:?}"))
                })?;
                // 0 keeps the default; negative means never.
                if nanos < 0 {
                    rp.expires = None;
                } else if nanos > 0 {
                    rp.expires = Some(Duration::from_nanos(nanos as u64));
                }
            }
            _ => {
                if !v.used_as_variable {
                    return Err(ConfError::at(
                        v,
                        format!("Unknown field {key:?} parsing permissions"),
                    ));
                }
            }
        }
    }
    Ok(rp)
}

/// `publish`/`subscribe`: a map with `allow` and `deny`, or (the old style) a subject or an
/// array of subjects to allow. An empty map is no permission at all.
fn parse_subject_permission(
    item: &Item,
    allow_queue: bool,
) -> Result<Option<SubjectPermission>, ConfError> {
    let Value::Map(m) = &item.value else {
        let allow = parse_subjects(item, allow_queue)?;
        return Ok(Some(SubjectPermission {
            allow: (!allow.is_empty()).then_some(allow),
            deny: Vec::new(),
        }));
    };
    if m.is_empty() {
        return Ok(None);
    }
    let mut p = SubjectPermission::default();
    for (key, v) in m.iter() {
        match key.to_ascii_lowercase().as_str() {
            "allow" => {
                let allow = parse_subjects(v, allow_queue)?;
                p.allow = (!allow.is_empty()).then_some(allow);
            }
            "deny" => p.deny = parse_subjects(v, allow_queue)?,
            _ => {
                if !v.used_as_variable {
                    return Err(ConfError::at(
                        v,
                        format!(
                            "Unknown field name {key:?} parsing subject permissions, only \
                             'allow' or 'deny' are permitted"
                        ),
                    ));
                }
            }
        }
    }
    Ok(Some(p))
}

fn parse_subjects(item: &Item, allow_queue: bool) -> Result<Vec<String>, ConfError> {
    let subjects = match &item.value {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|v| {
                v.as_str().map(str::to_owned).ok_or_else(|| {
                    ConfError::at(v, "Subject in permissions array cannot be cast to string")
                })
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ConfError::at(
                item,
                format!(
                    "Expected subject permissions to be a subject, or array of subjects, got {}",
                    type_name(item)
                ),
            ))
        }
    };
    for s in &subjects {
        check_permission_subject(s, allow_queue).map_err(|e| ConfError::at(item, e))?;
    }
    Ok(subjects)
}

/// A permission subject is a valid subject; for subscribe it may be `"subject queue"`.
fn check_permission_subject(s: &str, allow_queue: bool) -> Result<(), String> {
    if is_valid_subject(s.as_bytes()) {
        return Ok(());
    }
    let bad = || format!("subject {s:?} is not a valid subject");
    if !allow_queue {
        return Err(bad());
    }
    let parts: Vec<&str> = s.split_ascii_whitespace().collect();
    match parts.as_slice() {
        [subject, queue] => {
            if !is_valid_subject(subject.as_bytes()) {
                Err(format!("subject {subject:?} is not a valid subject"))
            } else if !is_valid_subject(queue.as_bytes()) {
                Err(format!("queue {queue:?} is not a valid queue"))
            } else {
                Ok(())
            }
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf;

    fn block(text: &str) -> Result<AuthorizationBlock, ConfError> {
        let m = conf::parse_str(text).unwrap();
        let item = m.get("authorization").expect("an authorization block");
        parse_authorization(item, &mut Vec::new())
    }

    fn err(text: &str) -> String {
        match block(text) {
            Ok(b) => panic!("{text}: parsed as {b:?}"),
            Err(e) => e.to_string(),
        }
    }

    const NKEY: &str = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4";

    #[test]
    fn single_user_token_and_timeout() {
        let b = block("authorization { user: derek, password: pw, timeout: 0.5 }").unwrap();
        assert_eq!(b.user, "derek");
        assert_eq!(b.password.expose(), "pw");
        assert_eq!(b.timeout, Some(Duration::from_millis(500)));
        let b = block("authorization { token: \"s3cret\", timeout: \"3s\" }").unwrap();
        assert_eq!(b.token.expose(), "s3cret");
        assert_eq!(b.timeout, Some(Duration::from_secs(3)));
        assert_eq!(format!("{:?}", b.token), "[REDACTED]");
        let mut w = Vec::new();
        let m = conf::parse_str("authorization { token: t, timeout: 120 }").unwrap();
        parse_authorization(m.get("authorization").unwrap(), &mut w).unwrap();
        assert!(w[0].contains("is high"), "{w:?}");
    }

    #[test]
    fn users_nkeys_and_default_permissions() {
        let b = block(&format!(
            "authorization {{\n default_permissions: {{ publish: \"a.>\" }}\n users: [\n \
             {{user: alice, password: x, permissions: {{ subscribe: [\"b\", \"c.* q1\"] }} }}\n \
             {{user: bob, password: y}}\n {{nkey: {NKEY}}}\n ]\n}}"
        ))
        .unwrap();
        assert_eq!(b.users.len(), 2);
        let alice = b.users[0].permissions.as_ref().unwrap();
        assert!(alice.publish.is_none());
        assert_eq!(
            alice.subscribe.as_ref().unwrap().allow.as_deref(),
            Some(&["b".to_string(), "c.* q1".to_string()][..])
        );
        let bob = b.users[1].permissions.as_ref().unwrap();
        assert_eq!(
            bob.publish.as_ref().unwrap().allow.as_deref(),
            Some(&["a.>".to_string()][..])
        );
        assert_eq!(b.nkeys[0].nkey, NKEY);
        assert!(b.nkeys[0].permissions.is_some());
    }

    #[test]
    fn allow_responses_forms() {
        let b = block(
            "authorization { users: [ {user: a, password: b, permissions: { allow_responses: true }} ] }",
        )
        .unwrap();
        let p = b.users[0].permissions.as_ref().unwrap();
        assert_eq!(p.response, Some(ResponsePermission::default()));
        // Replies only: an empty allow list.
        assert_eq!(p.publish.as_ref().unwrap().allow.as_deref(), Some(&[][..]));
        let b = block(
            "authorization { users: [ {user: a, password: b, permissions: { publish: { deny: x }, \
             allow_responses: { max: 5, expires: \"1m\" } }} ] }",
        )
        .unwrap();
        let p = b.users[0].permissions.as_ref().unwrap();
        assert_eq!(
            p.response,
            Some(ResponsePermission {
                max_msgs: 5,
                expires: Some(Duration::from_secs(60))
            })
        );
        assert_eq!(p.publish.as_ref().unwrap().deny, ["x"]);
        let b = block(
            "authorization { users: [ {user: a, password: b, permissions: { \
             allow_responses: { max: -1, expires: \"-1s\" } }} ] }",
        )
        .unwrap();
        let p = b.users[0].permissions.as_ref().unwrap();
        assert_eq!(p.response.as_ref().unwrap().max_msgs, -1);
        assert_eq!(p.response.as_ref().unwrap().expires, None);
    }

    #[test]
    fn mistakes_nats_server_refuses() {
        let cases: &[(&str, &str)] = &[
            ("authorization { user: a, token: t }", "Cannot have a user/pass and token"),
            (
                "authorization { user: a, users: [] }",
                "Can not have a single user/pass and a users array",
            ),
            (
                "authorization { token: t, users: [] }",
                "Can not have a token and a users array",
            ),
            (
                "authorization { users: [ {user: a}, {user: a} ] }",
                "Duplicate user \"a\" detected",
            ),
            ("authorization { users: [ {password: a} ] }", "User entry requires a user"),
            (
                "authorization { users: [ {nkey: UABC} ] }",
                "Not a valid public nkey for a user",
            ),
            ("authorization { users: {user: a} }", "Expected users field to be an array"),
            ("authorization { users: [ a ] }", "Expected user entry to be a map/struct"),
            ("authorization { bogus: 1 }", "unknown field \"bogus\""),
            ("authorization { users: [ {user: a, colour: red} ] }", "unknown field \"colour\""),
            (
                "authorization { users: [ {user: a, permissions: { publish: \"a..b\" }} ] }",
                "subject \"a..b\" is not a valid subject",
            ),
            (
                "authorization { users: [ {user: a, permissions: { subscribe: \"a b c\" }} ] }",
                "is not a valid subject",
            ),
            (
                "authorization { users: [ {user: a, permissions: { publish: \"a q\" }} ] }",
                "is not a valid subject",
            ),
            (
                "authorization { users: [ {user: a, permissions: { publish: { allow: a, only: b } }} ] }",
                "only 'allow' or 'deny' are permitted",
            ),
            (
                "authorization { users: [ {user: a, permissions: { write: a }} ] }",
                "Unknown field \"write\" parsing permissions",
            ),
            (
                "authorization { users: [ {user: a, permissions: { allow_responses: { expires: 5 } }} ] }",
                "not a duration string",
            ),
            (
                "authorization { users: [ {user: a, connection_types: [\"CARRIER_PIGEON\", standard, foo]} ] }",
                "invalid connection types [\"CARRIER_PIGEON\" \"FOO\"]",
            ),
            ("authorization { timeout: true }", "'timeout' wrong type"),
            ("authorization: 5", "expected a map"),
        ];
        for (text, needle) in cases {
            let e = err(text);
            assert!(e.contains(needle), "{text}: {e}");
        }
        let e = err(&format!(
            "authorization {{ users: [ {{nkey: {NKEY}, user: a}} ] }}"
        ));
        assert!(
            e.contains("Nkey users do not take usernames or passwords"),
            "{e}"
        );
    }

    #[test]
    fn no_auth_user_must_be_a_user() {
        let mut o = AuthOptions {
            no_auth_user: "x".into(),
            ..AuthOptions::default()
        };
        assert!(o
            .validate()
            .unwrap_err()
            .contains("users/nkeys are not defined"));
        o.users.push(UserConfig {
            user: "a".into(),
            password: Secret::default(),
            permissions: None,
            connection_types: BTreeSet::new(),
            proxy_required: false,
        });
        assert!(o
            .validate()
            .unwrap_err()
            .contains("not present as user or nkey"));
        o.no_auth_user = "a".into();
        o.validate().unwrap();
        let o = AuthOptions {
            password: Secret::new("p"),
            ..AuthOptions::default()
        };
        assert!(o.validate().unwrap_err().contains("without a user"));
    }
}
