//! The `cluster { }` block and the cluster flags, as nats-server reads them
//! (`parseCluster` and `ConfigureOptions` in `server/opts.go`):
//!
//! ```text
//! server_name: n1                      # or -n / --server_name
//! cluster {
//!   name: C                            # --cluster_name C
//!   listen: 127.0.0.1:6222             # or port: 6222 and host: ...; --cluster nats://127.0.0.1:6222
//!   routes: [ nats-route://127.0.0.1:6223, nats://127.0.0.1:6224 ]   # --routes a,b
//!   connect_retries: 3                 # --connect_retries 3
//!   advertise: 10.0.0.5:7222           # --cluster_advertise; the route URL peers are told
//!   authorization {                    # or --cluster nats://ruser:rpass@127.0.0.1:6222
//!     user: ruser
//!     password: rpass                  # or a bcrypt hash ($2a$...)
//!     timeout: 2                       # seconds to present them (default 2)
//!   }
//! }
//! ```
//!
//! With `authorization`, a server dialing this one must present that user and password
//! (a route URL's `nats-route://user:pass@host:port`, else the dialer's own `authorization`,
//! as nats-server sends them); others get `-ERR 'Authorization Violation'`.
//!
//! `tls { cert_file, key_file, ca_file, verify, timeout }` puts every route on TLS (both
//! ends need it; see [`ClusterOptions::tls`]).
//!
//! Keys match in any case. The keys jsserver does not enforce (`no_advertise`,
//! `permissions`, `pool_size`, `accounts`, `compression`) are refused at start-up through
//! [`crate::options::UNSUPPORTED`] (section [`crate::options::Section::Cluster`]) before this
//! runs; the ones it ignores (`connect_backoff`, `ping_interval`, ...) warn; any other key is
//! an error (`unknown field "..."`, as nats-server).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::conf::{ConfError, ConfErrors, Item, Value};
use crate::options::{
    expect_int, expect_str, not_handled, parse_listen, port_from, split_host_port, Section,
};

/// Default route port (`cluster { port }`), as nats-server's `DEFAULT_ROUTE_PORT`.
pub const DEFAULT_CLUSTER_PORT: u16 = 6222;

/// Default cluster host: loopback, as the client listener's (nats-server: `0.0.0.0`).
pub const DEFAULT_CLUSTER_HOST: &str = "127.0.0.1";

/// The name of a cluster configured without one. nats-server then makes up a random name
/// and adopts its peers'; jsserver uses this fixed name, so unnamed nodes meet each other.
pub const DEFAULT_CLUSTER_NAME: &str = "jsserver";

/// The cluster settings of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// The cluster's name (`name`, `--cluster_name`): a peer with another name is refused.
    /// `None`: [`DEFAULT_CLUSTER_NAME`].
    pub name: Option<String>,
    /// Where routes are accepted: host (`host`, `listen`, `--cluster`). Default
    /// [`DEFAULT_CLUSTER_HOST`].
    pub host: String,
    /// Where routes are accepted: port (`port`, `listen`, `--cluster`); 0 = a free port
    /// (given as `-1`). Default [`DEFAULT_CLUSTER_PORT`].
    pub port: u16,
    /// The routes to dial (`routes`, `--routes`), as `host:port`; the others are learned
    /// from the peers (gossip). A route to this server itself is dropped once met.
    pub routes: Vec<String>,
    /// How many times a route learned from a peer is retried after it fails or closes
    /// (`connect_retries`, `--connect_retries`), at 1 s intervals; configured routes are
    /// retried for ever. Default 0, as nats-server.
    pub connect_retries: u32,
    /// The route URL this server gives its peers, as `host:port` (`advertise`,
    /// `cluster_advertise`, `--cluster_advertise`), instead of its listen address: peers
    /// that learn of this server through another one (gossip) dial it. A port-less value
    /// takes the cluster listener's port. `None`: the listen address.
    pub advertise: Option<String>,
    /// What a server dialing this one must present (`authorization`, or the user and
    /// password of the `--cluster` URL). `None`: any server may connect.
    pub authorization: Option<RouteAuth>,
    /// The user and password given in a configured route's URL, by its `host:port`: sent
    /// when dialing it (a route without them sends [`ClusterOptions::authorization`]'s).
    pub route_credentials: BTreeMap<String, RouteCredentials>,
    /// TLS on every route (`tls { cert_file, key_file, ca_file, verify, timeout }`): the
    /// accepting server presents `cert_file` and, with `verify`, requires the dialer's
    /// certificate to chain to `ca_file`; the dialer presents the same certificate and checks
    /// the accepting server's against `ca_file` and the dialed host. `None`: plain TCP.
    pub tls: Option<crate::tls::TlsOptions>,
}

