//! Authentication and authorization against the real binary: tokens, users and passwords
//! (plain and bcrypt), nkeys, `no_auth_user`, the auth timeout, and publish/subscribe
//! permissions (with queue groups, delivery filtering, `allow_responses` and the JetStream
//! API), through async-nats and, where the exact lines matter, raw TCP.
//!
//! Every test states nats-server's behaviour: `JSSERVER_TEST_BINARY=$(which nats-server)
//! cargo test -p jsserver --test auth` runs them against it (the one jsserver-only assertion,
//! the bounded failure log, is skipped there: nats-server logs every failure).

mod common;

use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{info_json, Raw, TestServer};
use futures_util::StreamExt;
use tokio::time::timeout;

/// Upper bound for something that should happen: a wait, not a timing assertion.
const ARRIVES: Duration = Duration::from_secs(10);

const VIOLATION: &str = "-ERR 'Authorization Violation'\r\n";

/// Whether the binary under test is the reference nats-server.
fn against_reference() -> bool {
    std::env::var_os("JSSERVER_TEST_BINARY").is_some()
}

/// Sends `connect` (a CONNECT's JSON) and a PING on a fresh connection; returns what came back
/// up to the PONG (`"PONG\r\n"` when accepted), or everything up to EOF when refused.
fn try_connect(server: &TestServer, connect: &str) -> String {
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(format!("CONNECT {connect}\r\nPING\r\n").as_bytes());
    let line = raw.line();
    if line == "PONG\r\n" {
        return line;
    }
    line + &raw.read_to_eof()
}

/// A raw connection authenticated with `connect` (verbose off), PONG read.
fn raw_as(server: &TestServer, connect: &str) -> Raw {
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(format!("CONNECT {connect}\r\nPING\r\n").as_bytes());
    raw.expect_line("PONG\r\n");
    raw
}

/// `{"verbose":false,"user":USER,"pass":PASS}`.
fn user_connect(user: &str, pass: &str) -> String {
    serde_json::json!({"verbose": false, "user": user, "pass": pass}).to_string()
}

async fn connect_with(
    server: &TestServer,
    opts: async_nats::ConnectOptions,
) -> Result<async_nats::Client, async_nats::ConnectError> {
    timeout(ARRIVES, opts.connect(server.url()))
        .await
        .expect("connect answered in time")
}

/// Connects with `opts`, expecting an authorization violation.
async fn refused_with(server: &TestServer, opts: async_nats::ConnectOptions) {
    let result = timeout(ARRIVES, opts.connect(server.url()))
        .await
        .expect("connect answered in time");
    let err = result.expect_err("connect should be refused");
    assert_eq!(
        err.kind(),
        async_nats::ConnectErrorKind::AuthorizationViolation,
        "{err}"
    );
}

async fn next(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    timeout(ARRIVES, sub.next())
        .await
        .expect("message in time")
        .expect("subscription open")
}

#[tokio::test]
async fn token_right_and_wrong() {
    let server = TestServer::start_with_config("authorization { token: \"s3cret\" }\n", &[]);
    let (_, info) = Raw::connect(server.port);
    let info = info_json(&info);
    assert_eq!(info["auth_required"], true, "{info}");
    assert!(
        info.get("nonce").is_none(),
        "no nonce without nkeys: {info}"
    );

    let nc = connect_with(
        &server,
        async_nats::ConnectOptions::with_token("s3cret".into()),
    )
    .await
    .expect("the right token connects");
    nc.flush().await.unwrap();
    refused_with(
        &server,
        async_nats::ConnectOptions::with_token("wrong".into()),
    )
    .await;

    for connect in [
        r#"{"verbose":false,"auth_token":"wrong"}"#,
        r#"{"verbose":false,"auth_token":""}"#,
        r#"{"verbose":false}"#,
        r#"{"verbose":false,"auth_token":"S3CRET"}"#,
        r#"{"verbose":false,"auth_token":"s3cret "}"#,
        r#"{"verbose":false,"user":"s3cret","pass":"s3cret"}"#,
    ] {
        assert_eq!(try_connect(&server, connect), VIOLATION, "{connect}");
    }
    // Verbose: the +OK comes only for an accepted CONNECT.
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"auth_token\":\"s3cret\"}\r\nPING\r\n");
    assert_eq!(raw.line(), "+OK\r\n");
    raw.expect_line("PONG\r\n");
    assert_eq!(
        try_connect(&server, r#"{"verbose":true,"auth_token":"bad"}"#),
        VIOLATION
    );
}

