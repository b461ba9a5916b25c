//! The WebSocket listener's settings: the `websocket { }` block of the config file, as
//! nats-server's `parseWebsocket` reads it, and its origin check (`wsUpgrade`,
//! `checkOrigin`).
//!
//! ```text
//! websocket {
//!   listen: "127.0.0.1:8080"          # or port: 8080 (-1: a free port), host: 127.0.0.1
//!   no_tls: true                      # plain ws:// (else a tls { } block is required)
//!   tls { cert_file: "...", key_file: "..." }
//!   same_origin: true                 # a browser's Origin must be the request's Host
//!   allowed_origins: ["https://app.example.com"]
//!   handshake_timeout: "2s"           # TLS and HTTP upgrade together
//!   compression: true                 # permessage-deflate, with clients that offer it
//! }
//! ```
//!
//! Keys match in any case. The keys jsserver does not enforce (the block's own
//! `authorization`, `no_auth_user`, the JWT and credential cookies, `advertise`, and the
//! refused keys of its `tls` block) are refused at start-up through
//! [`crate::options::UNSUPPORTED`] (section [`crate::options::Section::Websocket`]) before this
//! runs; any other unknown key is an error, as in nats-server.
//!
//! The connection side (TLS, the HTTP upgrade, the frames) is `connection::websocket`.

use std::time::Duration;

use crate::conf::{ConfError, Item, Value};
use crate::options::{
    expect_bool, expect_duration, expect_int, expect_str, parse_listen, port_from, DEFAULT_HOST,
};
use crate::tls::TlsOptions;

/// Default `handshake_timeout`: 2 s for the TLS handshake and the HTTP upgrade together.
/// (nats-server has none by default: a client that connects and sends nothing holds its
/// socket until it goes away.)
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// The WebSocket listener (`websocket { }`).
#[derive(Debug, Clone, PartialEq)]
pub struct WebsocketOptions {
    /// Listen host (`host`/`net`, `listen`). Default [`DEFAULT_HOST`] (nats-server's is
    /// `0.0.0.0`).
    pub host: String,
    /// Listen port (`port`, `listen`); `0`: a free port (given as `-1`).
    pub port: u16,
    /// Plain `ws://` without a `tls` block (`no_tls`); without it, `tls` is required.
    pub no_tls: bool,
    /// TLS for the listener (`tls { }`): `wss://`. Its files are loaded at start-up.
    pub tls: Option<TlsOptions>,
    /// A request's `Origin` must name the request's own host and port (`same_origin`).
    pub same_origin: bool,
    /// The only origins accepted (`allowed_origins`), as written: `scheme://host[:port]`.
    pub allowed_origins: Vec<String>,
    /// Time for the TLS handshake and the HTTP upgrade (`handshake_timeout`). Default
    /// [`DEFAULT_HANDSHAKE_TIMEOUT`].
    pub handshake_timeout: Duration,
    /// `permessage-deflate` with the clients that offer it (`compression`).
    pub compression: bool,
}

impl Default for WebsocketOptions {
    fn default() -> Self {
        WebsocketOptions {
            host: DEFAULT_HOST.to_string(),
            port: 0,
            no_tls: false,
            tls: None,
            same_origin: false,
            allowed_origins: Vec::new(),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            compression: false,
        }
    }
}

