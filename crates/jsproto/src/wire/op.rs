//! The operations of the NATS client protocol, as values.
//!
//! [`ClientOp`] is what a client sends and [`ServerOp`] what a server sends. Every byte field is
//! a [`Bytes`] that the decoder slices out of the received frame without copying. Subjects, reply
//! subjects, queue groups and sids are raw bytes: the protocol does not require UTF-8, and subject
//! syntax is checked elsewhere (see [`crate::subject`]).

use crate::gojson::fold_keys;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::WireError;

/// An operation a client sends: decoded by the server ([`ServerCodec`](super::ServerCodec)),
/// encoded by the client ([`ClientCodec`](super::ClientCodec)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientOp {
    /// `CONNECT <json>`: connection options and credentials.
    Connect(Box<Connect>),
    /// `PUB` or `HPUB` (headers: `Some(raw header block)` for `HPUB`).
    Pub(Publish),
    /// `SUB <subject> [queue group] <sid>`.
    Sub {
        /// Subject filter, possibly with wildcards (not validated by the codec).
        subject: Bytes,
        /// Queue group name, if any.
        queue_group: Option<Bytes>,
        /// Client-chosen subscription id: an opaque token echoed in every `MSG`.
        sid: Bytes,
    },
    /// `UNSUB <sid> [max_msgs]`.
    Unsub {
        /// The sid given in `SUB`.
        sid: Bytes,
        /// Unsubscribe automatically after this many *more* deliveries; `None` = now.
        max_msgs: Option<u64>,
    },
    /// `PING`: the server must answer `PONG`.
    Ping,
    /// `PONG`: answer to a server `PING`.
    Pong,
}

/// A `PUB` (`headers: None`) or `HPUB` (`headers: Some(..)`).
///
/// On the wire: `PUB <subject> [reply] <#bytes>\r\n<payload>\r\n` or
/// `HPUB <subject> [reply] <#hdr bytes> <#total bytes>\r\n<headers><payload>\r\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// Subject published to (not validated by the codec).
    pub subject: Bytes,
    /// Reply subject; `None` when absent (an empty reply, as in nats-py's `PUB subj  5`, is absent).
    pub reply: Option<Bytes>,
    /// The raw header block, exactly as on the wire: from `NATS/1.0` through the final `\r\n` of
    /// the blank line (the first `#hdr bytes` of the body). Parse it with
    /// [`Headers::parse`](crate::headers::Headers::parse) when needed. The codec does not check it.
    pub headers: Option<Bytes>,
    /// The payload, without the trailing `\r\n`. May be empty.
    pub payload: Bytes,
}

/// An operation a server sends: decoded by the client ([`ClientCodec`](super::ClientCodec)),
/// encoded by the server ([`ServerCodec`](super::ServerCodec)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerOp {
    /// `INFO <json>`: server identity and limits; first op on every connection, may repeat.
    Info(Box<Info>),
    /// `MSG` or `HMSG` (headers: `Some(raw header block)` for `HMSG`).
    Msg(Message),
    /// `PING`: the client must answer `PONG`.
    Ping,
    /// `PONG`: answer to a client `PING`.
    Pong,
    /// `+OK`: sent after each op when the client asked for `verbose`.
    Ok,
    /// `-ERR '<text>'`; holds the text without the quotes (lossily converted to UTF-8).
    Err(String),
}

/// A delivered message: `MSG` (`headers: None`) or `HMSG` (`headers: Some(..)`).
///
/// On the wire: `MSG <subject> <sid> [reply] <#bytes>\r\n<payload>\r\n` or
/// `HMSG <subject> <sid> [reply] <#hdr bytes> <#total bytes>\r\n<headers><payload>\r\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Subject the message was published to.
    pub subject: Bytes,
    /// Sid of the subscription this delivery is for.
    pub sid: Bytes,
    /// Reply subject; `None` when absent.
    pub reply: Option<Bytes>,
    /// Raw header block, as in [`Publish::headers`].
    pub headers: Option<Bytes>,
    /// The payload, without the trailing `\r\n`. May be empty.
    pub payload: Bytes,
}

