//! Accounts against the real binary: each account its own subject space and its own
//! JetStream (streams invisible and untouchable from another account, stored apart and
//! recovered apart), an account without JetStream refused with 10039, and per-account
//! JetStream limits (streams, consumers, reserved and used storage) with nats-server's codes,
//! through async-nats.
//!
//! Every test states nats-server's behaviour: `JSSERVER_TEST_BINARY=$(which nats-server)
//! cargo test -p jsserver --test accounts` runs them against it (the start-up refusal of
//! settings not supported yet is jsserver's own and is skipped there).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::TestServer;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::time::timeout;

/// Upper bound for something that should happen: a wait, not a timing assertion.
const ARRIVES: Duration = Duration::from_secs(10);
/// How long to listen for something that must not arrive.
const QUIET: Duration = Duration::from_millis(300);

/// Whether the binary under test is the reference nats-server.
fn against_reference() -> bool {
    std::env::var_os("JSSERVER_TEST_BINARY").is_some()
}

/// Accounts A (JetStream with limits), B (JetStream, no limits) and C (no JetStream).
const CONF: &str = "accounts {
  A: {
    users: [ { user: a, password: pa } ]
    jetstream: { max_streams: 2, max_consumers: 2, max_file: 100000, max_mem: 50000 }
  }
  B: { users: [ { user: b, password: pb } ], jetstream: enabled }
  C: { users: [ { user: c, password: pc } ] }
}
";

async fn login(server: &TestServer, user: &str, pass: &str) -> async_nats::Client {
    let opts = async_nats::ConnectOptions::with_user_and_password(user.into(), pass.into());
    timeout(ARRIVES, opts.connect(server.url()))
        .await
        .expect("connect answered in time")
        .unwrap_or_else(|e| panic!("login as {user}: {e}"))
}

/// Returns once the server has applied everything `nc` sent before (its SUBs): a message to
/// the client's own inbox comes back. (async-nats's `flush` only writes the buffer.)
async fn synced(nc: &async_nats::Client) {
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.unwrap();
    nc.publish(inbox, Bytes::new()).await.unwrap();
    timeout(ARRIVES, sub.next())
        .await
        .expect("own message back in time")
        .expect("subscription open");
}

/// A JetStream API request; the JSON answer.
async fn api(nc: &async_nats::Client, subject: &str, body: Value) -> Value {
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    let msg = timeout(ARRIVES, nc.request(subject.to_owned(), body))
        .await
        .expect("answered in time")
        .unwrap_or_else(|e| panic!("{subject}: {e}"));
    serde_json::from_slice(&msg.payload).expect("JSON answer")
}

fn err_code(v: &Value) -> Option<u64> {
    v["error"]["err_code"].as_u64()
}

async fn create_stream(nc: &async_nats::Client, config: Value) -> Value {
    let name = config["name"].as_str().unwrap().to_owned();
    api(nc, &format!("$JS.API.STREAM.CREATE.{name}"), config).await
}

/// Publishes and waits for the PubAck's JSON.
async fn publish(nc: &async_nats::Client, subject: &str, payload: Vec<u8>) -> Value {
    let msg = timeout(
        ARRIVES,
        nc.request(subject.to_owned(), Bytes::from(payload)),
    )
    .await
    .expect("PubAck in time")
    .expect("PubAck");
    serde_json::from_slice(&msg.payload).expect("PubAck JSON")
}

#[tokio::test]
async fn messages_stay_in_their_account() {
    let server = TestServer::start_with_config(CONF, &[]);
    let a = login(&server, "a", "pa").await;
    let b = login(&server, "b", "pb").await;
    let mut a_sub = a.subscribe("news.>").await.unwrap();
    let mut b_sub = b.subscribe("news.>").await.unwrap();
    synced(&b).await;
    a.publish("news.today", "from a".into()).await.unwrap();
    synced(&a).await;
    let got = timeout(ARRIVES, a_sub.next())
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(&got.payload[..], b"from a");
    assert!(
        timeout(QUIET, b_sub.next()).await.is_err(),
        "a message crossed into another account"
    );
    // A service of account A has no responders seen from account B.
    let mut service = a.subscribe("svc.echo").await.unwrap();
    synced(&a).await;
    let err = b
        .request("svc.echo", "ping".into())
        .await
        .expect_err("no responder in account B");
    assert_eq!(
        err.kind(),
        async_nats::RequestErrorKind::NoResponders,
        "{err}"
    );
    assert!(timeout(QUIET, service.next()).await.is_err());
    // ... and B's own subscriber still gets B's messages.
    b.publish("news.b", "from b".into()).await.unwrap();
    let got = timeout(ARRIVES, b_sub.next())
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(&got.payload[..], b"from b");
}

