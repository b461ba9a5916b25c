//! JetStream advisories (`$JS.EVENT.ADVISORY.…`) through async-nats against the real binary:
//! stream created/updated/deleted, consumer created/deleted, max deliveries, terminated (with
//! and without a reason, and for a pending message deleted from the stream), naked; and a
//! stream capturing `$JS.EVENT.>` storing them, its own events included.
//!
//! The same tests pass against nats-server (`JSSERVER_TEST_BINARY=$(which nats-server)`),
//! which also publishes API audit advisories (`$JS.EVENT.ADVISORY.API`): those are ignored.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, PullConsumer};
use async_nats::jetstream::{self, stream, AckKind};
use bytes::Bytes;
use common::{fetch, TestServer};
use futures_util::StreamExt;
use jsproto::api::time::Timestamp;
use serde_json::Value;

/// Generous: a wait for a condition, never a timing assertion.
const WAIT: Duration = Duration::from_secs(20);

async fn connect(server: &TestServer) -> (async_nats::Client, jetstream::Context) {
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let js = jetstream::new(nc.clone());
    (nc, js)
}

/// Everything published on `$JS.EVENT.ADVISORY.>` except API audits, in arrival order.
struct Advisories {
    sub: async_nats::Subscriber,
    /// (subject, body) of every advisory received so far.
    seen: Vec<(String, Value)>,
    /// Every id seen (each must be new), and `taken:<id>` for those `wait_for` returned.
    ids: HashSet<String>,
}

impl Advisories {
    async fn subscribe(nc: &async_nats::Client) -> Advisories {
        let sub = nc
            .subscribe("$JS.EVENT.ADVISORY.>")
            .await
            .expect("subscribe");
        nc.flush().await.expect("flush");
        Advisories {
            sub,
            seen: Vec::new(),
            ids: HashSet::new(),
        }
    }

    /// Receives until an advisory on exactly `subject` arrives that was not returned before,
    /// checks the fields every advisory has, and returns its body.
    async fn wait_for(&mut self, subject: &str, type_suffix: &str) -> Value {
        match self.try_wait_for(subject, type_suffix, WAIT).await {
            Some(body) => body,
            None => panic!("no advisory on {subject}; got {:?}", self.subjects()),
        }
    }

    /// [`Advisories::wait_for`], giving up (None) after `within`.
    async fn try_wait_for(
        &mut self,
        subject: &str,
        type_suffix: &str,
        within: Duration,
    ) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        let mut index = 0;
        loop {
            while index < self.seen.len() {
                let (s, body) = &self.seen[index];
                let id = body["id"].as_str().unwrap_or_default().to_owned();
                if s == subject && !self.ids.contains(&format!("taken:{id}")) {
                    self.ids.insert(format!("taken:{id}"));
                    let body = body.clone();
                    assert_eq!(
                        body["type"],
                        format!("io.nats.jetstream.advisory.v1.{type_suffix}"),
                        "{subject}: {body}"
                    );
                    return Some(body);
                }
                index += 1;
            }
            let msg = tokio::time::timeout_at(deadline, self.sub.next())
                .await
                .ok()?
                .expect("subscription open");
            self.record(msg);
        }
    }

    /// Checks and keeps an advisory (API audits are skipped).
    fn record(&mut self, msg: async_nats::Message) {
        if msg.subject.as_str() == "$JS.EVENT.ADVISORY.API" {
            return;
        }
        let body: Value = serde_json::from_slice(&msg.payload).expect("JSON advisory");
        check_common(&body);
        let id = body["id"].as_str().expect("id").to_owned();
        assert!(self.ids.insert(id.clone()), "id {id} used twice");
        self.seen.push((msg.subject.to_string(), body));
    }

    /// Receives whatever arrives within `quiet` (to check that something did not happen).
    async fn drain(&mut self, quiet: Duration) {
        while let Ok(Some(msg)) = tokio::time::timeout(quiet, self.sub.next()).await {
            self.record(msg);
        }
    }

    fn subjects(&self) -> Vec<&str> {
        self.seen.iter().map(|(s, _)| s.as_str()).collect()
    }

    fn count(&self, subject: &str) -> usize {
        self.seen.iter().filter(|(s, _)| s == subject).count()
    }

    fn position(&self, subject: &str) -> usize {
        self.seen
            .iter()
            .position(|(s, _)| s == subject)
            .unwrap_or_else(|| panic!("{subject} not seen"))
    }
}