/// A user and password a route presents, as nats-server's route `CONNECT` carries them.
#[derive(Clone, PartialEq, Eq)]
pub struct RouteCredentials {
    /// The user.
    pub user: String,
    /// The password (in the clear: it is sent).
    pub password: String,
}

impl std::fmt::Debug for RouteCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteCredentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// The `cluster { authorization { } }` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteAuth {
    /// The user and password a dialing server must present; the password may be a bcrypt
    /// hash (then it is checked with bcrypt, and this server cannot send it itself).
    pub credentials: RouteCredentials,
    /// How long a dialing server has to present them (`timeout`, seconds; default
    /// [`DEFAULT_ROUTE_AUTH_TIMEOUT`]).
    pub timeout: Duration,
}

/// nats-server's default authorization timeout for routes (`AUTH_TIMEOUT`, 2 s).
pub const DEFAULT_ROUTE_AUTH_TIMEOUT: Duration = Duration::from_secs(2);

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            name: None,
            host: DEFAULT_CLUSTER_HOST.to_string(),
            port: DEFAULT_CLUSTER_PORT,
            routes: Vec::new(),
            connect_retries: 0,
            advertise: None,
            authorization: None,
            route_credentials: BTreeMap::new(),
            tls: None,
        }
    }
}

impl ClusterOptions {
    /// The cluster name in force: the configured one, else [`DEFAULT_CLUSTER_NAME`].
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_CLUSTER_NAME)
    }

    /// What to present when dialing `route` (`host:port`): the credentials of its URL,
    /// else this server's own `authorization` (nats-server does the same for the routes it
    /// learns from its peers). `None`: nothing.
    pub fn credentials_for(&self, route: &str) -> Option<&RouteCredentials> {
        self.route_credentials
            .get(route)
            .or(self.authorization.as_ref().map(|a| &a.credentials))
    }
}

/// A route URL as `host:port`: `nats-route://host:port`, `nats://host:port`,
/// `route://host:port` or bare `host:port` (nats-server parses any URL; these are the forms
/// its documentation uses).
///
/// # Errors
/// Another scheme, a missing or bad port, a path, or a user and password (see
/// [`parse_route_url_with_credentials`] where they belong).
pub fn parse_route_url(url: &str) -> Result<String, String> {
    match parse_route_url_with_credentials(url)? {
        (hp, None) => Ok(hp),
        (_, Some(_)) => Err(format!(
            "route url {:?}: a user and password do not belong here",
            url.trim()
        )),
    }
}

/// A route URL as `host:port` and the user and password before its `@`
/// (`nats-route://user:pass@host:port`), as [`parse_route_url`] otherwise.
///
/// # Errors
/// As [`parse_route_url`]; a user without a password, or an empty user.
pub fn parse_route_url_with_credentials(
    url: &str,
) -> Result<(String, Option<RouteCredentials>), String> {
    let url = url.trim();
    let rest = match url.split_once("://") {
        Some((scheme, rest)) => {
            if !["nats-route", "nats", "route"]
                .iter()
                .any(|s| s.eq_ignore_ascii_case(scheme))
            {
                return Err(format!("route url {url:?}: unsupported scheme {scheme:?}"));
            }
            rest
        }
        None => url,
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (credentials, rest) = match rest.rsplit_once('@') {
        Some((userinfo, rest)) => {
            let (user, password) = userinfo
                .split_once(':')
                .filter(|(u, _)| !u.is_empty())
                .ok_or_else(|| format!("route url {url:?}: expected user:password@"))?;
            let credentials = RouteCredentials {
                user: user.to_string(),
                password: password.to_string(),
            };
            (Some(credentials), rest)
        }
        None => (None, rest),
    };
    if rest.contains('/') {
        return Err(format!("route url {url:?}: unexpected path"));
    }
    let (host, port) =
        split_host_port(rest).ok_or_else(|| format!("route url {url:?}: expected host:port"))?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("route url {url:?}: invalid port {port:?}"))?;
    if host.is_empty() {
        return Err(format!("route url {url:?}: missing host"));
    }
    Ok((join_host_port(host, port), credentials))
}

