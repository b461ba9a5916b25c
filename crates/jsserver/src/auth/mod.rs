//! Client authentication and authorization, as nats-server's (`server/auth.go`).
//!
//! - [`config`]: the `authorization { }` block, `no_auth_user` and their checks.
//! - [`perms`]: a user's publish/subscribe permissions and `allow_responses`, as the
//!   connection applies them.
//! - `tls_map`: `verify_and_map`, the client certificate naming the user.
//! - [`conn_types`]: `allowed_connection_types`, and which type a connection is (a user
//!   limited to types is refused, as an unknown user, on a connection of another type).
//! - this module: [`Authenticator`], which decides a CONNECT: nkey (the client signs the
//!   INFO `nonce`), users with passwords (plain or bcrypt), a single user, or a token, in
//!   nats-server's order, and `no_auth_user` for clients that send no credentials.
//!
//! A failed CONNECT gets `-ERR 'Authorization Violation'` and is closed (the connection does
//! that); it is logged without the secret, at most [`FAILURE_LOG_BURST`] lines a second.
//! Plain secrets are compared in constant time; bcrypt hashes with bcrypt's own verify.

pub mod accounts;
pub mod config;
pub mod conn_types;
pub mod perms;
mod tls_map;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use jsproto::wire::Connect;
use rand::Rng as _;
use subtle::ConstantTimeEq as _;

use config::{AuthOptions, NkeyUserConfig, Secret, UserConfig};
pub use conn_types::ConnectionType;
use perms::ClientPerms;

/// Raw bytes of the INFO nonce (nats-server's `nonceRawLen`); sent as 15 characters of
/// unpadded URL-safe base64.
const NONCE_RAW_LEN: usize = 11;

/// Authentication failures and permission violations logged per second at most; the rest are
/// counted and reported in one line when logging resumes.
pub const FAILURE_LOG_BURST: u32 = 20;

/// bcrypt verifications running at once (each takes a core for tens of milliseconds, by
/// design); more logins wait their turn.
const SLOW_CHECKS: usize = 2;

/// Whether `s` is a bcrypt hash as nats-server recognises one: `$2a$`, `$2b$`, `$2x$` or
/// `$2y$`, two cost digits, `$`.
pub fn is_bcrypt(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 7
        && b.starts_with(b"$2")
        && matches!(b[2], b'a' | b'b' | b'x' | b'y')
        && b[3] == b'$'
        && b[4].is_ascii_digit()
        && b[5].is_ascii_digit()
        && b[6] == b'$'
}

/// Compares a configured password or token with the client's: bcrypt's verify for a hash,
/// else in constant time (for equal lengths).
pub(crate) fn compare_secret(configured: &str, given: &str) -> bool {
    if is_bcrypt(configured) {
        return bcrypt::verify(given, configured).unwrap_or(false);
    }
    bool::from(configured.as_bytes().ct_eq(given.as_bytes()))
}

/// Who a client authenticated as.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The user's permissions; `None`: everything is allowed.
    pub perms: Option<Arc<ClientPerms>>,
    /// `user:NAME`, `nkey:KEY` or `token` (empty without authentication), for log lines.
    pub label: String,
    /// The account the client works in: its subject space and its JetStream
    /// ([`accounts::GLOBAL_ACCOUNT`] for every client not of an `accounts` block user).
    pub account: Arc<str>,
}

impl Default for Identity {
    /// No permissions, no label, the global account.
    fn default() -> Self {
        Identity {
            perms: None,
            label: String::new(),
            account: Arc::from(accounts::GLOBAL_ACCOUNT),
        }
    }
}

/// Why a CONNECT was refused, for the debug log (never the secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure(pub &'static str);

#[derive(Debug)]
struct UserEntry {
    config: UserConfig,
    perms: Option<Arc<ClientPerms>>,
    account: Arc<str>,
}

#[derive(Debug)]
struct NkeyEntry {
    config: NkeyUserConfig,
    perms: Option<Arc<ClientPerms>>,
    account: Arc<str>,
}

/// Decides CONNECTs for one server.
#[derive(Debug)]
pub struct Authenticator {
    required: bool,
    users: HashMap<String, UserEntry>,
    nkeys: HashMap<String, NkeyEntry>,
    user: String,
    password: Secret,
    token: Secret,
    no_auth_user: String,
    proxy_required: bool,
    timeout: Duration,
    log: Mutex<LogBudget>,
    slow: tokio::sync::Semaphore,
}