/// Whether the binary under test is another server (`JSSERVER_TEST_BINARY`, e.g. nats-server).
fn against_reference() -> bool {
    std::env::var_os("JSSERVER_TEST_BINARY").is_some()
}

/// How long to wait for `STREAM.DELETED`. nats-server 2.15.1 sometimes does not publish it at
/// all (observed in about one run in six of these tests: the consumers' `CONSUMER.DELETED`
/// arrive, the stream's advisory never does), so against it the wait is short and its absence
/// tolerated; jsserver must always publish it.
fn stream_deleted_wait() -> Duration {
    if against_reference() {
        Duration::from_secs(3)
    } else {
        WAIT
    }
}

/// `id` (unique, NUID-like), `timestamp` (RFC 3339 UTC, as Go writes it) and `type`.
fn check_common(body: &Value) {
    let id = body["id"].as_str().expect("id is a string");
    assert_eq!(id.len(), 22, "NUID-like id: {id}");
    assert!(id.bytes().all(|c| c.is_ascii_alphanumeric()), "{id}");
    let ts = body["timestamp"].as_str().expect("timestamp is a string");
    assert!(ts.ends_with('Z'), "UTC timestamp: {ts}");
    assert!(
        !ts.contains(".") || !ts.ends_with("0Z"),
        "no trailing zeros: {ts}"
    );
    let parsed: Timestamp = ts.parse().expect("RFC 3339 timestamp");
    assert!(parsed.unix_nanos().is_some_and(|n| n > 0), "{ts}");
    assert!(body["type"]
        .as_str()
        .expect("type")
        .starts_with("io.nats.jetstream.advisory.v1."));
}