/// Parses the `websocket` block. `None`: no port given (nats-server then has no listener
/// and ignores the rest of the block).
///
/// # Errors
/// Wrong types, an unknown key (`unknown field "..."`, as nats-server), the `tls` block's
/// `verify_and_map` / `handshake_first` (not supported yet), an origin that is not
/// `scheme://host[:port]`.
pub fn parse_websocket(
    item: &Item,
    warnings: &mut Vec<String>,
) -> Result<Option<WebsocketOptions>, ConfError> {
    let Value::Map(block) = &item.value else {
        return Err(ConfError::at(
            item,
            format!("websocket: expected a map, got {}", item.value.type_name()),
        ));
    };
    let mut ws = WebsocketOptions::default();
    let mut port_given = false;
    for (key, v) in block.iter() {
        let lower = key.to_ascii_lowercase();
        let k = lower.as_str();
        match k {
            "listen" => {
                let (host, n) = parse_listen(k, v)?;
                if let Some(h) = host {
                    ws.host = h;
                }
                ws.port = ws_port(v, n)?;
                port_given |= n != 0;
            }
            "port" => {
                let n = expect_int(k, v)?;
                ws.port = ws_port(v, n)?;
                port_given |= n != 0;
            }
            "host" | "net" => ws.host = expect_str(k, v)?.to_string(),
            "no_tls" => ws.no_tls = expect_bool(k, v)?,
            "tls" => {
                let mut tls = TlsOptions::default();
                crate::tls::config::parse_tls(v, &mut tls)?;
                if tls.map {
                    return Err(ConfError::at(
                        v,
                        "websocket tls \"verify_and_map\" is not supported yet",
                    ));
                }
                if tls.handshake_first {
                    return Err(ConfError::at(
                        v,
                        "websocket tls \"handshake_first\" is not supported yet",
                    ));
                }
                ws.tls = Some(tls);
            }
            "same_origin" => ws.same_origin = expect_bool(k, v)?,
            "allowed_origins" | "allowed_origin" | "allow_origins" | "allow_origin" | "origins"
            | "origin" => {
                ws.allowed_origins = match &v.value {
                    Value::String(s) => vec![s.clone()],
                    Value::Array(list) => list
                        .iter()
                        .map(|o| expect_str(k, o).map(str::to_string))
                        .collect::<Result<_, _>>()?,
                    other => {
                        return Err(ConfError::at(
                            v,
                            format!(
                                "error parsing allowed origins: unsupported type {}",
                                other.type_name()
                            ),
                        ))
                    }
                };
                for o in &ws.allowed_origins {
                    if Origin::parse(o).is_none() {
                        return Err(ConfError::at(
                            v,
                            format!("unable to parse allowed origin: {o:?}"),
                        ));
                    }
                }
            }
            "handshake_timeout" => {
                ws.handshake_timeout = expect_duration(k, v, DEFAULT_HANDSHAKE_TIMEOUT, warnings)?;
            }
            "compression" | "compress" => ws.compression = expect_bool(k, v)?,
            _ if v.used_as_variable => {}
            _ => {
                return Err(ConfError::at(v, format!("unknown field {key:?}")));
            }
        }
    }
    Ok(port_given.then_some(ws))
}

fn ws_port(v: &Item, n: i64) -> Result<u16, ConfError> {
    port_from(n, 0).ok_or_else(|| ConfError::at(v, format!("websocket: invalid port {n}")))
}

/// An origin as nats-server compares them: scheme, lower-case host, port (80 or 443 when
/// not written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    scheme: String,
    host: String,
    port: String,
}

impl Origin {
    /// `scheme://host[:port][/...]`; `None` when it is not of that form.
    pub(crate) fn parse(s: &str) -> Option<Origin> {
        let (scheme, rest) = s.split_once("://")?;
        if scheme.is_empty()
            || !scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        {
            return None;
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let (host, port) = host_and_port(scheme.eq_ignore_ascii_case("https"), authority)?;
        Some(Origin {
            scheme: scheme.to_ascii_lowercase(),
            host,
            port,
        })
    }
}

/// A `host[:port]` (a `Host` header or an origin's authority): the lower-case host and the
/// port, 443 or 80 when not written.
fn host_and_port(tls: bool, hostport: &str) -> Option<(String, String)> {
    let default = if tls { "443" } else { "80" };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        match after.strip_prefix(':') {
            Some(port) => (host, port),
            None if after.is_empty() => (host, default),
            None => return None,
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, port),
            Some(_) => return None,
            None => (hostport, default),
        }
    };
    if host.is_empty() {
        return None;
    }
    Some((host.to_ascii_lowercase(), port.to_string()))
}

/// The origin check of the listener (`same_origin`, `allowed_origins`), made once.
#[derive(Debug, Clone, Default)]
pub(crate) struct OriginCheck {
    same_origin: bool,
    allowed: Vec<Origin>,
    tls: bool,
}

impl OriginCheck {
    pub(crate) fn new(opts: &WebsocketOptions) -> Self {
        OriginCheck {
            same_origin: opts.same_origin,
            allowed: opts
                .allowed_origins
                .iter()
                .filter_map(|o| Origin::parse(o))
                .collect(),
            tls: opts.tls.is_some(),
        }
    }