/// The JSON body of `CONNECT`: connection options and credentials.
///
/// Every field is optional; absent fields are `None` and are not serialized. Unknown fields are
/// accepted and ignored (the protocol evolves). Use the accessor methods ([`Connect::verbose`]
/// etc.) to read a field with the server default applied, as nats-server's `ClientOpts` does:
/// `verbose`, `pedantic` and `echo` default to **true**, `headers` and `no_responders` to false,
/// `protocol` to 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connect {
    /// Ask for `+OK` after every op. Absent = true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verbose: Option<bool>,
    /// Extra subject checks on publish. Absent = true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pedantic: Option<bool>,
    /// The client expects TLS (informational).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_required: Option<bool>,
    /// Deliver this connection's own publishes to its own subscriptions. Absent = true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo: Option<bool>,
    /// The client understands `HPUB`/`HMSG`. Absent = false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<bool>,
    /// Send a 503 status message when a request has no responders (needs `headers`). Absent =
    /// false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_responders: Option<bool>,
    /// Protocol level: 0 or 1 (1 = understands async INFO). Absent = 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<i64>,
    /// Client connection name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Client library language, e.g. `python3`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    /// Client library version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// User name (user/password auth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Password (user/password auth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<String>,
    /// Token auth (the JSON key is `auth_token`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_token: Option<String>,
    /// User JWT (decentralised auth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
    /// Public nkey.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nkey: Option<String>,
    /// Signature of the server nonce.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
}

impl Connect {
    /// The JSON names of the fields, for matching keys as Go does (a test checks them against
    /// the struct).
    const FIELDS: &'static [&'static str] = &[
        "verbose",
        "pedantic",
        "tls_required",
        "echo",
        "headers",
        "no_responders",
        "protocol",
        "name",
        "lang",
        "version",
        "user",
        "pass",
        "auth_token",
        "jwt",
        "nkey",
        "sig",
    ];

    /// Parses the JSON argument of `CONNECT`.
    ///
    /// # Errors
    ///
    /// [`WireError::InvalidConnect`] if the JSON is malformed, is not an object (an array would
    /// otherwise be read field by field) or has a wrongly typed field. nats-server closes the
    /// connection without `-ERR` in all these cases.
    ///
    /// As nats-server's decoder: `null` means all defaults, a repeated key keeps its last
    /// value, and keys match the fields in any case (`{"VERBOSE":false}`).
    pub fn from_json(json: &[u8]) -> Result<Self, WireError> {
        let invalid = |e: serde_json::Error| WireError::InvalidConnect(e.to_string());
        match serde_json::from_slice::<serde_json::Value>(json).map_err(invalid)? {
            serde_json::Value::Null => Ok(Connect::default()),
            serde_json::Value::Object(object) => serde_json::from_value(serde_json::Value::Object(
                fold_keys(object, Connect::FIELDS),
            ))
            .map_err(invalid),
            _ => Err(WireError::InvalidConnect(
                "expected a JSON object".to_owned(),
            )),
        }
    }

    /// Applies a later `CONNECT` on the same connection: each field `later` sets replaces this
    /// one's, each field it leaves out keeps its value. nats-server decodes every `CONNECT`
    /// into the options the connection already has (`processConnect` in `server/client.go`),
    /// so after `{"verbose":false,"headers":true}` a second `CONNECT {}` changes nothing:
    /// no `+OK`, and `HPUB` is still allowed.
    pub fn merge(&mut self, later: Connect) {
        fn keep_or_set<T>(field: &mut Option<T>, later: Option<T>) {
            if later.is_some() {
                *field = later;
            }
        }
        // Destructured in full: a field added to `Connect` must be merged here too.
        let Connect {
            verbose,
            pedantic,
            tls_required,
            echo,
            headers,
            no_responders,
            protocol,
            name,
            lang,
            version,
            user,
            pass,
            auth_token,
            jwt,
            nkey,
            sig,
        } = later;
        keep_or_set(&mut self.verbose, verbose);
        keep_or_set(&mut self.pedantic, pedantic);
        keep_or_set(&mut self.tls_required, tls_required);
        keep_or_set(&mut self.echo, echo);
        keep_or_set(&mut self.headers, headers);
        keep_or_set(&mut self.no_responders, no_responders);
        keep_or_set(&mut self.protocol, protocol);
        keep_or_set(&mut self.name, name);
        keep_or_set(&mut self.lang, lang);
        keep_or_set(&mut self.version, version);
        keep_or_set(&mut self.user, user);
        keep_or_set(&mut self.pass, pass);
        keep_or_set(&mut self.auth_token, auth_token);
        keep_or_set(&mut self.jwt, jwt);
        keep_or_set(&mut self.nkey, nkey);
        keep_or_set(&mut self.sig, sig);
    }

    /// `verbose` with the server default applied (true when absent).
    pub fn verbose(&self) -> bool {
        self.verbose.unwrap_or(true)
    }

    /// `pedantic` with the server default applied (true when absent).
    pub fn pedantic(&self) -> bool {
        self.pedantic.unwrap_or(true)
    }

    /// `echo` with the server default applied (true when absent).
    pub fn echo(&self) -> bool {
        self.echo.unwrap_or(true)
    }

    /// `headers` with the server default applied (false when absent).
    pub fn headers(&self) -> bool {
        self.headers.unwrap_or(false)
    }

    /// `no_responders` with the server default applied (false when absent).
    pub fn no_responders(&self) -> bool {
        self.no_responders.unwrap_or(false)
    }

    /// `protocol` with the server default applied (0 when absent). nats-server accepts only 0
    /// and 1 (`-ERR 'invalid client protocol'` otherwise); that check is the server's.
    pub fn protocol(&self) -> i64 {
        self.protocol.unwrap_or(0)
    }
}