#[tokio::test]
async fn single_user_and_password_right_and_wrong() {
    let server = TestServer::start(&["--user", "derek", "--pass", "pw"]);
    let nc = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("derek".into(), "pw".into()),
    )
    .await
    .expect("right user and password");
    nc.flush().await.unwrap();
    refused_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("derek".into(), "nope".into()),
    )
    .await;
    assert_eq!(
        try_connect(&server, &user_connect("derek", "pw")),
        "PONG\r\n"
    );
    for connect in [
        r#"{"verbose":false,"user":"derek"}"#,
        r#"{"verbose":false,"pass":"pw"}"#,
        r#"{"verbose":false,"user":"derek","pass":"PW"}"#,
        r#"{"verbose":false,"user":"Derek","pass":"pw"}"#,
        r#"{"verbose":false,"auth_token":"pw"}"#,
        r#"{"verbose":false}"#,
    ] {
        assert_eq!(try_connect(&server, connect), VIOLATION, "{connect}");
    }
}

#[tokio::test]
async fn users_with_plain_and_bcrypt_passwords() {
    let hash = bcrypt::hash("bcrypt-pw", 4).unwrap();
    let conf = format!(
        "authorization {{\n  users: [\n    {{user: alice, password: plain-pw}}\n    \
         {{user: bob, password: \"{hash}\"}}\n  ]\n}}\n"
    );
    let server = TestServer::start_with_config(&conf, &[]);
    assert_eq!(
        try_connect(&server, &user_connect("alice", "plain-pw")),
        "PONG\r\n"
    );
    assert_eq!(
        try_connect(&server, &user_connect("bob", "bcrypt-pw")),
        "PONG\r\n"
    );
    let nc = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("bob".into(), "bcrypt-pw".into()),
    )
    .await
    .expect("bcrypt user through async-nats");
    nc.flush().await.unwrap();
    for connect in [
        user_connect("alice", "bcrypt-pw"),
        user_connect("bob", "plain-pw"),
        // The hash itself is not the password.
        user_connect("bob", &hash),
        user_connect("carol", "plain-pw"),
        r#"{"verbose":false,"user":"alice"}"#.to_string(),
        r#"{"verbose":false,"pass":"plain-pw"}"#.to_string(),
    ] {
        assert_eq!(try_connect(&server, &connect), VIOLATION, "{connect}");
    }
}

#[tokio::test]
async fn nkey_users_sign_the_nonce() {
    let key = nkeys::KeyPair::new_user();
    let other = nkeys::KeyPair::new_user();
    let conf = format!(
        "authorization {{\n  users: [ {{nkey: {}}}, {{user: alice, password: pw}} ]\n}}\n",
        key.public_key()
    );
    let server = TestServer::start_with_config(&conf, &[]);
    let nc = connect_with(
        &server,
        async_nats::ConnectOptions::with_nkey(key.seed().unwrap()),
    )
    .await
    .expect("nkey connects");
    nc.flush().await.unwrap();
    refused_with(
        &server,
        async_nats::ConnectOptions::with_nkey(other.seed().unwrap()),
    )
    .await;

    let b64 = |sig: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig);
    let attempt = |sign_with: &nkeys::KeyPair, claim: &str, sign_other_nonce: bool, sig: bool| {
        let (mut raw, info) = Raw::connect(server.port);
        let info = info_json(&info);
        let nonce = info["nonce"]
            .as_str()
            .expect("a nonce with nkeys")
            .to_owned();
        assert_eq!(nonce.len(), 15, "{info}");
        assert_eq!(info["auth_required"], true);
        let signed = if sign_other_nonce {
            format!("{nonce}x")
        } else {
            nonce
        };
        let mut c = serde_json::json!({"verbose": false, "nkey": claim});
        if sig {
            c["sig"] = b64(&sign_with.sign(signed.as_bytes()).unwrap()).into();
        }
        raw.send(format!("CONNECT {c}\r\nPING\r\n").as_bytes());
        let line = raw.line();
        if line == "PONG\r\n" {
            line
        } else {
            line + &raw.read_to_eof()
        }
    };
    assert_eq!(attempt(&key, &key.public_key(), false, true), "PONG\r\n");
    // Signed by another key, over another nonce, missing, or for an unknown key.
    assert_eq!(attempt(&other, &key.public_key(), false, true), VIOLATION);
    assert_eq!(attempt(&key, &key.public_key(), true, true), VIOLATION);
    assert_eq!(attempt(&key, &key.public_key(), false, false), VIOLATION);
    assert_eq!(attempt(&other, &other.public_key(), false, true), VIOLATION);
    // A signature that is not base64.
    let (mut raw, _) = Raw::connect(server.port);
    let c =
        serde_json::json!({"verbose": false, "nkey": key.public_key(), "sig": "!!not base64!!"});
    raw.send(format!("CONNECT {c}\r\nPING\r\n").as_bytes());
    assert_eq!(raw.line() + &raw.read_to_eof(), VIOLATION);
    // The users of the same block still log in with passwords.
    assert_eq!(
        try_connect(&server, &user_connect("alice", "pw")),
        "PONG\r\n"
    );
}

