//! Connection types: what a user's `allowed_connection_types` names, and which type a
//! connection is (nats-server's `connectionTypeAllowed` in `server/client.go`, with the names
//! of `jwt.ConnectionType*`).
//!
//! A user with an empty list (or none) may use every type; otherwise only the types listed.
//! Names match in any case and are kept upper case; an unknown name is an error at load,
//! nats-server's `invalid connection types ["NAME" ...]` (every unknown one, upper case).
//! jsserver has two listeners: the client port is `STANDARD`, the WebSocket port is
//! `WEBSOCKET`. The other types (`LEAFNODE`, `LEAFNODE_WS`, `MQTT`, `MQTT_WS`, `IN_PROCESS`)
//! are accepted in the list, as nats-server accepts them, but no connection here is of them.

use std::collections::BTreeSet;

/// How a client reached the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionType {
    /// A NATS client on the client port (`STANDARD`).
    Standard,
    /// A NATS client on the WebSocket port (`WEBSOCKET`).
    Websocket,
    /// A leaf node (`LEAFNODE`).
    Leafnode,
    /// A leaf node over WebSocket (`LEAFNODE_WS`).
    LeafnodeWs,
    /// An MQTT client (`MQTT`).
    Mqtt,
    /// An MQTT client over WebSocket (`MQTT_WS`).
    MqttWs,
    /// A client inside the server's own process (`IN_PROCESS`).
    InProcess,
}

impl ConnectionType {
    /// Every type, in nats-server's order.
    pub const ALL: [ConnectionType; 7] = [
        ConnectionType::Standard,
        ConnectionType::Websocket,
        ConnectionType::Leafnode,
        ConnectionType::LeafnodeWs,
        ConnectionType::Mqtt,
        ConnectionType::MqttWs,
        ConnectionType::InProcess,
    ];

    /// The type's name in `allowed_connection_types` (upper case).
    pub fn name(self) -> &'static str {
        match self {
            ConnectionType::Standard => "STANDARD",
            ConnectionType::Websocket => "WEBSOCKET",
            ConnectionType::Leafnode => "LEAFNODE",
            ConnectionType::LeafnodeWs => "LEAFNODE_WS",
            ConnectionType::Mqtt => "MQTT",
            ConnectionType::MqttWs => "MQTT_WS",
            ConnectionType::InProcess => "IN_PROCESS",
        }
    }

    /// Whether a user limited to `allowed` (upper-case names; empty: all) may connect as
    /// this type.
    pub fn allowed_by(self, allowed: &BTreeSet<String>) -> bool {
        allowed.is_empty() || allowed.contains(self.name())
    }
}

/// The upper-case set of `names` (any case), as nats-server's
/// `convertAllowedConnectionTypes`.
///
/// # Errors
/// `invalid connection types ["A" "B"]`: the names that are no type, upper case, in order.
pub fn parse_connection_types<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeSet<String>, String> {
    let mut types = BTreeSet::new();
    let mut unknown = Vec::new();
    for name in names {
        let upper = name.to_ascii_uppercase();
        if ConnectionType::ALL.iter().any(|t| t.name() == upper) {
            types.insert(upper);
        } else {
            unknown.push(format!("{upper:?}"));
        }
    }
    if unknown.is_empty() {
        Ok(types)
    } else {
        Err(format!("invalid connection types [{}]", unknown.join(" ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_any_case_and_unknown_ones_listed() {
        let set =
            parse_connection_types(["standard", "WebSocket", "mqtt_ws", "In_Process"]).unwrap();
        assert_eq!(
            set.iter().map(String::as_str).collect::<Vec<_>>(),
            ["IN_PROCESS", "MQTT_WS", "STANDARD", "WEBSOCKET"]
        );
        assert_eq!(
            parse_connection_types(["standard", "carrier_pigeon", "Foo"]).unwrap_err(),
            r#"invalid connection types ["CARRIER_PIGEON" "FOO"]"#
        );
        for t in ConnectionType::ALL {
            assert_eq!(parse_connection_types([t.name()]).unwrap().len(), 1);
        }
    }

    #[test]
    fn an_empty_list_allows_every_type() {
        let none = BTreeSet::new();
        assert!(ConnectionType::ALL.iter().all(|t| t.allowed_by(&none)));
        let ws = parse_connection_types(["websocket"]).unwrap();
        assert!(ConnectionType::Websocket.allowed_by(&ws));
        assert!(!ConnectionType::Standard.allowed_by(&ws));
        let std = parse_connection_types(["STANDARD"]).unwrap();
        assert!(ConnectionType::Standard.allowed_by(&std));
        assert!(!ConnectionType::Websocket.allowed_by(&std));
    }
}