/// The JSON body of `INFO`: server identity, limits and features.
///
/// Decoding accepts unknown fields and fills any missing field with its default (empty string,
/// 0, false, `None`), because real servers send more fields than listed here and older ones
/// fewer. Serialization always writes the first nine fields and, as nats-server's
/// `omitempty` does, leaves out the optional ones when they are `None` or false.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Info {
    /// Unique server id (nkey-style, 56 upper-case characters on nats-server).
    pub server_id: String,
    /// Server name; nats-server defaults it to `server_id`.
    pub server_name: String,
    /// Server version, `major.minor.patch`. Clients gate features on it; advertise ≥ 2.11.0.
    pub version: String,
    /// Protocol level; 1 = async INFO supported. Send 1.
    pub proto: i32,
    /// Git commit of the server build.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_commit: Option<String>,
    /// Go runtime version (informational).
    pub go: String,
    /// Listen host.
    pub host: String,
    /// Listen port.
    pub port: u16,
    /// The server supports headers. Must be true, or clients never enable headers.
    pub headers: bool,
    /// Largest accepted `PUB`/`HPUB` total size, in bytes (nats-server default 1048576).
    pub max_payload: u64,
    /// JetStream is enabled (omitted when false).
    #[serde(skip_serializing_if = "is_false")]
    pub jetstream: bool,
    /// Per-connection id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<u64>,
    /// The client's IP address as seen by the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<String>,
    /// The client must send credentials in `CONNECT` (omitted when false).
    #[serde(skip_serializing_if = "is_false")]
    pub auth_required: bool,
    /// The client must start TLS (omitted when false).
    #[serde(skip_serializing_if = "is_false")]
    pub tls_required: bool,
    /// The server asks TLS clients for a certificate it verifies (omitted when false).
    #[serde(skip_serializing_if = "is_false")]
    pub tls_verify: bool,
    /// The client may start TLS, or stay in plain text (nats-server's `allow_non_tls`;
    /// omitted when false).
    #[serde(skip_serializing_if = "is_false")]
    pub tls_available: bool,
    /// Nonce to sign for nkey/JWT auth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// The cluster's name, when the server is in one (`cluster { name }`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Other cluster members' client URLs, added to client server pools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_urls: Option<Vec<String>>,
    /// Lame-duck mode: clients should reconnect elsewhere (omitted when false).
    #[serde(skip_serializing_if = "is_false")]
    pub ldm: bool,
    /// JetStream domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// JetStream API level (5 on nats-server 2.15).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_lvl: Option<u32>,
    /// Set in the INFO nats-server sends after `CONNECT` (with the first `PONG`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_info: Option<bool>,
    /// The account the client is bound to (post-`CONNECT` INFO), e.g. `$G`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_account: Option<String>,
}

impl Info {
    /// Parses the JSON argument of `INFO`.
    ///
    /// # Errors
    ///
    /// [`WireError::InvalidInfo`] if the JSON is malformed, not an object, or has a wrongly
    /// typed known field.
    pub fn from_json(json: &[u8]) -> Result<Self, WireError> {
        if first_non_blank(json) != Some(b'{') {
            return Err(WireError::InvalidInfo("expected a JSON object".to_owned()));
        }
        serde_json::from_slice(json).map_err(|e| WireError::InvalidInfo(e.to_string()))
    }
}

// A `bool` field is written only when true, like Go's `omitempty`.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference
fn is_false(b: &bool) -> bool {
    !*b
}