#[tokio::test]
async fn anything_before_connect_is_a_violation_when_auth_is_required() {
    let server = TestServer::start_with_config("authorization { token: t }\n", &[]);
    for first in [
        &b"PING\r\n"[..],
        b"SUB foo 1\r\n",
        b"PUB foo 1\r\nx\r\n",
        b"XYZ\r\n",
        b"\r\nCONNECT {\"auth_token\":\"t\"}\r\n",
    ] {
        let (mut raw, _) = Raw::connect(server.port);
        raw.send(first);
        assert_eq!(
            raw.line() + &raw.read_to_eof(),
            VIOLATION,
            "{}",
            String::from_utf8_lossy(first)
        );
    }
    // CONNECT in any case is fine.
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"connect {\"verbose\":false,\"auth_token\":\"t\"}\r\nPING\r\n");
    raw.expect_line("PONG\r\n");
}

#[tokio::test]
async fn no_connect_within_the_timeout() {
    let server =
        TestServer::start_with_config("authorization {\n  token: t\n  timeout: 0.5\n}\n", &[]);
    let (mut raw, _) = Raw::connect(server.port);
    let start = Instant::now();
    assert_eq!(raw.line(), "-ERR 'Authentication Timeout'\r\n");
    assert_eq!(raw.read_to_eof(), "");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    // A partial CONNECT does not stop the timer either.
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"auth_t");
    assert_eq!(raw.line(), "-ERR 'Authentication Timeout'\r\n");
    // A CONNECT in time stops it.
    let mut raw = raw_as(&server, r#"{"verbose":false,"auth_token":"t"}"#);
    std::thread::sleep(Duration::from_millis(800));
    raw.send(b"PING\r\n");
    raw.expect_line("PONG\r\n");
}

const PERMS_CONF: &str = r#"
authorization {
  default_permissions: { publish: "default.>", subscribe: "default.>" }
  users: [
    { user: admin, password: admin, permissions: {} }
    { user: alice, password: pw, permissions: {
        publish: { allow: ["foo.>", "_INBOX.>", "$JS.API.>"], deny: ["foo.secret", "$JS.API.STREAM.DELETE.>"] }
        subscribe: { allow: ["foo.>", "_INBOX.>", "q.* g1"], deny: ["foo.hidden", "foo.hidden2 g1"] }
    } }
    { user: bob, password: pw, permissions: { publish: "none.>", subscribe: "req", allow_responses: true } }
    { user: carol, password: pw, permissions: { subscribe: "req", allow_responses: { max: 2 } } }
    { user: dave, password: pw }
  ]
}
"#;

