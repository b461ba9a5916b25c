//! The `tls { }` block of the config file, as nats-server's `parseTLS` reads it for the client
//! listener:
//!
//! ```text
//! tls {
//!   cert_file: "server-cert.pem"    # PEM chain the server presents
//!   key_file:  "server-key.pem"     # its private key
//!   ca_file:   "ca.pem"             # authorities client certificates must chain to
//!   verify:    true                 # clients must present a certificate (or verify_and_map)
//!   timeout:   2                    # handshake limit: seconds (float) or "2s"
//!   handshake_first: true           # TLS before INFO (also `first`, `immediate`)
//! }
//! ```
//!
//! Keys match in any case. The keys of nats-server's block that jsserver does not enforce
//! (`cipher_suites`, `pinned_certs`, `min_version`, ...) are refused at start-up through
//! [`crate::options::UNSUPPORTED`] (section [`crate::options::Section::Tls`]), before this runs;
//! a key nats-server does not know either is an error, as there.

use std::time::Duration;

use crate::conf::{ConfError, Item, Value};

use super::TlsOptions;

/// Parses a top-level `tls` block into `tls` (its other fields, `allow_non_tls`, untouched).
///
/// # Errors
/// nats-server's texts, with the file and line: `error parsing tls config, expected
/// 'cert_file' to be filename`, `... expected 'verify' to be a boolean`, `... 'timeout' wrong
/// type`, `error parsing tls config, unknown field "..."`; `handshake_first` with a fallback
/// delay (`auto` or a duration) is refused as not supported yet.
pub fn parse_tls(item: &Item, tls: &mut TlsOptions) -> Result<(), ConfError> {
    let Value::Map(block) = &item.value else {
        return Err(ConfError::at(
            item,
            format!(
                "error parsing tls config, expected a map, got {}",
                item.value.type_name()
            ),
        ));
    };
    for (key, v) in block.iter() {
        let lower = key.to_ascii_lowercase();
        let file = |what: &str| {
            v.as_str().map(str::to_owned).ok_or_else(|| {
                ConfError::at(
                    v,
                    format!("error parsing tls config, expected '{what}' to be filename"),
                )
            })
        };
        let boolean = |what: &str| {
            v.as_bool().ok_or_else(|| {
                ConfError::at(
                    v,
                    format!("error parsing tls config, expected '{what}' to be a boolean"),
                )
            })
        };
        match lower.as_str() {
            "cert_file" => tls.cert_file = file("cert_file")?,
            "key_file" => tls.key_file = file("key_file")?,
            "ca_file" => tls.ca_file = Some(file("ca_file")?),
            "verify" => tls.verify = boolean("verify")?,
            "verify_and_map" => {
                let on = boolean("verify_and_map")?;
                // As nats-server: `verify_and_map: false` does not turn `verify` off.
                tls.verify |= on;
                tls.map = on;
            }
            "timeout" => tls.timeout = timeout(v)?,
            "handshake_first" | "first" | "immediate" => {
                tls.handshake_first = handshake_first(key, v)?;
            }
            _ => {
                return Err(ConfError::at(
                    v,
                    format!("error parsing tls config, unknown field {key:?}"),
                ))
            }
        }
    }
    Ok(())
}

/// `timeout`: seconds as an integer or float, or a Go duration string. `0` keeps the default.
fn timeout(v: &Item) -> Result<Duration, ConfError> {
    let seconds = match &v.value {
        Value::Integer(n) => *n as f64,
        Value::Float(f) => *f,
        Value::String(s) => {
            let nanos = jsproto::duration::parse_go_duration(s).ok_or_else(|| {
                ConfError::at(
                    v,
                    format!("error parsing tls config, 'timeout' time: invalid duration {s:?}"),
                )
            })?;
            nanos as f64 / 1e9
        }
        _ => {
            return Err(ConfError::at(
                v,
                "error parsing tls config, 'timeout' wrong type",
            ))
        }
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(ConfError::at(
            v,
            "error parsing tls config, 'timeout' wrong type",
        ));
    }
    Ok(if seconds == 0.0 {
        super::DEFAULT_TLS_TIMEOUT
    } else {
        Duration::from_secs_f64(seconds)
    })
}