#[tokio::test]
async fn each_account_has_its_own_jetstream() {
    let server = TestServer::start_with_config(CONF, &[]);
    let a = login(&server, "a", "pa").await;
    let b = login(&server, "b", "pb").await;
    let made = create_stream(&a, json!({"name": "ORDERS", "subjects": ["orders.>"]})).await;
    assert_eq!(made["did_create"], json!(true), "{made}");
    let ack = publish(&a, "orders.1", b"order one".to_vec()).await;
    assert_eq!(ack, json!({"stream": "ORDERS", "seq": 1}));

    // Invisible and untouchable from B.
    let names = api(&b, "$JS.API.STREAM.NAMES", Value::Null).await;
    assert_eq!(names["total"], json!(0), "{names}");
    let info = api(&b, "$JS.API.STREAM.INFO.ORDERS", Value::Null).await;
    assert_eq!(err_code(&info), Some(10059), "{info}");
    let del = api(&b, "$JS.API.STREAM.DELETE.ORDERS", Value::Null).await;
    assert_eq!(err_code(&del), Some(10059), "{del}");
    let purge = api(&b, "$JS.API.STREAM.PURGE.ORDERS", Value::Null).await;
    assert_eq!(err_code(&purge), Some(10059), "{purge}");
    // B's publish on the same subject is not stored in A's stream (B has no stream there).
    let err = b
        .request("orders.2", "b's order".into())
        .await
        .expect_err("no stream in account B");
    assert_eq!(
        err.kind(),
        async_nats::RequestErrorKind::NoResponders,
        "{err}"
    );

    // B may have a stream of the same name and subjects: its own.
    let made = create_stream(&b, json!({"name": "ORDERS", "subjects": ["orders.>"]})).await;
    assert_eq!(made["did_create"], json!(true), "{made}");
    let ack = publish(&b, "orders.2", b"b's order".to_vec()).await;
    assert_eq!(ack, json!({"stream": "ORDERS", "seq": 1}));
    let a_info = api(&a, "$JS.API.STREAM.INFO.ORDERS", Value::Null).await;
    assert_eq!(a_info["state"]["messages"], json!(1), "{a_info}");
    assert_eq!(a_info["state"]["last_seq"], json!(1), "{a_info}");
    let got = api(&a, "$JS.API.STREAM.MSG.GET.ORDERS", json!({"seq": 1})).await;
    assert_eq!(got["message"]["subject"], json!("orders.1"), "{got}");

    // Account info counts each account's own streams.
    let a_acct = api(&a, "$JS.API.INFO", Value::Null).await;
    let b_acct = api(&b, "$JS.API.INFO", Value::Null).await;
    assert_eq!(
        (a_acct["streams"].clone(), b_acct["streams"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(b_acct["limits"]["max_streams"], json!(-1), "{b_acct}");

    // Both survive a restart (after kill -9), each in its own account.
    drop((a, b));
    let conf = server.config_path().display().to_string();
    let store = server.dir.path().join("store").display().to_string();
    let server = TestServer::restart(server, &["-c", &conf, "-sd", &store]);
    let a = login(&server, "a", "pa").await;
    let b = login(&server, "b", "pb").await;
    for (nc, subject) in [(&a, "orders.1"), (&b, "orders.2")] {
        let got = api(nc, "$JS.API.STREAM.MSG.GET.ORDERS", json!({"seq": 1})).await;
        assert_eq!(got["message"]["subject"], json!(subject), "{got}");
        let info = api(nc, "$JS.API.STREAM.INFO.ORDERS", Value::Null).await;
        assert_eq!(info["state"]["messages"], json!(1), "{info}");
    }
}

#[tokio::test]
async fn an_account_without_jetstream_gets_10039() {
    let server = TestServer::start_with_config(CONF, &[]);
    let c = login(&server, "c", "pc").await;
    let info = timeout(ARRIVES, c.request("$JS.API.INFO", Bytes::new()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        std::str::from_utf8(&info.payload).unwrap(),
        r#"{"type":"io.nats.jetstream.api.v1.account_info_response","error":{"code":503,"err_code":10039,"description":"JetStream not enabled for account"}}"#
    );
    let made = create_stream(&c, json!({"name": "X", "subjects": ["x"]})).await;
    assert_eq!(
        made["type"],
        json!("io.nats.jetstream.api.v1.stream_create_response")
    );
    assert_eq!(err_code(&made), Some(10039), "{made}");
    let names = api(&c, "$JS.API.STREAM.NAMES", Value::Null).await;
    assert_eq!(err_code(&names), Some(10039), "{names}");
    assert_eq!(names["streams"], Value::Null, "{names}");
    let list = api(&c, "$JS.API.CONSUMER.LIST.X", Value::Null).await;
    assert_eq!(err_code(&list), Some(10039), "{list}");
    assert_eq!(list["consumers"], json!([]), "{list}");
    // Nothing was created: a publish has no stream to answer it.
    let err = c.request("x", "m".into()).await.expect_err("no stream");
    assert_eq!(
        err.kind(),
        async_nats::RequestErrorKind::NoResponders,
        "{err}"
    );
    // The async-nats JetStream context sees the same error.
    let js = async_nats::jetstream::new(c);
    let err = js.query_account().await.expect_err("not enabled");
    assert!(err.to_string().contains("10039"), "{err}");
}

#[tokio::test]
async fn account_limits_are_enforced_with_nats_servers_codes() {
    let server = TestServer::start_with_config(CONF, &[]);
    let a = login(&server, "a", "pa").await;
    // A stream without max_bytes reserves nothing; one whose max_bytes is over the account's
    // storage (or memory) cannot be created.
    let s1 = create_stream(&a, json!({"name": "S1", "subjects": ["s1"]})).await;
    assert_eq!(s1["did_create"], json!(true), "{s1}");
    let big = create_stream(
        &a,
        json!({"name": "S2", "subjects": ["s2"], "max_bytes": 200000}),
    )
    .await;
    assert_eq!(err_code(&big), Some(10047), "{big}");
    assert_eq!(
        big["error"]["description"],
        json!("insufficient storage resources available")
    );
    let big_mem = create_stream(
        &a,
        json!({"name": "S2", "subjects": ["s2"], "max_bytes": 60000, "storage": "memory"}),
    )
    .await;
    assert_eq!(err_code(&big_mem), Some(10028), "{big_mem}");
    assert_eq!(
        big_mem["error"]["description"],
        json!("insufficient memory resources available")
    );
    let s2 = create_stream(
        &a,
        json!({"name": "S2", "subjects": ["s2"], "max_bytes": 1000}),
    )
    .await;
    assert_eq!(s2["did_create"], json!(true), "{s2}");
    // max_streams: 2.
    let s3 = create_stream(&a, json!({"name": "S3", "subjects": ["s3"]})).await;
    assert_eq!(err_code(&s3), Some(10027), "{s3}");
    assert_eq!(
        s3["error"]["description"],
        json!("maximum number of streams reached")
    );
    // max_consumers: 2 on each stream (as nats-server applies the account's limit).
    for (i, stream) in ["S1", "S1", "S1", "S2"].into_iter().enumerate() {
        let made = api(
            &a,
            &format!("$JS.API.CONSUMER.CREATE.{stream}.c{i}"),
            json!({"stream_name": stream, "config": {"durable_name": format!("c{i}"), "ack_policy": "explicit"}}),
        )
        .await;
        if i != 2 {
            assert_eq!(made["name"], json!(format!("c{i}")), "{made}");
        } else {
            assert_eq!(err_code(&made), Some(10026), "{made}");
            assert_eq!(
                made["error"]["description"],
                json!("maximum consumers limit reached")
            );
        }
    }
    // Storage: 100000 bytes for the account, 1000 of them reserved by S2. Three 30 KB
    // messages fit, the fourth does not, and is refused, not stored.
    let payload = vec![b'x'; 30000];
    for seq in 1..=3 {
        let ack = publish(&a, "s1", payload.clone()).await;
        assert_eq!(ack, json!({"stream": "S1", "seq": seq}));
    }
    let refused = publish(&a, "s1", payload.clone()).await;
    assert_eq!(err_code(&refused), Some(10002), "{refused}");
    assert_eq!(
        refused["error"]["description"],
        json!("resource limits exceeded for account"),
        "{refused}"
    );
    let info = api(&a, "$JS.API.STREAM.INFO.S1", Value::Null).await;
    assert_eq!(info["state"]["messages"], json!(3), "{info}");
    let acct = api(&a, "$JS.API.INFO", Value::Null).await;
    assert_eq!(acct["streams"], json!(2), "{acct}");
    assert_eq!(acct["consumers"], json!(3), "{acct}");
    assert_eq!(acct["reserved_storage"], json!(1000), "{acct}");
    assert_eq!(acct["storage"], info["state"]["bytes"], "{acct}");
    assert_eq!(
        acct["limits"],
        json!({"max_memory": 50000, "max_storage": 100000, "max_streams": 2, "max_consumers": 2,
               "max_ack_pending": -1, "memory_max_stream_bytes": -1,
               "storage_max_stream_bytes": -1, "max_bytes_required": false}),
        "{acct}"
    );
    // Deleting a stream frees its place and its reservation.
    let del = api(&a, "$JS.API.STREAM.DELETE.S2", Value::Null).await;
    assert_eq!(del["success"], json!(true), "{del}");
    let s3 = create_stream(
        &a,
        json!({"name": "S3", "subjects": ["s3"], "max_bytes": 5000}),
    )
    .await;
    assert_eq!(s3["did_create"], json!(true), "{s3}");
    let acct = api(&a, "$JS.API.INFO", Value::Null).await;
    assert_eq!(acct["reserved_storage"], json!(5000), "{acct}");
}

#[test]
fn account_settings_not_supported_yet_are_refused_at_start() {
    if against_reference() {
        return; // nats-server supports them
    }
    let out = common::run_config_to_exit(
        "accounts {\n  A: {\n    users: [ {user: a, password: a} ]\n    mappings: { \"x.>\": \"y.>\" }\n  }\n}\n",
        &[],
    );
    assert!(!out.status.success());
    let text = out.text();
    assert!(
        text.contains("server.conf:4:5: \"accounts.A.mappings\" is not supported yet"),
        "{text}"
    );
}

/// A shares streams and services; B and C import them.
const SHARING: &str = "accounts {
  A: {
    users: [ { user: a, password: pa } ]
    jetstream: enabled
    exports: [
      { stream: \"events.>\" }
      { stream: \"private.>\", accounts: [C] }
      { service: \"svc.echo\" }
      { service: \"svc.many\", response: stream }
      { service: \"$JS.API.>\" }
      { stream: \"$JS.EVENT.>\" }
    ]
  }
  B: {
    users: [ { user: b, password: pb } ]
    imports: [
      { stream: { account: A, subject: \"events.>\" }, prefix: froma }
      { service: { account: A, subject: \"svc.echo\" }, to: aecho }
      { service: { account: A, subject: \"svc.many\" } }
      { service: { account: A, subject: \"$JS.API.>\" }, to: \"ajs.>\" }
      { stream: { account: A, subject: \"$JS.EVENT.>\" } }
    ]
  }
  C: {
    users: [ { user: c, password: pc } ]
    imports: [ { stream: { account: A, subject: \"private.>\" } } ]
  }
}
";

#[tokio::test]
async fn a_stream_import_delivers_under_the_importers_subject() {
    let server = TestServer::start_with_config(SHARING, &[]);
    let a = login(&server, "a", "pa").await;
    let b = login(&server, "b", "pb").await;
    let c = login(&server, "c", "pc").await;
    let mut imported = b.subscribe("froma.events.>").await.unwrap();
    let mut raw = b.subscribe("events.>").await.unwrap();
    let mut private = c.subscribe("private.>").await.unwrap();
    let mut c_events = c.subscribe(">").await.unwrap();
    synced(&b).await;
    synced(&c).await;
    let own = timeout(ARRIVES, c_events.next())
        .await
        .expect("in time")
        .unwrap();
    assert!(own.subject.starts_with("_INBOX."), "{}", own.subject);
    a.publish("events.one", "hi".into()).await.unwrap();
    a.publish("private.x", "for c".into()).await.unwrap();
    synced(&a).await;
    let got = timeout(ARRIVES, imported.next())
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(
        (got.subject.as_str(), &got.payload[..]),
        ("froma.events.one", &b"hi"[..])
    );
    let got = timeout(ARRIVES, private.next())
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(
        (got.subject.as_str(), &got.payload[..]),
        ("private.x", &b"for c"[..])
    );
    // C's catch-all saw only its own import, B's raw subject nothing.
    let got = timeout(ARRIVES, c_events.next())
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(got.subject.as_str(), "private.x");
    assert!(
        timeout(QUIET, c_events.next()).await.is_err(),
        "C got A's events"
    );
    assert!(
        timeout(QUIET, raw.next()).await.is_err(),
        "B got A's subject unmapped"
    );
    // Publishing the imported subject in B stays in B: A hears nothing.
    let mut a_sub = a.subscribe("froma.>").await.unwrap();
    synced(&a).await;
    b.publish("froma.events.two", "back".into()).await.unwrap();
    synced(&b).await;
    assert!(timeout(QUIET, a_sub.next()).await.is_err());
}

#[tokio::test]
async fn a_service_import_answers_the_importers_requests() {
    let server = TestServer::start_with_config(SHARING, &[]);
    let a = login(&server, "a", "pa").await;
    let b = login(&server, "b", "pb").await;
    // No responder in A yet: B's request gets no-responders.
    let err = b
        .request("aecho", "ping".into())
        .await
        .expect_err("nobody answers");
    assert_eq!(
        err.kind(),
        async_nats::RequestErrorKind::NoResponders,
        "{err}"
    );

    let mut service = a.subscribe("svc.echo").await.unwrap();
    synced(&a).await;
    let responder = tokio::spawn(async move {
        let req = service.next().await.unwrap();
        let reply = req.reply.clone().unwrap();
        a.publish(reply.clone(), req.payload.clone()).await.unwrap();
        synced(&a).await;
        (req.subject.to_string(), reply.to_string(), a)
    });
    let resp = timeout(ARRIVES, b.request("aecho", "ping".into()))
        .await
        .expect("answered in time")
        .expect("answer");
    assert_eq!(&resp.payload[..], b"ping");
    let (subject, reply, a) = responder.await.unwrap();
    assert_eq!(subject, "svc.echo");
    assert!(
        reply.starts_with("_R_."),
        "the requester's inbox is not shown to A: {reply}"
    );

    // A `stream` response type lets several responses through.
    let mut many = a.subscribe("svc.many").await.unwrap();
    synced(&a).await;
    let inbox = b.new_inbox();
    let mut answers = b.subscribe(inbox.clone()).await.unwrap();
    b.publish_with_reply("svc.many", inbox, "go".into())
        .await
        .unwrap();
    synced(&b).await;
    let req = timeout(ARRIVES, many.next())
        .await
        .expect("request")
        .unwrap();
    for i in 0..3 {
        a.publish(req.reply.clone().unwrap(), format!("part {i}").into())
            .await
            .unwrap();
    }
    synced(&a).await;
    for i in 0..3 {
        let got = timeout(ARRIVES, answers.next())
            .await
            .expect("part")
            .unwrap();
        assert_eq!(got.payload, format!("part {i}").as_bytes());
    }
}

#[tokio::test]
async fn jetstream_through_a_service_import() {
    let server = TestServer::start_with_config(SHARING, &[]);
    let a = login(&server, "a", "pa").await;
    let b = login(&server, "b", "pb").await;
    let made = create_stream(&a, json!({"name": "EVENTS", "subjects": ["events.>"]})).await;
    assert_eq!(made["did_create"], json!(true), "{made}");
    a.publish("events.1", "one".into()).await.unwrap();
    synced(&a).await;
    // B has no JetStream of its own, but reaches A's through the imported API.
    let js = async_nats::jetstream::with_prefix(b, "ajs");
    let mut stream = timeout(ARRIVES, js.get_stream("EVENTS"))
        .await
        .expect("in time")
        .expect("A's stream through the import");
    let info = stream.info().await.expect("info");
    assert_eq!(info.state.messages, 1);
    let msg = stream.get_raw_message(1).await.expect("message 1");
    assert_eq!(msg.subject.as_str(), "events.1");
}

#[tokio::test]
async fn jetstream_advisories_through_a_stream_import() {
    // The advisory is published in A only if someone listens: the import asks B's router
    // from inside A's interest check.
    let server = TestServer::start_with_config(SHARING, &[]);
    let a = login(&server, "a", "pa").await;
    let b = login(&server, "b", "pb").await;
    let mut created = b
        .subscribe("$JS.EVENT.ADVISORY.STREAM.CREATED.>")
        .await
        .unwrap();
    synced(&b).await;
    let made = create_stream(&a, json!({"name": "AUDIT", "subjects": ["audit.>"]})).await;
    assert_eq!(made["did_create"], json!(true), "{made}");
    let adv = timeout(ARRIVES, created.next())
        .await
        .expect("advisory")
        .unwrap();
    assert_eq!(
        adv.subject.as_str(),
        "$JS.EVENT.ADVISORY.STREAM.CREATED.AUDIT"
    );
    let adv: Value = serde_json::from_slice(&adv.payload).unwrap();
    assert_eq!(adv["stream"], json!("AUDIT"), "{adv}");
    // A keeps working.
    let info = api(&a, "$JS.API.STREAM.INFO.AUDIT", Value::Null).await;
    assert_eq!(info["config"]["name"], json!("AUDIT"), "{info}");
}

#[test]
fn an_import_without_a_matching_export_is_refused_at_start() {
    let out = common::run_config_to_exit(
        "accounts {\n  A: { exports: [ { stream: \"private.>\", accounts: [C] } ] }\n  B: { imports: [ { stream: { account: A, subject: \"private.>\" } } ] }\n  C: { }\n}\n",
        &["-p", "-1"],
    );
    let text = out.text();
    assert!(!out.status.success(), "started: {text}");
    assert!(text.contains("stream import not authorized"), "{text}");
}

/// A minimal HTTP/1.0 GET of the monitoring port; the body.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect monitor");
    s.set_read_timeout(Some(ARRIVES)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned()
}

#[tokio::test]
async fn connz_with_auth_shows_each_clients_user_and_account() {
    let http = common::free_port();
    let conf = format!("authorization {{ users: [ {{ user: admin, password: pw }} ] }}\n{CONF}");
    let server = TestServer::start_with_config(&conf, &["-m", &http.to_string()]);
    let a = login(&server, "a", "pa").await;
    let admin = login(&server, "admin", "pw").await;
    synced(&a).await;
    synced(&admin).await;
    let connz: Value = serde_json::from_str(&http_get(http, "/connz?auth=1")).unwrap();
    let mut seen: Vec<(Value, Value)> = connz["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["authorized_user"].clone(), c["account"].clone()))
        .collect();
    seen.sort_by_key(|(u, _)| u.to_string());
    assert_eq!(
        seen,
        [(json!("a"), json!("A")), (json!("admin"), Value::Null)],
        "{connz}"
    );
    // Without auth=1, neither is shown.
    let connz: Value = serde_json::from_str(&http_get(http, "/connz")).unwrap();
    assert!(
        connz["connections"][0].get("authorized_user").is_none(),
        "{connz}"
    );
    assert!(connz["connections"][0].get("account").is_none(), "{connz}");
}

#[tokio::test]
async fn the_system_account_hears_of_clients_and_answers_pings() {
    let conf = "server_name: probe\naccounts {\n  SYS: { users: [ { user: sys, password: ps } ] }\n  A: { users: [ { user: a, password: pa } ] }\n}\nsystem_account: SYS\n";
    let server = TestServer::start_with_config(conf, &[]);
    let sys = login(&server, "sys", "ps").await;
    let mut connects = sys.subscribe("$SYS.ACCOUNT.A.CONNECT").await.unwrap();
    let mut disconnects = sys.subscribe("$SYS.ACCOUNT.A.DISCONNECT").await.unwrap();
    synced(&sys).await;
    let a = async_nats::ConnectOptions::with_user_and_password("a".into(), "pa".into())
        .name("worker-1")
        .connect(server.url())
        .await
        .unwrap();
    let server_id = a.server_info().server_id;
    let event = timeout(ARRIVES, connects.next())
        .await
        .expect("connect event")
        .unwrap();
    let event: Value = serde_json::from_slice(&event.payload).unwrap();
    assert_eq!(
        event["type"],
        json!("io.nats.server.advisory.v1.client_connect")
    );
    assert_eq!(event["server"]["id"], json!(server_id), "{event}");
    assert_eq!(event["server"]["name"], json!("probe"), "{event}");
    let client = &event["client"];
    assert_eq!(
        (
            client["acc"].clone(),
            client["user"].clone(),
            client["name"].clone()
        ),
        (json!("A"), json!("a"), json!("worker-1")),
        "{event}"
    );
    assert_eq!(client["kind"], json!("Client"), "{event}");
    a.publish("x", "12345".into()).await.unwrap();
    a.flush().await.unwrap();
    drop(a);
    let event = timeout(ARRIVES, disconnects.next())
        .await
        .expect("disconnect event")
        .unwrap();
    let event: Value = serde_json::from_slice(&event.payload).unwrap();
    assert_eq!(
        event["type"],
        json!("io.nats.server.advisory.v1.client_disconnect")
    );
    assert_eq!(event["reason"], json!("Client Closed"), "{event}");
    assert_eq!(event["sent"], json!({"msgs": 1, "bytes": 5}), "{event}");
    assert_eq!(event["client"]["acc"], json!("A"), "{event}");
    assert!(event["client"]["stop"].is_string(), "{event}");

    let ping = timeout(ARRIVES, sys.request("$SYS.REQ.SERVER.PING", Bytes::new()))
        .await
        .unwrap()
        .unwrap();
    let ping: Value = serde_json::from_slice(&ping.payload).unwrap();
    assert_eq!(ping["server"]["id"], json!(server_id), "{ping}");
    assert_eq!(ping["statsz"]["connections"], json!(1), "{ping}");
    let varz = api(&sys, "$SYS.REQ.SERVER.PING.VARZ", Value::Null).await;
    assert_eq!(varz["data"]["server_id"], json!(server_id), "{varz}");
    let health = api(
        &sys,
        &format!("$SYS.REQ.SERVER.{server_id}.HEALTHZ"),
        Value::Null,
    )
    .await;
    assert_eq!(health["data"]["status"], json!("ok"), "{health}");
    let idz = api(&sys, "$SYS.REQ.SERVER.PING.IDZ", Value::Null).await;
    assert_eq!(
        idz,
        json!({"name": "probe", "host": idz["host"], "id": server_id})
    );

    // Other accounts have no system subjects.
    let other = login(&server, "a", "pa").await;
    let err = other
        .request("$SYS.REQ.SERVER.PING", Bytes::new())
        .await
        .expect_err("not in account A");
    assert_eq!(
        err.kind(),
        async_nats::RequestErrorKind::NoResponders,
        "{err}"
    );
}

#[test]
fn account_limits_on_connections_subscriptions_and_payloads() {
    let conf = "accounts {\n  A: {\n    users: [ { user: a, password: pa } ]\n    limits: { max_connections: 2, max_subscriptions: 2, max_payload: 100 }\n  }\n}\n";
    let server = TestServer::start_with_config(conf, &[]);
    let login = r#"{"verbose":false,"user":"a","pass":"pa"}"#;
    let open = |extra: &str| {
        let (mut raw, _) = common::Raw::connect(server.port);
        raw.send(format!("CONNECT {login}\r\n{extra}PING\r\n").as_bytes());
        raw
    };
    let mut first = open("");
    first.expect_line("PONG\r\n");
    let mut second = open("");
    second.expect_line("PONG\r\n");
    // A third client of the account is refused and closed.
    let mut third = open("");
    assert_eq!(
        third.line() + &third.read_to_eof(),
        "-ERR 'maximum account active connections exceeded'\r\n"
    );
    // Once one leaves, there is room again.
    drop(second);
    let deadline = std::time::Instant::now() + ARRIVES;
    let mut again = loop {
        let mut raw = open("");
        let line = raw.line();
        if line == "PONG\r\n" {
            break raw;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no room after a close: {line}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Two subscriptions per client; the third is refused, the client stays.
    first.send(b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nPING\r\n");
    first.expect_line("-ERR 'maximum subscriptions exceeded'\r\n");
    first.expect_line("PONG\r\n");
    // A message over max_payload closes the client.
    again.send(format!("PUB x 150\r\n{}\r\nPING\r\n", "y".repeat(150)).as_bytes());
    assert_eq!(
        again.line() + &again.read_to_eof(),
        "-ERR 'Maximum Payload Violation'\r\n"
    );
    first.send(b"PUB x 100\r\n");
    first.send(format!("{}\r\nPING\r\n", "y".repeat(100)).as_bytes());
    first.expect_line("PONG\r\n");
}

/// Accounts A, B, C (users a, b, c), each exporting the service `svc` (and `svc.>`) and the
/// stream `ev.>`, with the imports given: loops of imports, as in the fault report.
fn looped(a: &str, b: &str, c: &str) -> String {
    let account = |name: &str, imports: &str| {
        format!(
            "  {}: {{\n    users: [ {{ user: {name}, password: p{name} }} ]\n    exports: [ {{ service: \"svc\" }}, {{ service: \"svc.>\" }}, {{ stream: \"ev.>\" }} ]\n    imports: [ {imports} ]\n  }}\n",
            name.to_uppercase()
        )
    };
    format!(
        "accounts {{\n{}{}{}}}\n",
        account("a", a),
        account("b", b),
        account("c", c)
    )
}

fn service(account: &str, subject: &str) -> String {
    format!("{{ service: {{ account: {account}, subject: \"{subject}\" }} }}")
}

fn stream(account: &str, subject: &str) -> String {
    format!("{{ stream: {{ account: {account}, subject: \"{subject}\" }} }}")
}

/// Runs the server on `conf` until it exits (a start-up refusal); its exit status and
/// output.
fn refused_at_start(conf: &str) -> (std::process::ExitStatus, String) {
    let run = common::run_config_to_exit(conf, &["-a", "127.0.0.1", "-p", "-1"]);
    (run.status, run.text())
}

#[test]
fn import_loops_nats_server_refuses_stop_the_server_at_start() {
    // nats-server 2.15.1 refuses these while adding the imports (its import cycle checks),
    // whatever order it takes the accounts in.
    let loops = [
        (
            "A and B import each other's service",
            looped(&service("B", "svc"), &service("A", "svc"), ""),
            "Error adding service import \"svc\": import forms a cycle",
        ),
        (
            "A and B import each other's stream",
            looped(&stream("B", "ev.>"), &stream("A", "ev.>"), ""),
            "Error adding stream import \"ev.>\": import forms a cycle",
        ),
        (
            "a wildcard service loop",
            looped(&service("B", "svc.>"), &service("A", "svc.>"), ""),
            "Error adding service import \"svc.>\": import forms a cycle",
        ),
        (
            "a loop through three accounts",
            looped(
                &service("B", "svc"),
                &service("C", "svc"),
                &service("A", "svc"),
            ),
            "Error adding service import \"svc\": import forms a cycle",
        ),
    ];
    for (what, conf, error) in loops {
        let (status, text) = refused_at_start(&conf);
        assert!(!status.success(), "{what}: {status}");
        assert!(text.contains(error), "{what}: {text}");
    }
}

/// Whether a fresh client of `user` gets its PONG: the server is up and serving.
fn answers_ping(server: &TestServer, user: &str) {
    let (mut raw, _) = common::Raw::connect(server.port);
    raw.send(
        format!(
            "CONNECT {{\"verbose\":false,\"user\":\"{user}\",\"pass\":\"p{user}\"}}\r\nPING\r\n"
        )
        .as_bytes(),
    );
    raw.expect_line("PONG\r\n");
}

#[tokio::test]
async fn an_account_importing_its_own_service_gets_no_responders() {
    // nats-server starts with this loop; a request into it, with nobody to answer, gets
    // no-responders, and the server goes on.
    let server = TestServer::start_with_config(&looped(&service("A", "svc"), "", ""), &[]);
    let a = login(&server, "a", "pa").await;
    for _ in 0..3 {
        let err = timeout(ARRIVES, a.request("svc", "ping".into()))
            .await
            .expect("answered in time")
            .expect_err("nobody answers");
        assert_eq!(
            err.kind(),
            async_nats::RequestErrorKind::NoResponders,
            "{err}"
        );
    }
    answers_ping(&server, "a");
    // With a responder, the request reaches it twice: as sent, and once through the
    // import (with a reply subject of the import's); the requester gets its answer.
    let mut service = a.subscribe("svc").await.unwrap();
    synced(&a).await;
    let inbox = a.new_inbox();
    let mut answers = a.subscribe(inbox.clone()).await.unwrap();
    a.publish_with_reply("svc", inbox.clone(), "q".into())
        .await
        .unwrap();
    let mut replies = Vec::new();
    for _ in 0..2 {
        let req = timeout(ARRIVES, service.next())
            .await
            .expect("request")
            .unwrap();
        replies.push(req.reply.unwrap().to_string());
    }
    let (through, sent): (Vec<String>, Vec<String>) =
        replies.into_iter().partition(|r| r.starts_with("_R_."));
    assert_eq!((through.len(), sent), (1, vec![inbox.to_string()]));
    assert!(
        timeout(QUIET, service.next()).await.is_err(),
        "a third copy"
    );
    a.publish(through[0].clone(), "answer".into())
        .await
        .unwrap();
    let got = timeout(ARRIVES, answers.next())
        .await
        .expect("answer")
        .unwrap();
    assert_eq!(&got.payload[..], b"answer");
    answers_ping(&server, "a");
}

#[tokio::test]
async fn an_account_importing_its_own_stream_gets_each_message_twice() {
    // nats-server starts with this loop and delivers a message as published and once
    // through the import; never more.
    let server = TestServer::start_with_config(&looped(&stream("A", "ev.>"), "", ""), &[]);
    let a = login(&server, "a", "pa").await;
    // Nobody listening: a publish into the loop goes nowhere, and the server goes on.
    a.publish("ev.x", "lost".into()).await.unwrap();
    synced(&a).await;
    answers_ping(&server, "a");
    let mut events = a.subscribe("ev.>").await.unwrap();
    synced(&a).await;
    a.publish("ev.x", "hi".into()).await.unwrap();
    synced(&a).await;
    for _ in 0..2 {
        let got = timeout(ARRIVES, events.next())
            .await
            .expect("a copy")
            .unwrap();
        assert_eq!(
            (got.subject.as_str(), &got.payload[..]),
            ("ev.x", &b"hi"[..])
        );
    }
    assert!(timeout(QUIET, events.next()).await.is_err(), "a third copy");
    answers_ping(&server, "a");
}

#[test]
fn a_client_cannot_give_a_reply_subject_of_the_servers() {
    // A client that could make a request's reply subject the response subject an import
    // gave the request before would chain responses through the import without end.
    // nats-server refuses a publish with such a reply subject (`_R_.`, and the JetStream
    // ack and gateway reply prefixes), the client stays; so does this server.
    let server = TestServer::start_with_config(&looped(&service("A", "svc"), "", ""), &[]);
    let (mut responder, _) = common::Raw::connect(server.port);
    responder.send(
        b"CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"pa\"}\r\nSUB svc 1\r\nPING\r\n",
    );
    responder.expect_line("PONG\r\n");
    let (mut raw, _) = common::Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"pa\"}\r\nPING\r\n");
    raw.expect_line("PONG\r\n");
    for reply in [
        "_R_.abcdef.ghijkl",
        "_R_.",
        "$JS.ACK.S.C.1.1.1.1.1",
        "_GR_.x.y",
    ] {
        raw.send(format!("PUB svc {reply} 1\r\nq\r\nPING\r\n").as_bytes());
        raw.expect_line(&format!(
            "-ERR 'Permissions Violation for Publish with Reply of \"{reply}\"'\r\n"
        ));
        raw.expect_line("PONG\r\n");
    }
    // Prefixes with nothing after them, and look-alikes, are plain reply subjects.
    for reply in ["$JS.ACK.", "_GR_.", "_R_x.y", "x._R_.y"] {
        raw.send(format!("PUB svc {reply} 1\r\nq\r\nPING\r\n").as_bytes());
        raw.expect_line("PONG\r\n");
    }
    // The refused ones never reached the responder; the others did (as sent, and once
    // more through the import).
    responder.send(b"PING\r\n");
    let mut got = Vec::new();
    loop {
        let line = responder.line();
        if line == "PONG\r\n" {
            break;
        }
        let parts: Vec<&str> = line.trim_end().split(' ').collect();
        match parts[0] {
            "MSG" => {
                got.push(parts[3].to_owned());
                responder.line(); // the payload
            }
            "HMSG" => {
                got.push(parts[3].to_owned());
                let total: usize = parts[parts.len() - 1].parse().unwrap();
                responder.exact(total + 2);
            }
            _ => panic!("unexpected {line:?}"),
        }
    }
    let mut sent: Vec<&str> = got
        .iter()
        .map(String::as_str)
        .filter(|r| !r.starts_with("_R_."))
        .collect();
    sent.dedup();
    assert_eq!(sent, ["$JS.ACK.", "_GR_.", "_R_x.y", "x._R_.y"], "{got:?}");
    assert_eq!(got.len(), 8, "{got:?}");
}

/// nats-server warns at start-up about plain-text passwords of any user, an account's users
/// included, once; bcrypt hashes get no warning.
#[test]
fn plaintext_passwords_of_account_users_are_warned_about_once() {
    let count = |conf: &str| {
        let mut server = TestServer::start_with_config(conf, &[]);
        let log = server.wait_for_log("Server is ready");
        log.matches("Plaintext passwords detected, use nkeys or bcrypt")
            .count()
    };
    assert_eq!(count(CONF), 1);
    let both = format!("authorization {{ users: [ {{ user: g, password: pg }} ] }}\n{CONF}");
    assert_eq!(count(&both), 1);
    let hashed = "$2a$11$PWIFAL8RsWyGI3jVZtO9Nu8.6jOxzxfZo7c/W0eLk017hjgUKWrhy";
    assert_eq!(
        count(&format!(
            "accounts {{ A: {{ users: [ {{ user: a, password: \"{hashed}\" }} ] }} }}\n"
        )),
        0
    );
}