#[tokio::test]
async fn publish_permissions_allow_and_deny() {
    let server = TestServer::start_with_config(PERMS_CONF, &[]);
    let mut admin = raw_as(&server, &user_connect("admin", "admin"));
    admin.send(b"SUB > 1\r\nPING\r\n");
    admin.expect_line("PONG\r\n");
    // Verbose, so the +OK of each allowed PUB shows; denied ones get only the -ERR, and the
    // connection stays open.
    let (mut alice, _) = Raw::connect(server.port);
    alice.send(b"CONNECT {\"verbose\":true,\"user\":\"alice\",\"pass\":\"pw\"}\r\n");
    assert_eq!(alice.line(), "+OK\r\n");
    alice.send(b"PUB foo.secret 2\r\nhi\r\nPUB bar 2\r\nhi\r\nPUB foo.ok 2\r\nhi\r\nPING\r\n");
    assert_eq!(
        alice.line(),
        "-ERR 'Permissions Violation for Publish to \"foo.secret\"'\r\n"
    );
    assert_eq!(
        alice.line(),
        "-ERR 'Permissions Violation for Publish to \"bar\"'\r\n"
    );
    assert_eq!(alice.line(), "+OK\r\n");
    alice.expect_line("PONG\r\n");
    // Only the allowed message was routed.
    admin.expect_line("MSG foo.ok 1 2\r\n");
    assert_eq!(admin.exact(4), b"hi\r\n");
    admin.send(b"PING\r\n");
    admin.expect_line("PONG\r\n");

    // default_permissions apply to a user without permissions of its own.
    let mut dave = raw_as(&server, &user_connect("dave", "pw"));
    dave.send(b"PUB default.x 0\r\n\r\nPUB foo.ok 0\r\n\r\nPING\r\n");
    assert_eq!(
        dave.line(),
        "-ERR 'Permissions Violation for Publish to \"foo.ok\"'\r\n"
    );
    dave.expect_line("PONG\r\n");
    admin.expect_line("MSG default.x 1 0\r\n");

    // Through async-nats: the allowed publish arrives, the denied one does not.
    let nc = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("alice".into(), "pw".into()),
    )
    .await
    .unwrap();
    let mut sub = nc.subscribe("foo.>").await.unwrap();
    nc.publish("foo.secret", "no".into()).await.unwrap();
    nc.publish("foo.open", "yes".into()).await.unwrap();
    nc.flush().await.unwrap();
    let m = next(&mut sub).await;
    assert_eq!(m.subject.as_str(), "foo.open");
}

#[tokio::test]
async fn subscribe_permissions_with_queue_groups() {
    let server = TestServer::start_with_config(PERMS_CONF, &[]);
    let (mut alice, _) = Raw::connect(server.port);
    alice.send(b"CONNECT {\"verbose\":true,\"user\":\"alice\",\"pass\":\"pw\"}\r\n");
    assert_eq!(alice.line(), "+OK\r\n");
    alice.send(
        b"SUB bar 1\r\nSUB q.x 2\r\nSUB q.x g1 3\r\nSUB q.x g2 4\r\nSUB foo.hidden 5\r\n\
          SUB foo.* 6\r\nSUB foo.hidden2 g1 7\r\nSUB foo.hidden2 8\r\nSUB foo.a _sys_ 9\r\nPING\r\n",
    );
    let want = [
        "-ERR 'Permissions Violation for Subscription to \"bar\"'\r\n",
        "-ERR 'Permissions Violation for Subscription to \"q.x\"'\r\n",
        "+OK\r\n",
        "-ERR 'Permissions Violation for Subscription to \"q.x\" using queue \"g2\"'\r\n",
        "-ERR 'Permissions Violation for Subscription to \"foo.hidden\"'\r\n",
        "+OK\r\n",
        "-ERR 'Permissions Violation for Subscription to \"foo.hidden2\" using queue \"g1\"'\r\n",
        "+OK\r\n",
        "-ERR 'Permissions Violation for Subscription to \"foo.a\" using queue \"_sys_\"'\r\n",
    ];
    for line in want {
        assert_eq!(alice.line(), line);
    }
    alice.expect_line("PONG\r\n");

    // A wildcard subscription does not get what the deny list covers.
    let mut admin = raw_as(&server, &user_connect("admin", "admin"));
    admin.send(b"PUB foo.hidden 1\r\nx\r\nPUB foo.visible 1\r\ny\r\nPUB q.x 1\r\nz\r\nPING\r\n");
    admin.expect_line("PONG\r\n");
    alice.send(b"PING\r\n");
    // q.x g1 (sid 3) gets q.x; foo.* (sid 6) gets foo.visible only.
    let mut got = Vec::new();
    loop {
        let line = alice.line();
        if line == "PONG\r\n" {
            break;
        }
        if line.starts_with("MSG ") {
            got.push(line);
            alice.exact(3);
        } else {
            assert_eq!(line, "+OK\r\n");
        }
    }
    got.sort();
    assert_eq!(got, ["MSG foo.visible 6 1\r\n", "MSG q.x 3 1\r\n"]);
}