fn first_non_blank(json: &[u8]) -> Option<u8> {
    json.iter().copied().find(|b| !b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_defaults_follow_the_server() {
        let c = Connect::from_json(b"{}").unwrap();
        assert!(c.verbose() && c.pedantic() && c.echo());
        assert!(!c.headers() && !c.no_responders());
        assert_eq!(c.protocol(), 0);
    }

    #[test]
    fn connect_reads_nats_py_and_ignores_unknown_fields() {
        let json = br#"{"echo": true, "headers": true, "lang": "python3", "name": "probe", "no_responders": true, "pedantic": false, "protocol": 1, "verbose": false, "version": "2.16.0", "new_field": [1]}"#;
        let c = Connect::from_json(json).unwrap();
        assert!(!c.verbose() && !c.pedantic() && c.echo() && c.headers() && c.no_responders());
        assert_eq!(c.protocol(), 1);
        assert_eq!(c.lang.as_deref(), Some("python3"));
        assert_eq!(c.version.as_deref(), Some("2.16.0"));
    }

    #[test]
    fn connect_rejects_bad_json() {
        for bad in [
            &b"{"[..],
            b"",
            b"[true, false]",
            br#"{"verbose": "yes"}"#,
            br#"{"protocol": "1"}"#,
            br#"{"name": 5}"#,
        ] {
            let err = Connect::from_json(bad).unwrap_err();
            assert!(
                matches!(err, WireError::InvalidConnect(_)),
                "{bad:?}: {err:?}"
            );
            assert_eq!(err.err_text(), None);
        }
    }

    #[test]
    fn connect_null_and_repeated_keys_are_accepted_like_nats_server() {
        assert_eq!(Connect::from_json(b"null").unwrap(), Connect::default());
        let c = Connect::from_json(br#"{"verbose":true,"verbose":false}"#).unwrap();
        assert_eq!(c.verbose, Some(false), "the last value wins");
    }

    #[test]
    fn connect_serializes_only_present_fields() {
        let c = Connect {
            verbose: Some(false),
            auth_token: Some("t".into()),
            ..Connect::default()
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"verbose":false,"auth_token":"t"}"#
        );
    }

    #[test]
    fn info_reads_the_observed_server_info() {
        let json = br#"{"server_id":"NBEM","server_name":"NBEM","version":"2.15.1","proto":1,"git_commit":"b2fd3ef","go":"go1.27.2","host":"127.0.0.1","port":18400,"headers":true,"max_payload":1048576,"jetstream":true,"client_id":5,"client_ip":"127.0.0.1","api_lvl":5,"xkey":"XAS"}"#;
        let info = Info::from_json(json).unwrap();
        assert_eq!(info.version, "2.15.1");
        assert_eq!(info.port, 18400);
        assert!(info.headers && info.jetstream);
        assert_eq!(info.max_payload, 1_048_576);
        assert_eq!(info.client_id, Some(5));
        assert_eq!(info.api_lvl, Some(5));
        assert_eq!(info.git_commit.as_deref(), Some("b2fd3ef"));
    }

    #[test]
    fn info_tolerates_missing_fields_and_omits_empty_optionals() {
        let info = Info::from_json(br#"{"server_id":"X"}"#).unwrap();
        assert_eq!(
            info,
            Info {
                server_id: "X".into(),
                ..Info::default()
            }
        );
        let json = serde_json::to_string(&Info::default()).unwrap();
        assert_eq!(
            json,
            r#"{"server_id":"","server_name":"","version":"","proto":0,"go":"","host":"","port":0,"headers":false,"max_payload":0}"#
        );
    }

    #[test]
    fn info_rejects_non_objects_and_wrong_types() {
        for bad in [&b"[]"[..], b"{", br#"{"port":"x"}"#, br#"{"port":70000}"#] {
            assert!(
                matches!(Info::from_json(bad), Err(WireError::InvalidInfo(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_later_connect_overrides_only_what_it_sets() {
        let mut options = Connect::from_json(br#"{"verbose":false,"headers":true,"name":"a"}"#)
            .expect("valid CONNECT");
        options.merge(Connect::from_json(b"{}").expect("valid CONNECT"));
        assert!(!options.verbose() && options.headers());
        assert_eq!(options.name.as_deref(), Some("a"));
        options.merge(Connect::from_json(br#"{"verbose":true,"name":"b"}"#).expect("valid"));
        assert!(options.verbose() && options.headers());
        assert_eq!(options.name.as_deref(), Some("b"));
    }

    #[test]
    fn connect_fields_list_every_field() {
        let text = || Some(String::new());
        let all = Connect {
            verbose: Some(true),
            pedantic: Some(true),
            tls_required: Some(true),
            echo: Some(true),
            headers: Some(true),
            no_responders: Some(true),
            protocol: Some(1),
            name: text(),
            lang: text(),
            version: text(),
            user: text(),
            pass: text(),
            auth_token: text(),
            jwt: text(),
            nkey: text(),
            sig: text(),
        };
        let serde_json::Value::Object(keys) = serde_json::to_value(all).unwrap() else {
            unreachable!("a struct serializes as an object");
        };
        let mut keys: Vec<&str> = keys.keys().map(String::as_str).collect();
        let mut fields = Connect::FIELDS.to_vec();
        keys.sort_unstable();
        fields.sort_unstable();
        assert_eq!(keys, fields);
    }
}