/// `host:port`, with brackets around an IPv6 host.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `advertise` / `--cluster_advertise`: `host:port` or `host` (then the cluster listener's
/// port is advertised), as nats-server takes it; a `nats-route://`, `nats://` or `route://`
/// scheme is allowed too. Returns `(host, port)`, port `None` when not given.
///
/// # Errors
/// An empty value, another scheme, a bad port, a path or credentials.
pub fn parse_advertise(value: &str) -> Result<(String, Option<u16>), String> {
    let value = value.trim();
    if value.is_empty() {
        return Err("cluster advertise: empty address".into());
    }
    let bare = value.split_once("://").map_or(value, |(_, rest)| rest);
    let bare = bare.strip_suffix('/').unwrap_or(bare);
    if split_host_port(bare).is_some() {
        let hp = parse_route_url(value).map_err(|e| format!("cluster advertise: {e}"))?;
        let (host, port) = split_host_port(&hp).expect("parse_route_url gives host:port");
        return Ok((host.to_string(), Some(port.parse().expect("checked port"))));
    }
    // No port: check the host as a URL with a placeholder port.
    let hp = parse_route_url(&format!("{bare}:1"))
        .map_err(|e| format!("cluster advertise {value:?}: {e}"))?;
    let host = hp.strip_suffix(":1").unwrap_or(&hp);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((host.to_string(), None))
}

/// `--cluster URL` / `--cluster_listen URL`: where to accept routes, as `(host, port)`
/// (`-1` as the port: a free one, returned as 0), and the user and password the URL
/// carries (`nats://user:pass@host:port`: the route authorization, as nats-server takes it).
///
/// # Errors
/// As [`parse_route_url_with_credentials`], and a port out of range.
pub fn parse_cluster_listen(url: &str) -> Result<(String, u16, Option<RouteCredentials>), String> {
    let trimmed = url.trim();
    // A free port (-1) is not a URL port; take it apart by hand.
    if let Some(prefix) = trimmed.strip_suffix(":-1") {
        let (host, credentials) = parse_route_url_with_credentials(&format!("{prefix}:1"))?;
        let host = host.strip_suffix(":1").unwrap_or(&host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        return Ok((host.to_string(), 0, credentials));
    }
    let (hp, credentials) = parse_route_url_with_credentials(trimmed)?;
    let (host, port) = split_host_port(&hp).expect("parse_route_url gives host:port");
    Ok((
        host.to_string(),
        port.parse().expect("checked port"),
        credentials,
    ))
}

/// The `authorization` block of `cluster` (`user`/`username`, `password`/`pass`,
/// `timeout` in seconds), as nats-server's `parseAuthorization` for routes.
///
/// # Errors
/// Not a map; a token or a users list (nats-server refuses both for routes); a missing user
/// or password; wrong types.
fn parse_route_auth(item: &Item) -> Result<RouteAuth, ConfError> {
    let Value::Map(block) = &item.value else {
        return Err(ConfError::at(
            item,
            format!(
                "cluster authorization: expected a map, got {}",
                item.value.type_name()
            ),
        ));
    };
    let (mut user, mut password, mut timeout) = (None, None, DEFAULT_ROUTE_AUTH_TIMEOUT);
    for (key, v) in block.iter() {
        let lower = key.to_ascii_lowercase();
        let k = lower.as_str();
        match k {
            "user" | "username" => user = Some(expect_str(k, v)?.to_string()),
            "pass" | "password" => password = Some(expect_str(k, v)?.to_string()),
            "timeout" => {
                let secs = match &v.value {
                    Value::Integer(n) => *n as f64,
                    Value::Float(f) => *f,
                    other => {
                        return Err(ConfError::at(
                            v,
                            format!("timeout: expected a number, got {}", other.type_name()),
                        ))
                    }
                };
                timeout = Duration::try_from_secs_f64(secs)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| ConfError::at(v, format!("timeout: invalid value {secs}")))?;
            }
            "token" => {
                return Err(ConfError::at(
                    v,
                    "Cluster authorization does not support tokens",
                ))
            }
            "users" | "nkeys" => {
                return Err(ConfError::at(
                    v,
                    "Cluster authorization does not allow multiple users",
                ))
            }
            _ => {
                if let Some(e) = crate::conf::unknown_field(key, v) {
                    return Err(e);
                }
            }
        }
    }
    match (user, password) {
        (Some(user), Some(password)) if !user.is_empty() => Ok(RouteAuth {
            credentials: RouteCredentials { user, password },
            timeout,
        }),
        _ => Err(ConfError::at(
            item,
            "cluster authorization: a user and a password are required",
        )),
    }
}