#[derive(Debug)]
struct LogBudget {
    window: Instant,
    logged: u32,
    suppressed: u64,
}

impl Authenticator {
    /// The authenticator for these options.
    pub fn new(opts: &AuthOptions) -> Self {
        let compile =
            |p: &Option<config::Permissions>| p.as_ref().map(|p| Arc::new(ClientPerms::new(p)));
        Authenticator {
            required: opts.required(),
            users: opts
                .all_users()
                .map(|(u, account)| {
                    (
                        u.user.clone(),
                        UserEntry {
                            config: u.clone(),
                            perms: compile(&u.permissions),
                            account: Arc::from(account),
                        },
                    )
                })
                .collect(),
            nkeys: opts
                .all_nkeys()
                .map(|(u, account)| {
                    (
                        u.nkey.clone(),
                        NkeyEntry {
                            config: u.clone(),
                            perms: compile(&u.permissions),
                            account: Arc::from(account),
                        },
                    )
                })
                .collect(),
            user: opts.user.clone(),
            password: opts.password.clone(),
            token: opts.token.clone(),
            no_auth_user: opts.no_auth_user.clone(),
            proxy_required: opts.proxy_required,
            timeout: opts.timeout,
            log: Mutex::new(LogBudget {
                window: Instant::now(),
                logged: 0,
                suppressed: 0,
            }),
            slow: tokio::sync::Semaphore::new(SLOW_CHECKS),
        }
    }

    /// Whether clients must authenticate (send CONNECT first, within [`Self::timeout`]).
    pub fn required(&self) -> bool {
        self.required
    }

    /// INFO `auth_required`: as [`Self::required`], but false with a `no_auth_user` (as
    /// nats-server: such clients need not send credentials).
    pub fn info_auth_required(&self) -> bool {
        self.required && self.no_auth_user.is_empty()
    }

    /// Whether `name` is one of the users (by name) or nkey users (by public key).
    pub fn knows(&self, name: &str) -> bool {
        self.users.contains_key(name) || self.nkeys.contains_key(name)
    }

    /// Whether INFO carries a `nonce` for nkey users to sign.
    pub fn nonce_required(&self) -> bool {
        !self.nkeys.is_empty()
    }