#[tokio::test]
async fn request_reply_with_allow_responses() {
    let server = TestServer::start_with_config(PERMS_CONF, &[]);
    // bob may publish nothing but "none.>", and replies to the requests he receives, once.
    let mut bob = raw_as(&server, &user_connect("bob", "pw"));
    bob.send(b"SUB req 1\r\nPING\r\n");
    bob.expect_line("PONG\r\n");
    let mut admin = raw_as(&server, &user_connect("admin", "admin"));
    admin.send(b"SUB reply.> 1\r\nPUB req reply.1 1\r\nq\r\nPING\r\n");
    admin.expect_line("PONG\r\n");
    bob.expect_line("MSG req 1 reply.1 1\r\n");
    assert_eq!(bob.exact(3), b"q\r\n");
    bob.send(b"PUB reply.1 1\r\na\r\nPUB reply.1 1\r\nb\r\nPUB reply.2 1\r\nc\r\nPING\r\n");
    assert_eq!(
        bob.line(),
        "-ERR 'Permissions Violation for Publish to \"reply.1\"'\r\n",
        "a second reply"
    );
    assert_eq!(
        bob.line(),
        "-ERR 'Permissions Violation for Publish to \"reply.2\"'\r\n",
        "a subject nobody asked on"
    );
    bob.expect_line("PONG\r\n");
    admin.send(b"PING\r\n");
    admin.expect_line("MSG reply.1 1 1\r\n");
    assert_eq!(admin.exact(3), b"a\r\n");
    admin.expect_line("PONG\r\n");

    // carol: two replies per request.
    let mut carol = raw_as(&server, &user_connect("carol", "pw"));
    carol.send(b"SUB req 1\r\nPING\r\n");
    carol.expect_line("PONG\r\n");
    admin.send(b"PUB req reply.2 1\r\nq\r\nPING\r\n");
    admin.expect_line("PONG\r\n");
    carol.expect_line("MSG req 1 reply.2 1\r\n");
    carol.exact(3);
    carol.send(b"PUB reply.2 1\r\na\r\nPUB reply.2 1\r\nb\r\nPUB reply.2 1\r\nc\r\nPING\r\n");
    assert_eq!(
        carol.line(),
        "-ERR 'Permissions Violation for Publish to \"reply.2\"'\r\n",
        "a third reply"
    );
    carol.expect_line("PONG\r\n");

    // Through async-nats: a request to bob's service gets its answer.
    let service = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("bob".into(), "pw".into()),
    )
    .await
    .unwrap();
    let mut requests = service.subscribe("req").await.unwrap();
    service.flush().await.unwrap();
    let client = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("admin".into(), "admin".into()),
    )
    .await
    .unwrap();
    let answer = tokio::spawn(async move { client.request("req", "ping".into()).await });
    let req = next(&mut requests).await;
    service
        .publish(req.reply.unwrap(), "pong".into())
        .await
        .unwrap();
    service.flush().await.unwrap();
    let answer = timeout(ARRIVES, answer).await.unwrap().unwrap().unwrap();
    assert_eq!(&answer.payload[..], b"pong");
}