fn keys(body: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = body
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

#[tokio::test]
async fn stream_and_consumer_lifecycle() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let mut adv = Advisories::subscribe(&nc).await;

    let config = stream::Config {
        name: "ADV".into(),
        subjects: vec!["adv.>".into()],
        ..Default::default()
    };
    let s = js.create_stream(config.clone()).await.expect("create");
    let created = adv
        .wait_for("$JS.EVENT.ADVISORY.STREAM.CREATED.ADV", "stream_action")
        .await;
    assert_eq!(created["stream"], "ADV");
    assert_eq!(created["action"], "create");
    // No config, no template: just these.
    assert_eq!(
        keys(&created),
        ["action", "id", "stream", "timestamp", "type"]
    );

    // The same create again changes nothing and publishes nothing.
    js.create_stream(config.clone())
        .await
        .expect("create again");

    js.update_stream(stream::Config {
        description: Some("orders".into()),
        ..config.clone()
    })
    .await
    .expect("update");
    let updated = adv
        .wait_for("$JS.EVENT.ADVISORY.STREAM.UPDATED.ADV", "stream_action")
        .await;
    assert_eq!(updated["stream"], "ADV");
    assert_eq!(updated["action"], "modify");

    let durable = pull::Config {
        durable_name: Some("shipping".into()),
        ack_policy: AckPolicy::Explicit,
        ..Default::default()
    };
    s.create_consumer(durable.clone()).await.expect("consumer");
    let c = adv
        .wait_for(
            "$JS.EVENT.ADVISORY.CONSUMER.CREATED.ADV.shipping",
            "consumer_action",
        )
        .await;
    assert_eq!(c["stream"], "ADV");
    assert_eq!(c["consumer"], "shipping");
    assert_eq!(c["action"], "create");
    assert_eq!(
        keys(&c),
        ["action", "consumer", "id", "stream", "timestamp", "type"]
    );
    // A repeated create and an update of the consumer publish nothing.
    s.create_consumer(durable.clone()).await.expect("again");
    s.create_consumer(pull::Config {
        description: Some("edited".into()),
        ..durable
    })
    .await
    .expect("update consumer");

    let mut eph: PullConsumer = s
        .create_consumer(pull::Config {
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("ephemeral");
    let eph_name = eph.info().await.expect("info").name.clone();
    let e = adv
        .wait_for(
            &format!("$JS.EVENT.ADVISORY.CONSUMER.CREATED.ADV.{eph_name}"),
            "consumer_action",
        )
        .await;
    assert_eq!(e["consumer"], eph_name.as_str());

    s.delete_consumer("shipping")
        .await
        .expect("delete consumer");
    let d = adv
        .wait_for(
            "$JS.EVENT.ADVISORY.CONSUMER.DELETED.ADV.shipping",
            "consumer_action",
        )
        .await;
    assert_eq!(d["action"], "delete");
    assert_eq!(d["consumer"], "shipping");

    // Deleting the stream deletes its remaining consumer first.
    js.delete_stream("ADV").await.expect("delete stream");
    let eph_deleted = format!("$JS.EVENT.ADVISORY.CONSUMER.DELETED.ADV.{eph_name}");
    adv.wait_for(&eph_deleted, "consumer_action").await;
    let sd = adv
        .try_wait_for(
            "$JS.EVENT.ADVISORY.STREAM.DELETED.ADV",
            "stream_action",
            stream_deleted_wait(),
        )
        .await;
    if let Some(sd) = sd {
        assert_eq!(sd["action"], "delete");
        assert_eq!(sd["stream"], "ADV");
        assert!(
            adv.position(&eph_deleted) < adv.position("$JS.EVENT.ADVISORY.STREAM.DELETED.ADV"),
            "consumer deleted before its stream: {:?}",
            adv.subjects()
        );
    } else {
        assert!(
            against_reference(),
            "no STREAM.DELETED: {:?}",
            adv.subjects()
        );
    }

    adv.drain(Duration::from_millis(300)).await;
    assert_eq!(adv.count("$JS.EVENT.ADVISORY.STREAM.CREATED.ADV"), 1);
    assert_eq!(
        adv.count("$JS.EVENT.ADVISORY.CONSUMER.CREATED.ADV.shipping"),
        1,
        "{:?}",
        adv.subjects()
    );
    assert_eq!(adv.count("$JS.EVENT.ADVISORY.STREAM.UPDATED.ADV"), 1);
}

#[tokio::test]
async fn inactive_ephemeral_is_deleted_with_an_advisory() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let mut adv = Advisories::subscribe(&nc).await;
    let s = js
        .create_stream(stream::Config {
            name: "IDLE".into(),
            subjects: vec!["idle.>".into()],
            ..Default::default()
        })
        .await
        .expect("create");
    let c: PullConsumer = s
        .create_consumer(pull::Config {
            inactive_threshold: Duration::from_secs(1),
            ..Default::default()
        })
        .await
        .expect("ephemeral");
    let name = c.cached_info().name.clone();
    let d = adv
        .wait_for(
            &format!("$JS.EVENT.ADVISORY.CONSUMER.DELETED.IDLE.{name}"),
            "consumer_action",
        )
        .await;
    assert_eq!(d["action"], "delete");
    assert_eq!(d["stream"], "IDLE");
}

#[tokio::test]
async fn message_events() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let mut adv = Advisories::subscribe(&nc).await;
    let s = js
        .create_stream(stream::Config {
            name: "MSGS".into(),
            subjects: vec!["msgs.>".into()],
            ..Default::default()
        })
        .await
        .expect("create");
    let c: PullConsumer = s
        .create_consumer(pull::Config {
            durable_name: Some("work".into()),
            ack_policy: AckPolicy::Explicit,
            max_deliver: 2,
            ack_wait: Duration::from_secs(1),
            ..Default::default()
        })
        .await
        .expect("consumer");
    for i in 1..=3 {
        js.publish("msgs.new", Bytes::from(format!("m{i}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let got = fetch(&c, 3, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 3);

    // +TERM with a reason.
    let reply = got[0].reply.clone().expect("ack subject");
    nc.publish(reply, Bytes::from_static(b"+TERM because reasons"))
        .await
        .unwrap();
    let t = adv
        .wait_for(
            "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.MSGS.work",
            "terminated",
        )
        .await;
    assert_eq!(t["stream"], "MSGS");
    assert_eq!(t["consumer"], "work");
    assert_eq!(t["stream_seq"], 1);
    assert_eq!(t["consumer_seq"], 1);
    assert_eq!(t["deliveries"], 1);
    assert_eq!(t["reason"], "because reasons");
    assert_eq!(
        keys(&t),
        [
            "consumer",
            "consumer_seq",
            "deliveries",
            "id",
            "reason",
            "stream",
            "stream_seq",
            "timestamp",
            "type"
        ]
    );

    // -NAK.
    got[1].ack_with(AckKind::Nak(None)).await.unwrap();
    let n = adv
        .wait_for("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.MSGS.work", "nak")
        .await;
    assert_eq!(n["stream"], "MSGS");
    assert_eq!(n["consumer"], "work");
    assert_eq!(n["stream_seq"], 2);
    assert_eq!(n["consumer_seq"], 2);
    assert_eq!(n["deliveries"], 1);
    assert_eq!(
        keys(&n),
        [
            "consumer",
            "consumer_seq",
            "deliveries",
            "id",
            "stream",
            "stream_seq",
            "timestamp",
            "type"
        ]
    );

    // Messages 2 and 3 are never acked: after their second delivery, keep a pull waiting
    // until both reach max_deliver.
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut exhausted = HashSet::new();
    while exhausted.len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            adv.subjects()
        );
        let _ = fetch(&c, 10, Duration::from_millis(500)).await;
        adv.drain(Duration::from_millis(50)).await;
        for (subject, body) in &adv.seen {
            if subject == "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.MSGS.work" {
                assert_eq!(body["type"], "io.nats.jetstream.advisory.v1.max_deliver");
                assert_eq!(body["stream"], "MSGS");
                assert_eq!(body["consumer"], "work");
                assert_eq!(body["deliveries"], 2);
                assert_eq!(
                    keys(body),
                    [
                        "consumer",
                        "deliveries",
                        "id",
                        "stream",
                        "stream_seq",
                        "timestamp",
                        "type"
                    ]
                );
                exhausted.insert(body["stream_seq"].as_u64().expect("stream_seq"));
            }
        }
    }
    assert_eq!(exhausted, HashSet::from([2, 3]));

    // A plain +TERM: no reason field at all.
    js.publish("msgs.new", Bytes::from_static(b"m4"))
        .await
        .unwrap()
        .await
        .unwrap();
    let got = fetch(&c, 1, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1);
    got[0].ack_with(AckKind::Term).await.unwrap();
    let t = adv
        .wait_for(
            "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.MSGS.work",
            "terminated",
        )
        .await;
    assert_eq!(t["stream_seq"], 4);
    assert_eq!(t["deliveries"], 1);
    assert!(t.get("reason").is_none(), "{t}");

    // A pending message deleted from the stream is terminated with nats-server's reason.
    js.publish("msgs.new", Bytes::from_static(b"m5"))
        .await
        .unwrap()
        .await
        .unwrap();
    let got = fetch(&c, 1, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1);
    assert!(s.delete_message(5).await.expect("delete"));
    let t = adv
        .wait_for(
            "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.MSGS.work",
            "terminated",
        )
        .await;
    assert_eq!(t["stream_seq"], 5);
    assert_eq!(t["deliveries"], 1);
    assert_eq!(t["reason"], "Unacknowledged message was deleted");
}

/// Waits until `stream` holds a message on `subject` and returns its JSON body.
async fn stored(s: &stream::Stream, subject: &str) -> Value {
    try_stored(s, subject, WAIT).await.expect("stored")
}

/// [`stored`], giving up after `within` (None) when against another server, panicking with
/// what the stream holds when against jsserver.
async fn try_stored(s: &stream::Stream, subject: &str, within: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Ok(m) = s.get_last_raw_message_by_subject(subject).await {
            return Some(serde_json::from_slice(&m.payload).expect("JSON advisory"));
        }
        if tokio::time::Instant::now() >= deadline {
            if against_reference() && within < WAIT {
                return None;
            }
            let mut subjects = Vec::new();
            if let Ok(mut list) = s.info_with_subjects(">").await {
                while let Some(Ok(entry)) = list.next().await {
                    subjects.push(entry);
                }
            }
            panic!("{subject} never stored; stored: {subjects:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_stream_captures_advisories_its_own_included() {
    let server = TestServer::start(&[]);
    capture_scenario(&server).await;
}

/// The same with `sync_interval: always`, where the stream threads apply everything.
#[tokio::test]
async fn a_stream_captures_advisories_with_sync_always() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("sync_always.conf");
    std::fs::write(&file, "jetstream { sync_interval: always }\n").expect("write conf");
    let server = TestServer::start(&["-c", &file.display().to_string()]);
    capture_scenario(&server).await;
}

async fn capture_scenario(server: &TestServer) {
    let (_nc, js) = connect(server).await;
    let events = js
        .create_stream(stream::Config {
            name: "EVENTS".into(),
            subjects: vec!["$JS.EVENT.>".into()],
            ..Default::default()
        })
        .await
        .expect("create events stream");
    // Its own creation is captured.
    let own = stored(&events, "$JS.EVENT.ADVISORY.STREAM.CREATED.EVENTS").await;
    assert_eq!(own["action"], "create");

    let work = js
        .create_stream(stream::Config {
            name: "WORK".into(),
            subjects: vec!["work.>".into()],
            ..Default::default()
        })
        .await
        .expect("create");
    let c: PullConsumer = work
        .create_consumer(pull::Config {
            durable_name: Some("w".into()),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("consumer");
    stored(&events, "$JS.EVENT.ADVISORY.STREAM.CREATED.WORK").await;
    let created = stored(&events, "$JS.EVENT.ADVISORY.CONSUMER.CREATED.WORK.w").await;
    assert_eq!(created["consumer"], "w");

    js.publish("work.1", Bytes::from_static(b"x"))
        .await
        .unwrap()
        .await
        .unwrap();
    let got = fetch(&c, 1, Duration::from_secs(5)).await;
    got[0].ack_with(AckKind::Nak(None)).await.unwrap();
    let nak = stored(&events, "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.WORK.w").await;
    assert_eq!(nak["stream_seq"], 1);

    // A consumer of the events stream itself: its events are published while that stream
    // is busy with it, and land in the same stream.
    let watch: PullConsumer = events
        .create_consumer(pull::Config {
            durable_name: Some("watch".into()),
            ack_policy: AckPolicy::Explicit,
            filter_subject: "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.WORK.>".into(),
            ..Default::default()
        })
        .await
        .expect("watch consumer");
    stored(&events, "$JS.EVENT.ADVISORY.CONSUMER.CREATED.EVENTS.watch").await;
    let seen = fetch(&watch, 1, Duration::from_secs(5)).await;
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].subject.as_str(),
        "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.WORK.w"
    );
    seen[0].ack_with(AckKind::Nak(None)).await.unwrap();
    let own_nak = stored(
        &events,
        "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.EVENTS.watch",
    )
    .await;
    assert_eq!(own_nak["consumer"], "watch");
    assert_eq!(own_nak["stream"], "EVENTS");

    // A burst of NAKs on WORK while the events stream's own consumer is busy: every advisory
    // is stored, nothing gets stuck.
    const BURST: usize = 200;
    for i in 0..BURST {
        js.publish("work.burst", Bytes::from(format!("b{i}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let mut naked = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    while naked < BURST {
        assert!(tokio::time::Instant::now() < deadline, "{naked} NAKed");
        let (work_batch, own) = tokio::join!(
            fetch(&c, 50, Duration::from_secs(1)),
            fetch(&watch, 50, Duration::from_millis(200))
        );
        for m in work_batch
            .iter()
            .filter(|m| m.subject.as_str() == "work.burst")
        {
            m.ack_with(AckKind::Nak(None)).await.unwrap();
            naked += 1;
        }
        for m in &own {
            m.ack().await.unwrap();
        }
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let info = events
            .info_with_subjects("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.WORK.w")
            .await
            .expect("subjects")
            .next()
            .await;
        let stored = match info {
            Some(Ok((_, n))) => n,
            _ => 0,
        };
        if stored > naked {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{stored} NAK advisories stored"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The server still answers (nothing is stuck).
    js.delete_stream("WORK").await.expect("delete");
    stored(&events, "$JS.EVENT.ADVISORY.CONSUMER.DELETED.WORK.w").await;
    // (nats-server sometimes loses this one: see `stream_deleted_wait`.)
    try_stored(
        &events,
        "$JS.EVENT.ADVISORY.STREAM.DELETED.WORK",
        stream_deleted_wait(),
    )
    .await;
    let info = events.get_info().await.expect("info");
    assert!(info.state.messages >= 7, "{:?}", info.state);
}