/// Parses the `cluster` block. `None`: no port given (nats-server then does not cluster).
///
/// # Errors
/// The first wrong type, bad port or route URL; or every key the block does not have.
pub fn parse_cluster(
    item: &Item,
    warnings: &mut Vec<String>,
) -> Result<Option<ClusterOptions>, ConfErrors> {
    let Value::Map(block) = &item.value else {
        return Err(ConfError::at(
            item,
            format!("cluster: expected a map, got {}", item.value.type_name()),
        )
        .into());
    };
    let mut c = ClusterOptions::default();
    let mut port_given = false;
    let mut unknown = Vec::new();
    for (key, v) in block.iter() {
        let lower = key.to_ascii_lowercase();
        let k = lower.as_str();
        match k {
            "name" => {
                let name = expect_str(k, v)?;
                if name.contains(' ') || name.is_empty() {
                    return Err(
                        ConfError::at(v, "cluster name cannot be empty or contain spaces").into(),
                    );
                }
                c.name = Some(name.to_string());
            }
            "listen" => {
                let (host, n) = parse_listen(k, v)?;
                if let Some(h) = host {
                    c.host = h;
                }
                c.port = cluster_port(v, n)?;
                port_given = true;
            }
            "port" => {
                let n = expect_int(k, v)?;
                c.port = cluster_port(v, n)?;
                port_given = true;
            }
            "host" | "net" => c.host = expect_str(k, v)?.to_string(),
            "routes" => {
                let list = match &v.value {
                    Value::Array(list) => list.iter().collect::<Vec<_>>(),
                    Value::String(_) => vec![v],
                    other => {
                        return Err(ConfError::at(
                            v,
                            format!("routes: expected an array, got {}", other.type_name()),
                        )
                        .into())
                    }
                };
                c.routes.clear();
                for r in list {
                    let (hp, credentials) = parse_route_url_with_credentials(expect_str(k, r)?)
                        .map_err(|e| ConfError::at(r, e))?;
                    if let Some(credentials) = credentials {
                        c.route_credentials.insert(hp.clone(), credentials);
                    }
                    c.routes.push(hp);
                }
            }
            "advertise" | "cluster_advertise" => {
                let text = expect_str(k, v)?;
                parse_advertise(text).map_err(|e| ConfError::at(v, e))?;
                c.advertise = Some(text.trim().to_string());
            }
            "authorization" => c.authorization = Some(parse_route_auth(v)?),
            "tls" => {
                let mut tls = crate::tls::TlsOptions::default();
                crate::tls::config::parse_tls(v, &mut tls)?;
                c.tls = Some(tls);
            }
            "connect_retries" => {
                let n = expect_int(k, v)?;
                c.connect_retries = u32::try_from(n)
                    .map_err(|_| ConfError::at(v, format!("connect_retries: invalid value {n}")))?;
            }
            _ => {
                if let Err(e) = not_handled(Section::Cluster, key, v, warnings) {
                    unknown.push(e);
                }
            }
        }
    }
    if !unknown.is_empty() {
        return Err(ConfErrors(unknown));
    }
    Ok(port_given.then_some(c))
}