#[tokio::test]
async fn a_user_without_the_delete_permission_cannot_delete_a_stream() {
    let server = TestServer::start_with_config(PERMS_CONF, &[]);
    let admin = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("admin".into(), "admin".into()),
    )
    .await
    .unwrap();
    let js = async_nats::jetstream::new(admin);
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    })
    .await
    .expect("admin creates the stream");

    // alice may use the rest of the API (stream info answers) but not STREAM.DELETE.
    let mut alice = raw_as(&server, &user_connect("alice", "pw"));
    alice.send(
        b"SUB _INBOX.a 1\r\nPUB $JS.API.STREAM.INFO.ORDERS _INBOX.a 0\r\n\r\n\
          PUB $JS.API.STREAM.DELETE.ORDERS _INBOX.a 0\r\n\r\nPING\r\n",
    );
    let mut lines = Vec::new();
    let mut info_answers = 0;
    loop {
        let line = alice.line();
        if line == "PONG\r\n" {
            break;
        }
        if let Some(rest) = line.strip_prefix("MSG _INBOX.a 1 ") {
            let n: usize = rest.trim().parse().unwrap();
            let body = alice.exact(n + 2);
            assert!(
                String::from_utf8_lossy(&body)
                    .contains("io.nats.jetstream.api.v1.stream_info_response"),
                "{}",
                String::from_utf8_lossy(&body)
            );
            info_answers += 1;
        } else {
            lines.push(line);
        }
    }
    assert_eq!(
        lines,
        ["-ERR 'Permissions Violation for Publish to \"$JS.API.STREAM.DELETE.ORDERS\"'\r\n"]
    );
    // The info answer may come after the PONG (the API answers on its own thread).
    if info_answers == 0 {
        let line = alice.line();
        assert!(line.starts_with("MSG _INBOX.a 1 "), "{line:?}");
    }

    // Through async-nats too: the delete does not happen.
    let nc = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("alice".into(), "pw".into())
            .request_timeout(Some(Duration::from_millis(500))),
    )
    .await
    .unwrap();
    let alice_js = async_nats::jetstream::new(nc);
    assert!(alice_js.delete_stream("ORDERS").await.is_err());
    let mut stream = js
        .get_stream("ORDERS")
        .await
        .expect("the stream is still there");
    assert_eq!(stream.info().await.unwrap().config.name, "ORDERS");
    // And a user who may not use the API at all gets nowhere.
    let mut dave = raw_as(&server, &user_connect("dave", "pw"));
    dave.send(b"PUB $JS.API.STREAM.DELETE.ORDERS _INBOX.d 0\r\n\r\nPING\r\n");
    assert_eq!(
        dave.line(),
        "-ERR 'Permissions Violation for Publish to \"$JS.API.STREAM.DELETE.ORDERS\"'\r\n"
    );
    dave.expect_line("PONG\r\n");
    js.get_stream("ORDERS").await.expect("still there");
}