    /// A fresh nonce: 11 random bytes as 15 characters of unpadded URL-safe base64.
    pub fn new_nonce() -> String {
        let raw: [u8; NONCE_RAW_LEN] = rand::rng().random();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// How long a client has to send CONNECT.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Bounds the bcrypt verifications running at once ([`Self::may_be_slow`] ones).
    pub fn slow_checks(&self) -> &tokio::sync::Semaphore {
        &self.slow
    }

    /// Whether deciding `c` may take a bcrypt verification (slow by design: worth moving off
    /// the connection's task).
    pub fn may_be_slow(&self, c: &Connect) -> bool {
        let user = c.user.as_deref().unwrap_or_default();
        let user = if user.is_empty() {
            &self.no_auth_user
        } else {
            user
        };
        self.users
            .get(user)
            .is_some_and(|u| is_bcrypt(u.config.password.expose()))
            || is_bcrypt(self.password.expose())
            || is_bcrypt(self.token.expose())
    }

    /// Decides a CONNECT (its options merged over the earlier ones), for a connection of type
    /// `kind` whose INFO carried `nonce` (empty without nkeys). Follows nats-server's order: an
    /// nkey user (with `no_auth_user` standing in for a client with no credentials), else a
    /// user of the `users` list, else the single user or the token. A user whose
    /// `allowed_connection_types` leaves out `kind` is refused before its credentials are
    /// looked at.
    pub fn authenticate(
        &self,
        c: &Connect,
        nonce: &str,
        kind: ConnectionType,
    ) -> Result<Identity, Failure> {
        if !self.required {
            return Ok(Identity::default());
        }
        fn given(s: &Option<String>) -> Option<&str> {
            s.as_deref().filter(|s| !s.is_empty())
        }
        let (mut c_user, mut c_pass) = (given(&c.user), given(&c.pass));
        let c_token = given(&c.auth_token);
        let mut c_nkey = given(&c.nkey);
        let no_auth = (!self.no_auth_user.is_empty()).then_some(self.no_auth_user.as_str());
        let anonymous = c_user.is_none() && c_pass.is_none() && c_token.is_none();

        let mut nkey_user = None;
        if !self.nkeys.is_empty() {
            if let Some(n) =
                no_auth.filter(|n| anonymous && c_nkey.is_none() && self.nkeys.contains_key(*n))
            {
                c_nkey = Some(n);
            }
            if let Some(key) = c_nkey {
                let entry = self.nkeys.get(key).ok_or(Failure("unknown nkey"))?;
                if !kind.allowed_by(&entry.config.connection_types) {
                    return Err(Failure("connection type not allowed"));
                }
                nkey_user = Some(entry);
            }
        }
        if let Some(entry) = nkey_user {
            if entry.config.proxy_required {
                return Err(Failure("a trusted proxy is required"));
            }
            if no_auth != Some(entry.config.nkey.as_str()) {
                let sig = given(&c.sig).ok_or(Failure("signature missing"))?;
                let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(sig)
                    .or_else(|_| base64::engine::general_purpose::STANDARD.decode(sig))
                    .map_err(|_| Failure("signature not valid base64"))?;
                let key = nkeys::KeyPair::from_public_key(&entry.config.nkey)
                    .map_err(|_| Failure("user nkey not valid"))?;
                key.verify(nonce.as_bytes(), &sig)
                    .map_err(|_| Failure("signature not verified"))?;
            }
            return Ok(Identity {
                perms: entry.perms.clone(),
                label: format!("nkey:{}", entry.config.nkey),
                account: Arc::clone(&entry.account),
            });
        }

        if !self.users.is_empty() {
            if let Some(n) = no_auth.filter(|_| anonymous) {
                if let Some(u) = self.users.get(n) {
                    // As nats-server: the no_auth_user's own password stands in for the
                    // client's (so a bcrypt-hashed one does not match itself).
                    c_user = Some(u.config.user.as_str());
                    c_pass = Some(u.config.password.expose()).filter(|p| !p.is_empty());
                }
            }
            if let Some(name) = c_user {
                let entry = self.users.get(name).ok_or(Failure("unknown user"))?;
                if !kind.allowed_by(&entry.config.connection_types) {
                    return Err(Failure("connection type not allowed"));
                }
                if entry.config.proxy_required {
                    return Err(Failure("a trusted proxy is required"));
                }
                if !compare_secret(entry.config.password.expose(), c_pass.unwrap_or_default()) {
                    return Err(Failure("wrong password"));
                }
                return Ok(Identity {
                    perms: entry.perms.clone(),
                    label: format!("user:{}", entry.config.user),
                    account: Arc::clone(&entry.account),
                });
            }
        }

        if self.proxy_required {
            return Err(Failure("a trusted proxy is required"));
        }
        if !self.token.is_empty() {
            return if compare_secret(self.token.expose(), c_token.unwrap_or_default()) {
                Ok(Identity {
                    label: "token".into(),
                    ..Identity::default()
                })
            } else {
                Err(Failure("wrong token"))
            };
        }
        if !self.user.is_empty() {
            let user_ok = bool::from(
                self.user
                    .as_bytes()
                    .ct_eq(c_user.unwrap_or_default().as_bytes()),
            );
            // Both compared, so the time taken does not tell which was wrong.
            let pass_ok = compare_secret(self.password.expose(), c_pass.unwrap_or_default());
            return if user_ok && pass_ok {
                Ok(Identity {
                    label: format!("user:{}", self.user),
                    ..Identity::default()
                })
            } else {
                Err(Failure("wrong user or password"))
            };
        }
        Err(Failure("no credentials"))
    }

    /// The `no_auth_user` for a client (on a connection of type `kind`) whose first op is not
    /// CONNECT, as nats-server's parser lets through (a user of the `users` list, not an
    /// nkey): `None` when that is an authorization violation.
    pub fn before_connect(&self, kind: ConnectionType) -> Option<Identity> {
        if !self.required {
            return Some(Identity::default());
        }
        let u = self.users.get(&self.no_auth_user)?;
        if u.config.proxy_required || !kind.allowed_by(&u.config.connection_types) {
            return None;
        }
        self.authenticate(&Connect::default(), "", kind).ok()
    }

    /// Whether a failure may be logged now (at most [`FAILURE_LOG_BURST`] a second); returns
    /// how many were suppressed since the last one logged.
    pub fn may_log(&self) -> Option<u64> {
        let mut b = self.log.lock().expect("auth log lock poisoned");
        let now = Instant::now();
        if now.duration_since(b.window) >= Duration::from_secs(1) {
            b.window = now;
            b.logged = 0;
        }
        if b.logged >= FAILURE_LOG_BURST {
            b.suppressed += 1;
            return None;
        }
        b.logged += 1;
        Some(std::mem::take(&mut b.suppressed))
    }
}

/// How a client identified itself, for log lines (nats-server's `getAuthUser`): the nkey, the
/// user, or `Token "[REDACTED]"`.
pub fn describe_credentials(c: &Connect) -> Option<String> {
    let given = |s: &Option<String>| s.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    if let Some(n) = given(&c.nkey) {
        return Some(format!("Nkey {n:?}"));
    }
    if let Some(u) = given(&c.user) {
        return Some(format!("User {u:?}"));
    }
    given(&c.auth_token).map(|_| "Token \"[REDACTED]\"".to_string())
}

/// A copy of `c` with the password and token replaced by `[REDACTED]`, for trace lines.
pub fn redacted(c: &Connect) -> Connect {
    let mut c = c.clone();
    let hide = |s: &mut Option<String>| {
        if s.is_some() {
            *s = Some("[REDACTED]".into());
        }
    };
    hide(&mut c.pass);
    hide(&mut c.auth_token);
    c
}

#[cfg(test)]
mod tests {
    use super::config::{Permissions, SubjectPermission};
    use super::*;