fn cluster_port(item: &Item, n: i64) -> Result<u16, ConfError> {
    port_from(n, DEFAULT_CLUSTER_PORT)
        .ok_or_else(|| ConfError::at(item, format!("cluster: invalid port {n}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_urls_as_nats_server_writes_them() {
        for (url, want) in [
            ("nats-route://127.0.0.1:6222", "127.0.0.1:6222"),
            ("nats://host.example:7000/", "host.example:7000"),
            ("route://[::1]:6222", "[::1]:6222"),
            ("10.0.0.1:6222", "10.0.0.1:6222"),
        ] {
            assert_eq!(parse_route_url(url).as_deref(), Ok(want), "{url}");
        }
        for bad in [
            "nats-route://ruser:pwd@127.0.0.1:6222",
            "tls://127.0.0.1:6222",
            "nats://127.0.0.1",
            "nats://127.0.0.1:0",
            "nats://127.0.0.1:6222/x",
            "nats://:6222",
        ] {
            assert!(parse_route_url(bad).is_err(), "{bad}");
        }
        assert!(parse_route_url("nats://u:p@h:1")
            .unwrap_err()
            .contains("a user and password do not belong here"));
        assert_eq!(
            parse_cluster_listen("nats://127.0.0.1:-1"),
            Ok(("127.0.0.1".into(), 0, None))
        );
        assert_eq!(
            parse_cluster_listen("nats://0.0.0.0:6222"),
            Ok(("0.0.0.0".into(), 6222, None))
        );
    }

    fn creds(user: &str, password: &str) -> RouteCredentials {
        RouteCredentials {
            user: user.into(),
            password: password.into(),
        }
    }

    #[test]
    fn route_urls_and_the_cluster_url_carry_a_user_and_password() {
        assert_eq!(
            parse_route_url_with_credentials("nats-route://ruser:p@ss@10.0.0.1:6222"),
            Ok(("10.0.0.1:6222".into(), Some(creds("ruser", "p@ss"))))
        );
        assert_eq!(
            parse_route_url_with_credentials("nats://10.0.0.1:6222"),
            Ok(("10.0.0.1:6222".into(), None))
        );
        for bad in ["nats://ruser@h:1", "nats://:p@h:1"] {
            assert!(parse_route_url_with_credentials(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_cluster_listen("nats://ruser:rpass@127.0.0.1:-1"),
            Ok(("127.0.0.1".into(), 0, Some(creds("ruser", "rpass"))))
        );
    }

    fn parse_block(text: &str) -> Result<Option<ClusterOptions>, ConfErrors> {
        let conf = crate::conf::parse_str(text).expect("conf parses");
        let item = conf.get("cluster").expect("a cluster block");
        parse_cluster(item, &mut Vec::new())
    }

    #[test]
    fn the_authorization_block_as_nats_server_reads_it() {
        let c = parse_block(
            "cluster { port: 6222, authorization { user: ruser, password: rpass, timeout: 0.5 }\n\
             routes: [ nats-route://a:b@10.0.0.2:6222, nats-route://10.0.0.3:6222 ] }",
        )
        .unwrap()
        .unwrap();
        let auth = c.authorization.clone().expect("authorization");
        assert_eq!(auth.credentials, creds("ruser", "rpass"));
        assert_eq!(auth.timeout, Duration::from_millis(500));
        assert_eq!(c.routes, ["10.0.0.2:6222", "10.0.0.3:6222"]);
        // A route's own credentials, else the server's.
        assert_eq!(c.credentials_for("10.0.0.2:6222"), Some(&creds("a", "b")));
        assert_eq!(
            c.credentials_for("10.0.0.3:6222"),
            Some(&creds("ruser", "rpass"))
        );
        let defaults = parse_block("cluster { port: 6222, authorization { user: u, pass: p } }")
            .unwrap()
            .unwrap();
        assert_eq!(
            defaults.authorization.unwrap().timeout,
            DEFAULT_ROUTE_AUTH_TIMEOUT
        );
        for (bad, why) in [
            ("authorization { token: t }", "does not support tokens"),
            (
                "authorization { users: [] }",
                "does not allow multiple users",
            ),
            (
                "authorization { user: u }",
                "a user and a password are required",
            ),
            (
                "authorization { user: u, password: p, timeout: -1 }",
                "timeout",
            ),
        ] {
            let err = parse_block(&format!("cluster {{ port: 6222, {bad} }}")).unwrap_err();
            assert!(err.to_string().contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn unknown_keys_are_errors_and_ignored_ones_warn() {
        // Every unknown key, with its place, in nats-server's words.
        let err = parse_block(
            "cluster {
  port: 6222
  authorisation { user: u }
  bogus: 1
}",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "<string>:3:3: unknown field \"authorisation\"\n<string>:4:3: unknown field \"bogus\""
        );
        let err = parse_block("cluster { port: 6222, authorization { user: u, pasword: p } }")
            .unwrap_err();
        assert!(
            err.to_string().ends_with("unknown field \"pasword\""),
            "{err}"
        );
        // nats-server's keys that do not matter here: a warning each.
        let conf = crate::conf::parse_str(
            "cluster { port: 6222, connect_backoff: true, ping_interval: \"1m\", \
             write_deadline: \"5s\" }",
        )
        .unwrap();
        let mut warnings = Vec::new();
        let c = parse_cluster(conf.get("cluster").unwrap(), &mut warnings).unwrap();
        assert!(c.is_some());
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .all(|w| w.contains("is not supported and is ignored")),
            "{warnings:?}"
        );
        // A key used only as a variable is no setting.
        assert!(parse_block("cluster { X: 1, port: $X }").unwrap().is_some());
    }

    #[test]
    fn advertise_is_host_and_optional_port() {
        for (value, want) in [
            ("127.0.0.1:7222", ("127.0.0.1", Some(7222))),
            ("nats-route://10.0.0.5:7222/", ("10.0.0.5", Some(7222))),
            ("route.example", ("route.example", None)),
            ("[::1]:7222", ("::1", Some(7222))),
            (" 10.0.0.5 ", ("10.0.0.5", None)),
        ] {
            assert_eq!(
                parse_advertise(value),
                Ok((want.0.to_string(), want.1)),
                "{value}"
            );
        }
        for bad in ["", "h:0", "h:x", "tls://h:1", "u:p@h:1", "h:1/x", ":7222"] {
            assert!(parse_advertise(bad).is_err(), "{bad}");
        }
    }
}
