//! `allowed_connection_types` on every listener: a user limited to `STANDARD` logs in on the
//! client port only, one limited to `WEBSOCKET` on the WebSocket port only, as on nats-server
//! (`connectionTypeAllowed`), for the users of `authorization`, the users of `accounts`, nkey
//! users and the `no_auth_user`; names in any case; an unknown name stops the server at
//! start-up with nats-server's words.
//!
//! `JSSERVER_TEST_BINARY=$(which nats-server) cargo test -p jsserver --test connection_types`
//! runs them against nats-server.

mod common;

use common::{run_config_to_exit, ws, Raw, TestServer};

const OK: &str = "PONG\r\n";
const VIOLATION: &str = "-ERR 'Authorization Violation'\r\n";

/// A server with a plain WebSocket listener and `conf`; its WebSocket port.
fn start(conf: &str) -> (TestServer, u16) {
    ws::start("", conf)
}

/// `CONNECT {connect}` and `PING` on the client port (`connect` made from the INFO): `PONG`
/// or the `-ERR` line.
fn over_tcp(server: &TestServer, connect: impl Fn(&str) -> String) -> String {
    let (mut raw, info) = Raw::connect(server.port);
    raw.send(format!("CONNECT {}\r\nPING\r\n", connect(&info)).as_bytes());
    raw.line()
}

/// The same over WebSocket: `PONG` or the `-ERR` line.
fn over_ws(port: u16, connect: impl Fn(&str) -> String) -> String {
    let (mut c, info) = ws::RawClient::connect(port, "");
    c.frame(
        0x82,
        format!("CONNECT {}\r\nPING\r\n", connect(&info)).as_bytes(),
    )
    .unwrap();
    c.until("\r\n")
}

fn user(name: &str) -> impl Fn(&str) -> String + '_ {
    move |_| serde_json::json!({"verbose": false, "user": name, "pass": "pw"}).to_string()
}

fn anonymous(_: &str) -> String {
    r#"{"verbose":false}"#.to_string()
}

/// Each user's login on (the client port, the WebSocket port).
fn logins(server: &TestServer, ws: u16, names: &[&str]) -> Vec<(String, String)> {
    let mut got = Vec::new();
    for name in names {
        got.push((over_tcp(server, user(name)), over_ws(ws, user(name))));
    }
    got
}

#[test]
fn users_are_limited_to_their_connection_types_on_each_listener() {
    let (server, ws) = start(
        "authorization {\n  users: [\n    \
         {user: ws, password: pw, allowed_connection_types: [\"WEBSOCKET\"]}\n    \
         {user: st, password: pw, allowed_connection_types: \"standard\"}\n    \
         {user: both, password: pw, allowed_connection_types: [\"Standard\", \"websocket\"]}\n    \
         {user: mqtt, password: pw, allowed_connection_types: [\"MQTT\", \"LEAFNODE\", \
         \"MQTT_WS\", \"LEAFNODE_WS\", \"IN_PROCESS\"]}\n    \
         {user: any, password: pw, allowed_connection_types: []}\n  ]\n}\n",
    );
    let got = logins(&server, ws, &["ws", "st", "both", "mqtt", "any"]);
    let want = [
        (VIOLATION, OK),
        (OK, VIOLATION),
        (OK, OK),
        (VIOLATION, VIOLATION),
        (OK, OK),
    ];
    for ((name, got), want) in ["ws", "st", "both", "mqtt", "any"]
        .iter()
        .zip(&got)
        .zip(want)
    {
        assert_eq!((got.0.as_str(), got.1.as_str()), want, "user {name}");
    }
}

#[test]
fn account_users_nkey_users_and_the_no_auth_user_too() {
    let seed = nkeys::KeyPair::new_user();
    let (server, ws) = start(&format!(
        "accounts {{\n  A {{\n    users: [\n      \
         {{user: wa, password: pw, allowed_connection_types: [\"websocket\"]}}\n      \
         {{user: sa, password: pw, allowed_connection_types: [\"STANDARD\"]}}\n      \
         {{nkey: {}, allowed_connection_types: [\"WEBSOCKET\"]}}\n    ]\n  }}\n}}\n\
         no_auth_user: wa\n",
        seed.public_key()
    ));
    let got = logins(&server, ws, &["wa", "sa"]);
    assert_eq!(got[0], (VIOLATION.into(), OK.into()), "account user wa");
    assert_eq!(got[1], (OK.into(), VIOLATION.into()), "account user sa");
    // The nkey user signs the INFO's nonce.
    let signed = |info: &str| {
        let json: serde_json::Value =
            serde_json::from_str(info.trim().trim_start_matches("INFO ")).unwrap();
        let nonce = json["nonce"].as_str().expect("a nonce");
        let sig = seed.sign(nonce.as_bytes()).unwrap();
        use base64::Engine as _;
        serde_json::json!({
            "verbose": false,
            "nkey": seed.public_key(),
            "sig": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig),
        })
        .to_string()
    };
    assert_eq!(over_tcp(&server, signed), VIOLATION, "nkey user over TCP");
    assert_eq!(over_ws(ws, signed), OK, "nkey user over WebSocket");
    // The no_auth_user is `wa`: an anonymous client is `wa` where `wa` may connect.
    assert_eq!(over_tcp(&server, anonymous), VIOLATION);
    assert_eq!(over_ws(ws, anonymous), OK);
}

#[test]
fn unknown_connection_types_stop_the_server() {
    for conf in [
        "authorization { users: [ {user: a, password: b, \
         allowed_connection_types: [\"standard\", \"carrier_pigeon\", \"Foo\"]} ] }\n",
        "accounts { A { users: [ {user: a, password: b, \
         allowed_connection_types: [\"carrier_pigeon\", \"FOO\"]} ] } }\n",
    ] {
        let out = run_config_to_exit(&format!("listen: 127.0.0.1:-1\n{conf}"), &[]);
        assert!(!out.status.success());
        let stderr = out.stderr;
        // nats-server's words: every unknown name, upper case.
        assert!(
            stderr.contains(r#"invalid connection types ["CARRIER_PIGEON" "FOO"]"#),
            "{stderr}"
        );
    }
}