    const STD: ConnectionType = ConnectionType::Standard;

    fn connect(user: Option<&str>, pass: Option<&str>, token: Option<&str>) -> Connect {
        Connect {
            user: user.map(Into::into),
            pass: pass.map(Into::into),
            auth_token: token.map(Into::into),
            ..Connect::default()
        }
    }

    fn user(name: &str, pass: &str) -> UserConfig {
        UserConfig {
            user: name.into(),
            password: Secret::new(pass),
            permissions: None,
            connection_types: Default::default(),
            proxy_required: false,
        }
    }

    #[test]
    fn bcrypt_prefixes() {
        assert!(is_bcrypt("$2a$11$abc"));
        assert!(is_bcrypt("$2y$04$"));
        assert!(!is_bcrypt("$2a$1$abc"));
        assert!(!is_bcrypt("$2c$11$abc"));
        assert!(!is_bcrypt("plain"));
        let hash = bcrypt::hash("pw", 4).unwrap();
        assert!(compare_secret(&hash, "pw"));
        assert!(!compare_secret(&hash, "px"));
        assert!(compare_secret("pw", "pw"));
        assert!(!compare_secret("pw", "pw2"));
        assert!(!compare_secret("pw", ""));
    }

    #[test]
    fn token_and_single_user() {
        let a = Authenticator::new(&AuthOptions {
            token: Secret::new("s3cret"),
            ..AuthOptions::default()
        });
        assert!(a.required() && a.info_auth_required() && !a.nonce_required());
        assert!(a
            .authenticate(&connect(None, None, Some("s3cret")), "", STD)
            .is_ok());
        assert!(a
            .authenticate(&connect(None, None, Some("nope")), "", STD)
            .is_err());
        assert!(a.authenticate(&connect(None, None, None), "", STD).is_err());
        let a = Authenticator::new(&AuthOptions {
            user: "derek".into(),
            password: Secret::new("pw"),
            ..AuthOptions::default()
        });
        assert!(a
            .authenticate(&connect(Some("derek"), Some("pw"), None), "", STD)
            .is_ok());
        assert!(a
            .authenticate(&connect(Some("derek"), None, None), "", STD)
            .is_err());
        assert!(a
            .authenticate(&connect(None, Some("pw"), None), "", STD)
            .is_err());
        assert!(a
            .authenticate(&connect(Some("other"), Some("pw"), None), "", STD)
            .is_err());
    }