#[tokio::test]
async fn no_auth_user_takes_clients_without_credentials() {
    let conf = "authorization {\n  users: [\n    {user: admin, password: admin}\n    \
                {user: guest, password: guest, permissions: { publish: \"public.>\", subscribe: \"public.>\" }}\n  ]\n}\n\
                no_auth_user: guest\n";
    let server = TestServer::start_with_config(conf, &[]);
    let (_, info) = Raw::connect(server.port);
    let info = info_json(&info);
    assert!(
        info.get("auth_required").is_none(),
        "a no_auth_user means no auth is required: {info}"
    );
    // No credentials: the guest, with the guest's permissions.
    let mut guest = raw_as(&server, r#"{"verbose":false}"#);
    guest.send(b"SUB public.> 1\r\nPUB public.a 1\r\nx\r\nPUB private 1\r\ny\r\nPING\r\n");
    guest.expect_line("MSG public.a 1 1\r\n");
    guest.exact(3);
    assert_eq!(
        guest.line(),
        "-ERR 'Permissions Violation for Publish to \"private\"'\r\n"
    );
    guest.expect_line("PONG\r\n");
    // Even without a CONNECT (telnet): the guest.
    let (mut telnet, _) = Raw::connect(server.port);
    telnet.send(b"PING\r\nPUB private 1\r\ny\r\n");
    telnet.expect_line("PONG\r\n");
    assert_eq!(
        telnet.line(),
        "-ERR 'Permissions Violation for Publish to \"private\"'\r\n"
    );
    // Credentials given are checked, not replaced by the guest's.
    assert_eq!(
        try_connect(&server, &user_connect("admin", "wrong")),
        VIOLATION
    );
    assert_eq!(
        try_connect(&server, &user_connect("admin", "admin")),
        "PONG\r\n"
    );
    // async-nats with no credentials works too.
    let nc = connect_with(&server, async_nats::ConnectOptions::new())
        .await
        .unwrap();
    let mut sub = nc.subscribe("public.>").await.unwrap();
    nc.publish("public.b", "hi".into()).await.unwrap();
    assert_eq!(next(&mut sub).await.subject.as_str(), "public.b");
}

#[tokio::test]
async fn garbage_and_oversized_connects() {
    let server = TestServer::start_with_config("authorization { token: t }\n", &[]);
    // A wrongly typed field: closed without -ERR, as any malformed CONNECT.
    for connect in [
        r#"{"auth_token":5}"#,
        r#"{"verbose":false,"auth_token":"t","sig":123}"#,
        r#"{"user":["a"],"pass":{"x":1}}"#,
        "not json",
    ] {
        let (mut raw, _) = Raw::connect(server.port);
        raw.send(format!("CONNECT {connect}\r\n").as_bytes());
        assert_eq!(raw.read_to_eof(), "", "{connect}");
    }
    // Odd but well-formed: a violation.
    for connect in [
        r#"{"auth_token":"t\u0000"}"#,
        r#"{"auth_token":"\u00e9\u00e9"}"#,
        r#"{"nkey":"UNOTAKEY","sig":"AAAA"}"#,
        r#"{"user":"","pass":"","auth_token":""}"#,
        "null",
    ] {
        assert_eq!(try_connect(&server, connect), VIOLATION, "{connect}");
    }
    // Longer than max_control_line: that error, then the close.
    let (mut raw, _) = Raw::connect(server.port);
    let big = format!("CONNECT {{\"auth_token\":\"{}\"}}\r\n", "x".repeat(10_000));
    raw.send(&big.as_bytes()[..6000]);
    assert_eq!(raw.line(), "-ERR 'maximum control line exceeded'\r\n");
    // The server is fine.
    assert_eq!(
        try_connect(&server, r#"{"verbose":false,"auth_token":"t"}"#),
        "PONG\r\n"
    );
}

#[tokio::test]
async fn a_thousand_failed_logins_leave_the_server_responsive() {
    let server = TestServer::start_with_config(
        "authorization { users: [ {user: a, password: right} ] }\n",
        &[],
    );
    let good = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("a".into(), "right".into()),
    )
    .await
    .unwrap();
    let mut sub = good.subscribe("still.here").await.unwrap();
    good.flush().await.unwrap();
    let bad = tokio::task::spawn_blocking({
        let port = server.port;
        move || {
            for i in 0..1000 {
                let (mut raw, _) = Raw::connect(port);
                raw.send(
                    format!(
                        "CONNECT {{\"verbose\":false,\"user\":\"a\",\"pass\":\"wrong{i}\"}}\r\n"
                    )
                    .as_bytes(),
                );
                assert_eq!(raw.line(), VIOLATION);
            }
        }
    });
    // Meanwhile the good client is served.
    for i in 0..20 {
        good.publish("still.here", format!("{i}").into())
            .await
            .unwrap();
        assert_eq!(&next(&mut sub).await.payload[..], format!("{i}").as_bytes());
    }
    timeout(Duration::from_secs(120), bad)
        .await
        .expect("1000 failed logins in time")
        .unwrap();
    let fresh = connect_with(
        &server,
        async_nats::ConnectOptions::with_user_and_password("a".into(), "right".into()),
    )
    .await
    .expect("a good login after the bad ones");
    fresh.flush().await.unwrap();
    good.publish("still.here", "end".into()).await.unwrap();
    assert_eq!(&next(&mut sub).await.payload[..], b"end");

    let log = server.log_text();
    assert!(!log.contains("wrong1"), "a password in the log");
    if !against_reference() {
        // Bounded: at most 20 failure lines a second (nats-server logs all 1000).
        let failures = log
            .lines()
            .filter(|l| l.contains("authentication error"))
            .count();
        assert!(failures < 1000, "{failures} failure lines");
        assert!(log.contains(r#"authentication error - User "a""#), "{log}");
    }
}

#[tokio::test]
async fn connection_types_proxies_and_wildcard_subscriptions() {
    let conf = "authorization {\n  users: [\n    \
                {user: a, password: pw, permissions: { subscribe: \"foo.*\" }}\n    \
                {user: ws, password: pw, allowed_connection_types: [\"WEBSOCKET\"]}\n    \
                {user: st, password: pw, allowed_connection_types: [\"standard\"]}\n    \
                {user: px, password: pw, proxy_required: true}\n  ]\n}\n";
    let server = TestServer::start_with_config(conf, &[]);
    // Only websocket clients may be `ws`; no proxy is trusted, so `px` never logs in.
    assert_eq!(try_connect(&server, &user_connect("ws", "pw")), VIOLATION);
    assert_eq!(try_connect(&server, &user_connect("st", "pw")), "PONG\r\n");
    assert_eq!(try_connect(&server, &user_connect("px", "pw")), VIOLATION);
    // `foo.*` allows `foo.>` too (its `>` is one token for `*`), as nats-server's sublist.
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(
        b"CONNECT {\"verbose\":true,\"user\":\"a\",\"pass\":\"pw\"}\r\n\
          SUB foo.> 1\r\nSUB foo.* 2\r\nSUB foo.a.b 3\r\nSUB * 4\r\nPING\r\n",
    );
    for line in [
        "+OK\r\n",
        "+OK\r\n",
        "+OK\r\n",
        "-ERR 'Permissions Violation for Subscription to \"foo.a.b\"'\r\n",
        "-ERR 'Permissions Violation for Subscription to \"*\"'\r\n",
    ] {
        assert_eq!(raw.line(), line);
    }
    raw.expect_line("PONG\r\n");
}

#[tokio::test]
async fn a_second_connect_authenticates_again() {
    let server = TestServer::start_with_config(PERMS_CONF, &[]);
    let mut raw = raw_as(&server, &user_connect("alice", "pw"));
    raw.send(b"PUB foo.x 0\r\n\r\nPING\r\n");
    raw.expect_line("PONG\r\n");
    // Now bob, with bob's permissions.
    raw.send(
        format!(
            "CONNECT {}\r\nPUB foo.x 0\r\n\r\nPUB none.x 0\r\n\r\nPING\r\n",
            user_connect("bob", "pw")
        )
        .as_bytes(),
    );
    assert_eq!(
        raw.line(),
        "-ERR 'Permissions Violation for Publish to \"foo.x\"'\r\n"
    );
    raw.expect_line("PONG\r\n");
    // A wrong second CONNECT closes the connection.
    raw.send(format!("CONNECT {}\r\n", user_connect("bob", "nope")).as_bytes());
    assert_eq!(raw.line() + &raw.read_to_eof(), VIOLATION);
}

#[tokio::test]
async fn allow_responses_expire() {
    let conf =
        "authorization {\n  users: [\n    {user: admin, password: admin, permissions: {}}\n    \
                {user: svc, password: pw, permissions: { subscribe: \"req\", \
                allow_responses: { max: 5, expires: \"300ms\" } }}\n  ]\n}\n";
    let server = TestServer::start_with_config(conf, &[]);
    let mut svc = raw_as(&server, &user_connect("svc", "pw"));
    svc.send(b"SUB req 1\r\nPING\r\n");
    svc.expect_line("PONG\r\n");
    let mut admin = raw_as(&server, &user_connect("admin", "admin"));
    admin.send(b"PUB req r.1 0\r\n\r\nPING\r\n");
    admin.expect_line("PONG\r\n");
    svc.expect_line("MSG req 1 r.1 0\r\n");
    svc.exact(2);
    svc.send(b"PUB r.1 0\r\n\r\nPING\r\n");
    svc.expect_line("PONG\r\n");
    std::thread::sleep(Duration::from_millis(600));
    svc.send(b"PUB r.1 0\r\n\r\nPING\r\n");
    assert_eq!(
        svc.line(),
        "-ERR 'Permissions Violation for Publish to \"r.1\"'\r\n",
        "a reply after expires"
    );
    svc.expect_line("PONG\r\n");
}

#[tokio::test]
async fn a_bcrypt_token() {
    let hash = bcrypt::hash("tok-en", 4).unwrap();
    let server =
        TestServer::start_with_config(&format!("authorization {{ token: \"{hash}\" }}\n"), &[]);
    assert_eq!(
        try_connect(&server, r#"{"verbose":false,"auth_token":"tok-en"}"#),
        "PONG\r\n"
    );
    let hashed = serde_json::json!({"verbose": false, "auth_token": hash}).to_string();
    assert_eq!(try_connect(&server, &hashed), VIOLATION);
    assert_eq!(
        try_connect(&server, r#"{"verbose":false,"auth_token":"tok-en2"}"#),
        VIOLATION
    );
}

#[tokio::test]
async fn a_no_auth_user_with_a_bcrypt_password_takes_nobody() {
    // As nats-server: the no_auth_user's stored password stands in for the client's, and a
    // bcrypt hash does not verify against itself.
    let hash = bcrypt::hash("pw", 4).unwrap();
    let conf = format!(
        "authorization {{ users: [ {{user: g, password: \"{hash}\"}} ] }}\nno_auth_user: g\n"
    );
    let server = TestServer::start_with_config(&conf, &[]);
    assert_eq!(try_connect(&server, r#"{"verbose":false}"#), VIOLATION);
    assert_eq!(try_connect(&server, &user_connect("g", "pw")), "PONG\r\n");
}