/// `handshake_first`: a boolean, or `true`/`on`/`false`/`off` as a string. nats-server's
/// fallback forms (`auto`, `auto_fallback`, a delay such as `300ms`, after which a client
/// that sent nothing gets a plain-text INFO) are refused: jsserver has no fallback yet.
fn handshake_first(key: &str, v: &Item) -> Result<bool, ConfError> {
    match &v.value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "on" => Ok(true),
            "false" | "off" => Ok(false),
            lower
                if matches!(lower, "auto" | "auto_fallback")
                    || jsproto::duration::parse_go_duration(lower).is_some() =>
            {
                Err(ConfError::at(
                    v,
                    format!(
                        "tls {key:?}: {s:?} (a plain-text fallback after a delay) is not \
                         supported yet; use true or false"
                    ),
                ))
            }
            _ => Err(ConfError::at(
                v,
                format!("field {key:?}'s value {s:?} is invalid"),
            )),
        },
        other => Err(ConfError::at(
            v,
            format!(
                "field {key:?} should be a boolean or a string, got {}",
                other.type_name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TlsOptions, ConfError> {
        let map = crate::conf::parse_str(text).unwrap();
        let mut tls = TlsOptions::default();
        let (_, item) = map
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("tls"))
            .unwrap();
        parse_tls(item, &mut tls)?;
        Ok(tls)
    }

    #[test]
    fn a_full_block_parses() {
        let t = parse(
            "TLS { Cert_File: c.pem, key_file: \"k.pem\", ca_file: ca.pem, verify_and_map: true,\n\
             timeout: 0.5, first: \"on\" }",
        )
        .unwrap();
        assert_eq!(t.cert_file, "c.pem");
        assert_eq!(t.key_file, "k.pem");
        assert_eq!(t.ca_file.as_deref(), Some("ca.pem"));
        assert!(t.verify && t.map && t.handshake_first);
        assert_eq!(t.timeout, Duration::from_millis(500));
        assert_eq!(
            parse("tls { timeout: \"3s\" }").unwrap().timeout,
            Duration::from_secs(3)
        );
        assert_eq!(
            parse("tls { timeout: 0 }").unwrap().timeout,
            DEFAULT_TLS_TIMEOUT_FOR_TEST
        );
    }

    const DEFAULT_TLS_TIMEOUT_FOR_TEST: Duration = super::super::DEFAULT_TLS_TIMEOUT;

    #[test]
    fn wrong_types_and_unknown_keys_are_errors_as_in_nats_server() {
        let err = |t: &str| parse(t).unwrap_err().message;
        assert_eq!(
            err("tls { cert_file: 1 }"),
            "error parsing tls config, expected 'cert_file' to be filename"
        );
        assert_eq!(
            err("tls { verify: \"x\" }"),
            "error parsing tls config, expected 'verify' to be a boolean"
        );
        assert_eq!(
            err("tls { timeout: [1] }"),
            "error parsing tls config, 'timeout' wrong type"
        );
        assert_eq!(
            err("tls { bogus: 1 }"),
            "error parsing tls config, unknown field \"bogus\""
        );
        assert_eq!(
            err("tls { handshake_first: maybe }"),
            "field \"handshake_first\"'s value \"maybe\" is invalid"
        );
        assert!(err("tls { handshake_first: auto }").contains("not supported yet"));
        assert!(err("tls { handshake_first: \"300ms\" }").contains("not supported yet"));
    }

    #[test]
    fn verify_and_map_false_leaves_verify_alone() {
        let t = parse("tls { verify: true, verify_and_map: false }").unwrap();
        assert!(t.verify && !t.map);
    }
}