    #[test]
    fn users_no_auth_user_and_nkeys() {
        let seed = nkeys::KeyPair::new_user();
        let mut opts = AuthOptions {
            users: vec![user("alice", "pa"), user("bob", "pb")],
            nkeys: vec![NkeyUserConfig {
                nkey: seed.public_key(),
                permissions: Some(Permissions {
                    publish: Some(SubjectPermission {
                        allow: Some(vec!["x".into()]),
                        deny: vec![],
                    }),
                    ..Permissions::default()
                }),
                connection_types: Default::default(),
                proxy_required: false,
            }],
            ..AuthOptions::default()
        };
        let a = Authenticator::new(&opts);
        assert!(a.nonce_required());
        assert!(a
            .authenticate(&connect(Some("alice"), Some("pa"), None), "", STD)
            .is_ok());
        assert!(a
            .authenticate(&connect(Some("alice"), Some("pb"), None), "", STD)
            .is_err());
        assert!(a.authenticate(&connect(None, None, None), "", STD).is_err());
        assert!(a.before_connect(STD).is_none());
        let nonce = Authenticator::new_nonce();
        assert_eq!(nonce.len(), 15);
        let sig = seed.sign(nonce.as_bytes()).unwrap();
        let mut c = Connect {
            nkey: Some(seed.public_key()),
            sig: Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&sig)),
            ..Connect::default()
        };
        let id = a.authenticate(&c, &nonce, STD).unwrap();
        assert!(id.perms.unwrap().restricts_publish());
        assert_eq!(
            a.authenticate(&c, "other nonce", STD).unwrap_err(),
            Failure("signature not verified")
        );
        c.sig = Some(base64::engine::general_purpose::STANDARD.encode(&sig));
        assert!(
            a.authenticate(&c, &nonce, STD).is_ok(),
            "standard base64 too"
        );
        c.sig = None;
        assert_eq!(
            a.authenticate(&c, &nonce, STD).unwrap_err(),
            Failure("signature missing")
        );

        opts.no_auth_user = "bob".into();
        let a = Authenticator::new(&opts);
        assert!(!a.info_auth_required());
        assert!(a.authenticate(&connect(None, None, None), "", STD).is_ok());
        assert!(a.before_connect(STD).is_some());
        // Credentials given are checked, not replaced.
        assert!(a
            .authenticate(&connect(Some("alice"), Some("x"), None), "", STD)
            .is_err());
    }

    #[test]
    fn allowed_connection_types_by_connection_type() {
        let types =
            |names: &[&str]| conn_types::parse_connection_types(names.iter().copied()).unwrap();
        let seed = nkeys::KeyPair::new_user();
        let mut ws_only = user("ws", "pw");
        ws_only.connection_types = types(&["websocket"]);
        let mut std_only = user("st", "pw");
        std_only.connection_types = types(&["STANDARD"]);
        let mut both = user("both", "pw");
        both.connection_types = types(&["standard", "websocket"]);
        let mut mqtt = user("mq", "pw");
        mqtt.connection_types = types(&["MQTT"]);
        let opts = AuthOptions {
            users: vec![ws_only, std_only, both, mqtt, user("any", "pw")],
            nkeys: vec![NkeyUserConfig {
                nkey: seed.public_key(),
                permissions: None,
                connection_types: types(&["WEBSOCKET"]),
                proxy_required: false,
            }],
            no_auth_user: "ws".into(),
            ..AuthOptions::default()
        };
        let a = Authenticator::new(&opts);
        let ws = ConnectionType::Websocket;
        let ok = |name: &str, kind| {
            a.authenticate(&connect(Some(name), Some("pw"), None), "", kind)
                .is_ok()
        };
        assert!(ok("ws", ws) && !ok("ws", STD));
        assert!(ok("st", STD) && !ok("st", ws));
        assert!(ok("both", STD) && ok("both", ws));
        assert!(ok("any", STD) && ok("any", ws));
        assert!(!ok("mq", STD) && !ok("mq", ws));
        // Refused before the password is looked at, as an unknown user.
        assert_eq!(
            a.authenticate(&connect(Some("ws"), Some("wrong"), None), "", STD)
                .unwrap_err(),
            Failure("connection type not allowed")
        );
        // The no_auth_user, with a CONNECT or without.
        assert!(a.authenticate(&connect(None, None, None), "", ws).is_ok());
        assert!(a.authenticate(&connect(None, None, None), "", STD).is_err());
        assert!(a.before_connect(ws).is_some());
        assert!(a.before_connect(STD).is_none());
        // An nkey user.
        let nonce = Authenticator::new_nonce();
        let c = Connect {
            nkey: Some(seed.public_key()),
            sig: Some(
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(seed.sign(nonce.as_bytes()).unwrap()),
            ),
            ..Connect::default()
        };
        assert!(a.authenticate(&c, &nonce, ws).is_ok());
        assert_eq!(
            a.authenticate(&c, &nonce, STD).unwrap_err(),
            Failure("connection type not allowed")
        );
    }

    #[test]
    fn failure_logging_is_bounded() {
        let a = Authenticator::new(&AuthOptions::default());
        let logged = (0..1000).filter(|_| a.may_log().is_some()).count();
        assert_eq!(logged, FAILURE_LOG_BURST as usize);
    }
}