    /// Whether a request with this `Origin` (or `Sec-WebSocket-Origin`) header and this
    /// `Host` header may upgrade, as nats-server's `checkOrigin`: without a check configured
    /// or without an origin header, yes. With `same_origin`, the origin's scheme, host and
    /// port must be the request's: `https` on a TLS listener, `http` on a plain one, the
    /// host of `Host` (any case), its port (443 or 80 when not written, by scheme). With
    /// `allowed_origins`, one of them must have the origin's scheme, host and port. `Err`
    /// says why not.
    pub(crate) fn check(&self, origin: Option<&str>, host: Option<&str>) -> Result<(), String> {
        if !self.same_origin && self.allowed.is_empty() {
            return Ok(());
        }
        let Some(origin) = origin.filter(|o| !o.is_empty()) else {
            return Ok(());
        };
        let o = Origin::parse(origin).ok_or_else(|| format!("parse {origin:?}: invalid URI"))?;
        if self.same_origin {
            let (rh, rp) = host_and_port(self.tls, host.unwrap_or_default())
                .ok_or_else(|| "missing port in address".to_string())?;
            // The request's own scheme is that of the listener: https with TLS.
            let scheme = if self.tls { "https" } else { "http" };
            if o.host != rh || o.port != rp || o.scheme != scheme {
                return Err("not same origin".into());
            }
        }
        if !self.allowed.is_empty()
            && !self
                .allowed
                .iter()
                .any(|a| a.host == o.host && a.scheme == o.scheme && a.port == o.port)
        {
            return Err("not in the allowed list".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<WebsocketOptions>, ConfError> {
        let map = crate::conf::parse_str(text).unwrap();
        let (_, item) = map
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("websocket"))
            .unwrap();
        parse_websocket(item, &mut Vec::new())
    }

    #[test]
    fn a_block_parses() {
        let ws = parse(
            "WebSocket { Listen: \"127.0.0.2:-1\", no_tls: true, same_origin: true,\n\
             allowed_origins: [\"https://a.example.com\"], handshake_timeout: \"3s\",\n\
             compression: false }",
        )
        .unwrap()
        .unwrap();
        assert_eq!((ws.host.as_str(), ws.port), ("127.0.0.2", 0));
        assert!(ws.no_tls && ws.same_origin);
        assert_eq!(ws.allowed_origins, ["https://a.example.com"]);
        assert_eq!(ws.handshake_timeout, Duration::from_secs(3));
        assert!(!ws.compression);
        let ws = parse("websocket { port: 1, Compression: true }")
            .unwrap()
            .unwrap();
        assert!(ws.compression);
        let ws = parse("websocket { port: 8080, host: \"::1\" }")
            .unwrap()
            .unwrap();
        assert_eq!((ws.host.as_str(), ws.port), ("::1", 8080));
        assert!(!ws.no_tls && ws.tls.is_none());
        assert_eq!(
            parse("websocket { no_tls: true }").unwrap(),
            None,
            "no port"
        );
    }

    #[test]
    fn unknown_and_unsupported_keys_are_errors() {
        let err = |t: &str| parse(t).unwrap_err().message;
        assert_eq!(
            err("websocket { port: 1, foo: 1 }"),
            "unknown field \"foo\""
        );
        assert!(err("websocket { port: 1, compression: 1 }").contains("compression"));
        assert!(err(
            "websocket { port: 1, tls { cert_file: a, key_file: b, verify_and_map: true } }"
        )
        .contains("verify_and_map"));
        assert!(err("websocket { port: 1, origins: [\"nope\"] }").contains("allowed origin"));
    }

    #[test]
    fn origins_are_checked_as_nats_server() {
        let opts = |same, allowed: &[&str]| WebsocketOptions {
            same_origin: same,
            allowed_origins: allowed.iter().map(|s| s.to_string()).collect(),
            ..WebsocketOptions::default()
        };
        let any = OriginCheck::new(&opts(false, &[]));
        assert!(any.check(Some("http://evil.com"), Some("a:1")).is_ok());
        let same = OriginCheck::new(&opts(true, &[]));
        assert!(same
            .check(Some("http://Host.com:8080"), Some("host.com:8080"))
            .is_ok());
        assert!(same
            .check(Some("http://host.com"), Some("host.com:80"))
            .is_ok());
        assert_eq!(
            same.check(Some("http://other.com:8080"), Some("host.com:8080")),
            Err("not same origin".into())
        );
        assert!(
            same.check(None, Some("host.com")).is_ok(),
            "no origin: accepted"
        );
        // The scheme must be the listener's: http without TLS, https with it.
        assert_eq!(
            same.check(Some("https://host.com:8080"), Some("host.com:8080")),
            Err("not same origin".into())
        );
        assert_eq!(
            same.check(Some("https://host.com"), Some("host.com:443")),
            Err("not same origin".into())
        );
        assert!(same
            .check(Some("HTTP://host.com:8080"), Some("HOST.com:8080"))
            .is_ok());
        let mut tls_same = OriginCheck::new(&opts(true, &[]));
        tls_same.tls = true;
        assert!(tls_same
            .check(Some("https://host.com"), Some("host.com"))
            .is_ok());
        assert!(tls_same
            .check(Some("https://host.com:443"), Some("host.com"))
            .is_ok());
        assert_eq!(
            tls_same.check(Some("http://host.com:443"), Some("host.com:443")),
            Err("not same origin".into())
        );
        assert_eq!(
            tls_same.check(Some("http://host.com"), Some("host.com")),
            Err("not same origin".into())
        );
        let list = OriginCheck::new(&opts(false, &["https://app.example.com"]));
        assert!(list
            .check(Some("https://app.example.com:443"), None)
            .is_ok());
        assert_eq!(
            list.check(Some("http://app.example.com"), None),
            Err("not in the allowed list".into())
        );
    }
}
