//! Rollup and the discard-new limits together, end to end: each case creates stream `S` on
//! `s.>` with a config, publishes a few messages (some with `Nats-Rollup`), and checks every
//! PubAck (sequence or error code and text) and what the stream holds after, on file and on
//! memory storage. The expectations are nats-server 2.15.1's (checked with
//! `JSSERVER_TEST_BINARY=$(which nats-server) cargo test --test jetstream_limits`), among
//! them: a rollup passes a full subject under `discard_new_per_subject` (it purges the
//! subject after it is stored) but not a full stream under `max_msgs`; the rollup value is
//! read in any case and an empty one is no rollup.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::HeaderMap;
use common::TestServer;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

/// One publish: subject and an optional `Nats-Rollup` value.
type Step = (&'static str, Option<&'static str>);

/// A PubAck: the sequence, or (error code, description).
type Ack = Result<u64, (u64, &'static str)>;

struct Case {
    config: Value,
    steps: Vec<Step>,
    acks: Vec<Ack>,
    /// (messages, first seq, last seq, per-subject counts) after the steps.
    state: (u64, u64, u64, Vec<(&'static str, u64)>),
}

const PER_SUBJECT: (u64, &str) = (10077, "maximum messages per subject exceeded");
const MAX_MSGS: (u64, &str) = (10077, "maximum messages exceeded");

fn cases() -> Vec<Case> {
    let (a, b, c) = (("s.a", None), ("s.b", None), ("s.c", None));
    vec![
        Case {
            config: json!({"max_msgs_per_subject": 2, "discard": "new", "discard_new_per_subject": true}),
            steps: vec![a, a, a, b],
            acks: vec![Ok(1), Ok(2), Err(PER_SUBJECT), Ok(3)],
            state: (3, 1, 3, vec![("s.a", 2), ("s.b", 1)]),
        },
        Case {
            config: json!({"max_msgs_per_subject": 2, "discard": "new"}),
            steps: vec![a, a, a, b],
            acks: vec![Ok(1), Ok(2), Ok(3), Ok(4)],
            state: (3, 2, 4, vec![("s.a", 2), ("s.b", 1)]),
        },
        Case {
            config: json!({"max_msgs": 3, "discard": "new", "max_msgs_per_subject": 2}),
            steps: vec![a, a, a, b, c],
            acks: vec![Ok(1), Ok(2), Ok(3), Ok(4), Err(MAX_MSGS)],
            state: (3, 2, 4, vec![("s.a", 2), ("s.b", 1)]),
        },
        Case {
            config: json!({"max_msgs": 3, "discard": "new", "max_msgs_per_subject": 2,
                           "discard_new_per_subject": true}),
            steps: vec![a, a, a, b, c],
            acks: vec![Ok(1), Ok(2), Err(PER_SUBJECT), Ok(3), Err(MAX_MSGS)],
            state: (3, 1, 3, vec![("s.a", 2), ("s.b", 1)]),
        },
        Case {
            config: json!({"max_msgs": 2, "discard": "new", "max_msgs_per_subject": 1}),
            steps: vec![a, a, b, c],
            acks: vec![Ok(1), Ok(2), Ok(3), Err(MAX_MSGS)],
            state: (2, 2, 3, vec![("s.a", 1), ("s.b", 1)]),
        },
        // A full stream refuses a rollup too, of either kind.
        Case {
            config: json!({"max_msgs": 3, "discard": "new", "allow_rollup_hdrs": true}),
            steps: vec![a, b, c, ("s.a", Some("sub"))],
            acks: vec![Ok(1), Ok(2), Ok(3), Err(MAX_MSGS)],
            state: (3, 1, 3, vec![("s.a", 1), ("s.b", 1), ("s.c", 1)]),
        },
        Case {
            config: json!({"max_msgs": 3, "discard": "new", "allow_rollup_hdrs": true}),
            steps: vec![a, b, c, ("s.a", Some("all"))],
            acks: vec![Ok(1), Ok(2), Ok(3), Err(MAX_MSGS)],
            state: (3, 1, 3, vec![("s.a", 1), ("s.b", 1), ("s.c", 1)]),
        },
        Case {
            config: json!({"max_msgs": 3, "discard": "old", "allow_rollup_hdrs": true}),
            steps: vec![a, b, c, ("s.a", Some("all")), b],
            acks: vec![Ok(1), Ok(2), Ok(3), Ok(4), Ok(5)],
            state: (2, 4, 5, vec![("s.a", 1), ("s.b", 1)]),
        },
        // A full subject under discard_new_per_subject lets a rollup through.
        Case {
            config: json!({"max_msgs_per_subject": 2, "discard": "new", "discard_new_per_subject": true,
                           "allow_rollup_hdrs": true}),
            steps: vec![a, a, ("s.a", Some("sub"))],
            acks: vec![Ok(1), Ok(2), Ok(3)],
            state: (1, 3, 3, vec![("s.a", 1)]),
        },
        Case {
            config: json!({"max_msgs_per_subject": 2, "discard": "new", "discard_new_per_subject": true,
                           "allow_rollup_hdrs": true}),
            steps: vec![a, a, ("s.a", Some("ALL")), b],
            acks: vec![Ok(1), Ok(2), Ok(3), Ok(4)],
            state: (2, 3, 4, vec![("s.a", 1), ("s.b", 1)]),
        },
        // ... but not a bad rollup value, nor one the stream does not allow.
        Case {
            config: json!({"max_msgs_per_subject": 2, "discard": "new", "discard_new_per_subject": true,
                           "allow_rollup_hdrs": true}),
            steps: vec![a, a, ("s.a", Some("bogus"))],
            acks: vec![
                Ok(1),
                Ok(2),
                Err((10111, "rollup value invalid: \"bogus\"")),
            ],
            state: (2, 1, 2, vec![("s.a", 2)]),
        },
        Case {
            config: json!({"max_msgs_per_subject": 2, "discard": "new", "discard_new_per_subject": true}),
            steps: vec![a, a, ("s.a", Some("sub"))],
            acks: vec![Ok(1), Ok(2), Err((10111, "rollup not permitted"))],
            state: (2, 1, 2, vec![("s.a", 2)]),
        },
        // The value in any case; an empty one is no rollup.
        Case {
            config: json!({"allow_rollup_hdrs": true}),
            steps: vec![a, b, ("s.a", Some("SUB")), ("s.a", Some(""))],
            acks: vec![Ok(1), Ok(2), Ok(3), Ok(4)],
            state: (3, 2, 4, vec![("s.a", 2), ("s.b", 1)]),
        },
        Case {
            config: json!({"allow_rollup_hdrs": true}),
            steps: vec![a, b, ("s.a", Some("Sub")), ("s.c", Some("aLL"))],
            acks: vec![Ok(1), Ok(2), Ok(3), Ok(4)],
            state: (1, 4, 4, vec![("s.c", 1)]),
        },
    ]
}

async fn api(nc: &async_nats::Client, subject: String, body: Value) -> Value {
    let payload = if body.is_null() {
        bytes::Bytes::new()
    } else {
        body.to_string().into()
    };
    let msg = tokio::time::timeout(WAIT, nc.request(subject, payload))
        .await
        .expect("answered in time")
        .expect("request");
    serde_json::from_slice(&msg.payload).expect("JSON")
}

async fn publish(nc: &async_nats::Client, (subject, rollup): Step) -> Result<u64, (u64, String)> {
    let mut headers = HeaderMap::new();
    if let Some(kind) = rollup {
        headers.insert("Nats-Rollup", kind);
    }
    let msg = tokio::time::timeout(
        WAIT,
        nc.request_with_headers(subject, headers, "order".into()),
    )
    .await
    .expect("answered in time")
    .expect("request");
    let r: Value = serde_json::from_slice(&msg.payload).expect("JSON");
    match r.get("error") {
        None => Ok(r["seq"].as_u64().expect("seq")),
        Some(e) => Err((
            e["err_code"].as_u64().expect("err_code"),
            e["description"].as_str().expect("description").to_owned(),
        )),
    }
}

#[tokio::test]
async fn rollup_and_discard_new_at_the_limits() {
    let server = TestServer::start(&[]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    for storage in ["file", "memory"] {
        for (i, case) in cases().into_iter().enumerate() {
            let _ = api(&nc, "$JS.API.STREAM.DELETE.S".into(), Value::Null).await;
            let mut config = case.config.clone();
            config["name"] = json!("S");
            config["subjects"] = json!(["s.>"]);
            config["storage"] = json!(storage);
            let r = api(&nc, "$JS.API.STREAM.CREATE.S".into(), config).await;
            assert!(r.get("error").is_none(), "case {i} ({storage}) create: {r}");
            let mut acks = Vec::new();
            for step in &case.steps {
                acks.push(publish(&nc, *step).await);
            }
            let want: Vec<Result<u64, (u64, String)>> = case
                .acks
                .iter()
                .map(|a| a.map_err(|(code, text)| (code, text.to_owned())))
                .collect();
            assert_eq!(acks, want, "case {i} ({storage}): {}", case.config);
            let info = api(
                &nc,
                "$JS.API.STREAM.INFO.S".into(),
                json!({"subjects_filter": ">"}),
            )
            .await;
            let s = &info["state"];
            let subjects: BTreeMap<String, u64> = s["subjects"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().expect("count")))
                        .collect()
                })
                .unwrap_or_default();
            let (msgs, first, last, per_subject) = &case.state;
            assert_eq!(
                (
                    s["messages"].as_u64(),
                    s["first_seq"].as_u64(),
                    s["last_seq"].as_u64()
                ),
                (Some(*msgs), Some(*first), Some(*last)),
                "case {i} ({storage}) state: {s}"
            );
            let want: BTreeMap<String, u64> = per_subject
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect();
            assert_eq!(subjects, want, "case {i} ({storage}) subjects");
        }
    }
}
