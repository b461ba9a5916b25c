//! Stream rules as nats-server 2.15 applies them, through raw `$JS.API` requests against the
//! real binary: which stream updates are refused (and with which error), what an accepted update
//! does to what is stored, sealed streams, consumer filters and start positions, and interest /
//! work-queue retention with several consumers. Every test here also passes against
//! nats-server 2.15.1 (`JSSERVER_TEST_BINARY=.../nats-server`).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::TestServer;
use serde_json::{json, Value};

async fn connect(server: &TestServer) -> async_nats::Client {
    async_nats::connect(server.url()).await.expect("connect")
}

/// A raw API request; returns the JSON response.
async fn api(nc: &async_nats::Client, subject: &str, body: Value) -> Value {
    let payload = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    let msg = tokio::time::timeout(
        Duration::from_secs(10),
        nc.request(subject.to_owned(), payload),
    )
    .await
    .expect("answered in time")
    .expect("request");
    serde_json::from_slice(&msg.payload).expect("JSON response")
}

/// A raw API request that must succeed; returns the response.
async fn api_ok(nc: &async_nats::Client, subject: &str, body: Value) -> Value {
    let r = api(nc, subject, body.clone()).await;
    assert!(r.get("error").is_none(), "{subject} {body}: {r}");
    r
}

/// Publishes `payload` on `subject` and waits for the PubAck; returns it.
async fn publish(nc: &async_nats::Client, subject: &str, payload: &str) -> Value {
    let msg = tokio::time::timeout(
        Duration::from_secs(10),
        nc.request(subject.to_owned(), Bytes::from(payload.to_owned())),
    )
    .await
    .expect("PubAck in time")
    .expect("PubAck");
    serde_json::from_slice(&msg.payload).expect("PubAck JSON")
}

fn error(code: u16, err_code: u32, description: &str) -> Value {
    json!({"code": code, "err_code": err_code, "description": description})
}

// ---------------------------------------------------------------------------------------------
// 1. Drop-in details: consumer limits on update, sealed streams.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn consumer_limits_below_an_existing_consumer_are_refused() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let base = json!({"name": "CL", "subjects": ["cl.>"], "storage": "memory"});
    api_ok(&nc, "$JS.API.STREAM.CREATE.CL", base.clone()).await;
    // C: max_ack_pending defaults to 1000, no inactive threshold (durable).
    api_ok(
        &nc,
        "$JS.API.CONSUMER.CREATE.CL.C",
        json!({"stream_name": "CL", "config": {"durable_name": "C", "ack_policy": "explicit"}}),
    )
    .await;
    // D: small max_ack_pending, a 60 s inactive threshold.
    api_ok(
        &nc,
        "$JS.API.CONSUMER.CREATE.CL.D",
        json!({"stream_name": "CL", "config": {"durable_name": "D", "ack_policy": "explicit",
            "max_ack_pending": 50, "inactive_threshold": 60_000_000_000u64}}),
    )
    .await;
    let with_limits = |limits: Value| {
        let mut cfg = base.clone();
        cfg["consumer_limits"] = limits;
        cfg
    };
    let cases = [
        (json!({"max_ack_pending": 100}), Some("C")),
        (json!({"inactive_threshold": 30_000_000_000u64}), Some("D")),
        (
            json!({"max_ack_pending": 1000, "inactive_threshold": 59_000_000_000u64}),
            Some("D"),
        ),
        (
            json!({"max_ack_pending": 1000, "inactive_threshold": 60_000_000_000u64}),
            None,
        ),
        (json!({"max_ack_pending": 5000}), None),
    ];
    for (limits, violator) in cases {
        let r = api(&nc, "$JS.API.STREAM.UPDATE.CL", with_limits(limits.clone())).await;
        match violator {
            Some(name) => assert_eq!(
                r["error"],
                error(
                    500,
                    10069,
                    &format!("change to limits violates consumers: {name}")
                ),
                "{limits}"
            ),
            None => {
                assert!(r.get("error").is_none(), "{limits}: {r}");
                assert_eq!(r["config"]["consumer_limits"], limits);
            }
        }
    }
    // Both violate: both named (in no particular order).
    let r = api(
        &nc,
        "$JS.API.STREAM.UPDATE.CL",
        with_limits(json!({"max_ack_pending": 10})),
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10069, "{r}");
    let text = r["error"]["description"].as_str().unwrap();
    assert!(
        text == "change to limits violates consumers: C, D"
            || text == "change to limits violates consumers: D, C",
        "{text}"
    );
    // The refused updates left the last accepted limits in place.
    let info = api_ok(&nc, "$JS.API.STREAM.INFO.CL", Value::Null).await;
    assert_eq!(
        info["config"]["consumer_limits"],
        json!({"max_ack_pending": 5000})
    );
}

#[tokio::test]
async fn a_sealed_stream_refuses_purge_and_delete_as_sealed() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let base = json!({"name": "SEAL", "subjects": ["seal.>"]});
    api_ok(&nc, "$JS.API.STREAM.CREATE.SEAL", base.clone()).await;
    publish(&nc, "seal.a", "one").await;
    publish(&nc, "seal.b", "two").await;
    let mut sealed = base.clone();
    sealed["sealed"] = json!(true);
    let r = api_ok(&nc, "$JS.API.STREAM.UPDATE.SEAL", sealed).await;
    // Sealing turns on deny_delete and deny_purge and discard new.
    assert_eq!(r["config"]["sealed"], true);
    assert_eq!(r["config"]["deny_delete"], true);
    assert_eq!(r["config"]["deny_purge"], true);
    assert_eq!(r["config"]["discard"], "new");
    let sealed_err = error(400, 10109, "invalid operation on sealed stream");
    for body in [
        Value::Null,
        json!({}),
        json!({"filter": "seal.a"}),
        json!({"seq": 2}),
    ] {
        let r = api(&nc, "$JS.API.STREAM.PURGE.SEAL", body.clone()).await;
        assert_eq!(r["error"], sealed_err, "purge {body}");
    }
    let r = api(&nc, "$JS.API.STREAM.MSG.DELETE.SEAL", json!({"seq": 1})).await;
    assert_eq!(r["error"], sealed_err);
    let r = api(
        &nc,
        "$JS.API.STREAM.MSG.DELETE.SEAL",
        json!({"seq": 1, "no_erase": true}),
    )
    .await;
    assert_eq!(r["error"], sealed_err);
    let r = publish(&nc, "seal.c", "three").await;
    assert_eq!(r["error"], sealed_err);
    let info = api_ok(&nc, "$JS.API.STREAM.INFO.SEAL", Value::Null).await;
    assert_eq!(info["state"]["messages"], 2);
    // A bad request is reported before a missing or sealed stream.
    let bad = error(400, 10003, "bad request");
    for stream in ["SEAL", "NOPE"] {
        let r = api(
            &nc,
            &format!("$JS.API.STREAM.PURGE.{stream}"),
            json!({"seq": 2, "keep": 1}),
        )
        .await;
        assert_eq!(r["error"], bad, "purge {stream}");
        let r = api(
            &nc,
            &format!("$JS.API.STREAM.MSG.DELETE.{stream}"),
            Value::Null,
        )
        .await;
        assert_eq!(r["error"], bad, "delete {stream}");
    }

    // Not sealed, only deny_delete / deny_purge: the "not permitted" errors.
    let deny =
        json!({"name": "DENY", "subjects": ["deny.>"], "deny_delete": true, "deny_purge": true});
    api_ok(&nc, "$JS.API.STREAM.CREATE.DENY", deny).await;
    publish(&nc, "deny.a", "one").await;
    let r = api(&nc, "$JS.API.STREAM.PURGE.DENY", Value::Null).await;
    assert_eq!(r["error"], error(500, 10110, "stream purge not permitted"));
    let r = api(&nc, "$JS.API.STREAM.MSG.DELETE.DENY", json!({"seq": 1})).await;
    assert_eq!(
        r["error"],
        error(500, 10057, "message delete not permitted")
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Which stream config fields an update may change, and what the change does to the store.
// ---------------------------------------------------------------------------------------------

/// One stream update from [`update_base`] (with `base` merged in, then the `before` updates
/// applied, each of which must succeed): `patch` merged into the config and sent as
/// STREAM.UPDATE (`name` in the subject is always `UPD`).
struct UpdateCase {
    what: &'static str,
    base: Value,
    before: Vec<Value>,
    patch: Value,
    expect: Expect,
}

enum Expect {
    /// Refused with this error.
    Refused(u16, u32, &'static str),
    /// Accepted; the stream then holds `messages` from `first_seq`, and each `(pointer, value)`
    /// holds in the response's config.
    Accepted {
        messages: u64,
        first_seq: u64,
        config: Vec<(&'static str, Value)>,
    },
}

/// `UPD` on `upd.>`, file storage, limits retention; five messages are published before each
/// case: upd.a, upd.b, upd.a, upd.b, upd.a (seqs 1–5, payload `payload-N`).
fn update_base() -> Value {
    json!({"name": "UPD", "subjects": ["upd.>"], "storage": "file", "retention": "limits"})
}

fn merged(base: &Value, patch: &Value) -> Value {
    let mut out = base.clone();
    for (k, v) in patch.as_object().expect("patch object") {
        if v.is_null() {
            out.as_object_mut().unwrap().remove(k);
        } else {
            out[k] = v.clone();
        }
    }
    out
}

fn refused(code: u16, err_code: u32, text: &'static str) -> Expect {
    Expect::Refused(code, err_code, text)
}

fn accepted(messages: u64, first_seq: u64, config: Vec<(&'static str, Value)>) -> Expect {
    Expect::Accepted {
        messages,
        first_seq,
        config,
    }
}

fn update_cases() -> Vec<UpdateCase> {
    let case = |what, base: Value, before: Vec<Value>, patch: Value, expect| UpdateCase {
        what,
        base,
        before,
        patch,
        expect,
    };
    let none = json!({});
    let invalid = |text| refused(500, 10052, text);
    vec![
        // Without consumers nothing is of interest: the switch removes every message at once,
        // and an interest stream without consumers keeps nothing it is sent.
        case(
            "limits to interest",
            none.clone(),
            vec![],
            json!({"retention": "interest"}),
            accepted(0, 6, vec![("/retention", json!("interest"))]),
        ),
        case(
            "interest to limits",
            json!({"retention": "interest"}),
            vec![],
            json!({"retention": "limits"}),
            accepted(0, 6, vec![("/retention", json!("limits"))]),
        ),
        case(
            "limits to workqueue",
            none.clone(),
            vec![],
            json!({"retention": "workqueue"}),
            invalid(
                "stream configuration update can not change retention policy to/from workqueue",
            ),
        ),
        case(
            "workqueue to limits",
            json!({"retention": "workqueue"}),
            vec![],
            json!({"retention": "limits"}),
            invalid(
                "stream configuration update can not change retention policy to/from workqueue",
            ),
        ),
        case(
            "workqueue to interest",
            json!({"retention": "workqueue"}),
            vec![],
            json!({"retention": "interest"}),
            invalid(
                "stream configuration update can not change retention policy to/from workqueue",
            ),
        ),
        case(
            "storage",
            none.clone(),
            vec![],
            json!({"storage": "memory"}),
            invalid("stream configuration update can not change storage type"),
        ),
        case(
            "subjects replaced: messages stay",
            none.clone(),
            vec![],
            json!({"subjects": ["other.>"]}),
            accepted(5, 1, vec![("/subjects", json!(["other.>"]))]),
        ),
        case(
            "subjects narrowed",
            none.clone(),
            vec![],
            json!({"subjects": ["upd.a", "upd.c"]}),
            accepted(5, 1, vec![("/subjects", json!(["upd.a", "upd.c"]))]),
        ),
        case(
            "max_msgs_per_subject lowered",
            none.clone(),
            vec![],
            json!({"max_msgs_per_subject": 1}),
            accepted(2, 4, vec![("/max_msgs_per_subject", json!(1))]),
        ),
        case(
            "max_msgs_per_subject 2",
            none.clone(),
            vec![],
            json!({"max_msgs_per_subject": 2}),
            accepted(4, 2, vec![]),
        ),
        case(
            "max_msgs lowered",
            none.clone(),
            vec![],
            json!({"max_msgs": 2}),
            accepted(2, 4, vec![("/max_msgs", json!(2))]),
        ),
        // With discard new a lowered limit removes nothing (it only refuses new messages).
        case(
            "max_msgs lowered, discard new",
            json!({"discard": "new"}),
            vec![],
            json!({"max_msgs": 2}),
            accepted(5, 1, vec![("/discard", json!("new"))]),
        ),
        case(
            "max_bytes lowered",
            none.clone(),
            vec![],
            json!({"max_bytes": 100}),
            accepted(2, 4, vec![("/max_bytes", json!(100))]),
        ),
        case(
            "sealed",
            none.clone(),
            vec![],
            json!({"sealed": true, "max_age": 3_600_000_000_000u64}),
            accepted(
                5,
                1,
                vec![
                    ("/sealed", json!(true)),
                    ("/deny_delete", json!(true)),
                    ("/deny_purge", json!(true)),
                    ("/discard", json!("new")),
                    ("/max_age", json!(0)),
                ],
            ),
        ),
        case(
            "unseal",
            none.clone(),
            vec![json!({"sealed": true})],
            json!({"sealed": false}),
            invalid("stream configuration update can not unseal a sealed stream"),
        ),
        case(
            "deny_delete on",
            none.clone(),
            vec![],
            json!({"deny_delete": true}),
            accepted(5, 1, vec![("/deny_delete", json!(true))]),
        ),
        case(
            "deny_delete off",
            json!({"deny_delete": true}),
            vec![],
            json!({"deny_delete": false}),
            invalid("stream configuration update can not cancel deny message deletes"),
        ),
        case(
            "deny_purge off",
            json!({"deny_purge": true}),
            vec![],
            json!({"deny_purge": false}),
            invalid("stream configuration update can not cancel deny purge"),
        ),
        case(
            "allow_msg_ttl on",
            none.clone(),
            vec![],
            json!({"allow_msg_ttl": true}),
            accepted(5, 1, vec![("/allow_msg_ttl", json!(true))]),
        ),
        case(
            "allow_msg_ttl off",
            json!({"allow_msg_ttl": true}),
            vec![],
            json!({"allow_msg_ttl": false}),
            invalid("message TTL status can not be disabled"),
        ),
        // Markers turn on message TTLs and roll-ups (unless pedantic).
        case(
            "subject_delete_marker_ttl without allow_msg_ttl",
            none.clone(),
            vec![],
            json!({"subject_delete_marker_ttl": 1_000_000_000u64}),
            accepted(
                5,
                1,
                vec![
                    ("/allow_msg_ttl", json!(true)),
                    ("/allow_rollup_hdrs", json!(true)),
                ],
            ),
        ),
        case(
            "subject_delete_marker_ttl without allow_msg_ttl, pedantic",
            none.clone(),
            vec![],
            json!({"subject_delete_marker_ttl": 1_000_000_000u64, "pedantic": true}),
            invalid("subject delete marker cannot be set if message TTLs are disabled"),
        ),
        case(
            "subject_delete_marker_ttl below 1s",
            json!({"allow_msg_ttl": true}),
            vec![],
            json!({"subject_delete_marker_ttl": 500_000_000u64}),
            invalid("subject delete marker TTL must be at least 1 second"),
        ),
        case(
            "markers, then allow_msg_ttl off",
            none.clone(),
            vec![json!({"subject_delete_marker_ttl": 1_000_000_000u64})],
            json!({"subject_delete_marker_ttl": null, "allow_msg_ttl": false}),
            invalid("message TTL status can not be disabled"),
        ),
        case(
            "subject_delete_marker_ttl",
            json!({"allow_msg_ttl": true}),
            vec![],
            json!({"subject_delete_marker_ttl": 1_000_000_000u64}),
            accepted(
                5,
                1,
                vec![("/subject_delete_marker_ttl", json!(1_000_000_000u64))],
            ),
        ),
        case(
            "subject_delete_marker_ttl removed",
            json!({"allow_msg_ttl": true,
            "subject_delete_marker_ttl": 1_000_000_000u64}),
            vec![],
            json!({"subject_delete_marker_ttl": null}),
            accepted(5, 1, vec![]),
        ),
        case(
            "discard new",
            none.clone(),
            vec![],
            json!({"discard": "new"}),
            accepted(5, 1, vec![("/discard", json!("new"))]),
        ),
        case(
            "discard old",
            json!({"discard": "new"}),
            vec![],
            json!({"discard": "old"}),
            accepted(5, 1, vec![("/discard", json!("old"))]),
        ),
        case(
            "duplicate_window",
            none.clone(),
            vec![],
            json!({"duplicate_window": 1_000_000_000u64}),
            accepted(5, 1, vec![("/duplicate_window", json!(1_000_000_000u64))]),
        ),
        case(
            "duplicate_window above max_age",
            json!({"max_age": 10_000_000_000u64}),
            vec![],
            json!({"duplicate_window": 20_000_000_000u64}),
            invalid("duplicates window can not be larger then max age"),
        ),
        case(
            "max_age lowered",
            none.clone(),
            vec![],
            json!({"max_age": 3_600_000_000_000u64}),
            accepted(
                5,
                1,
                vec![
                    ("/max_age", json!(3_600_000_000_000u64)),
                    ("/duplicate_window", json!(120_000_000_000u64)),
                ],
            ),
        ),
        case(
            "mirror added",
            none.clone(),
            vec![],
            json!({"subjects": null, "mirror": {"name": "SRC"}}),
            refused(400, 10055, "stream mirror configuration can not be updated"),
        ),
        case(
            "name mismatch",
            none.clone(),
            vec![],
            json!({"name": "OTHER"}),
            refused(400, 10056, "stream name in subject does not match request"),
        ),
        case(
            "num_replicas",
            none.clone(),
            vec![],
            json!({"num_replicas": 3}),
            refused(
                500,
                10074,
                "replicas > 1 not supported in non-clustered mode",
            ),
        ),
        case(
            "max_consumers",
            none.clone(),
            vec![],
            json!({"max_consumers": 5}),
            accepted(5, 1, vec![("/max_consumers", json!(5))]),
        ),
        case(
            "allow_rollup_hdrs and allow_direct",
            none.clone(),
            vec![],
            json!({"allow_rollup_hdrs": true, "allow_direct": true}),
            accepted(
                5,
                1,
                vec![
                    ("/allow_rollup_hdrs", json!(true)),
                    ("/allow_direct", json!(true)),
                ],
            ),
        ),
        case(
            "deny_purge with rollup",
            none.clone(),
            vec![],
            json!({"allow_rollup_hdrs": true, "deny_purge": true}),
            invalid("roll-ups require the purge permission"),
        ),
        case(
            "max_msg_size",
            none.clone(),
            vec![],
            json!({"max_msg_size": 8}),
            accepted(5, 1, vec![("/max_msg_size", json!(8))]),
        ),
    ]
}

#[tokio::test]
async fn stream_updates_accept_and_refuse_what_the_reference_does() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let mut wrong = Vec::new();
    // A stream of its own per case: nats-server 2.15.1 was seen to give a file stream
    // re-created at once under a just-deleted name the old one's next sequence.
    for (n, c) in update_cases().into_iter().enumerate() {
        let name = format!("UPD{n}");
        let stream_api = |op: &str| format!("$JS.API.STREAM.{op}.{name}");
        let mut base = merged(&update_base(), &c.base);
        base["name"] = json!(name);
        if n > 0 {
            let _ = api(
                &nc,
                &format!("$JS.API.STREAM.DELETE.UPD{}", n - 1),
                Value::Null,
            )
            .await;
        }
        api_ok(&nc, &stream_api("CREATE"), base.clone()).await;
        for (i, subject) in ["upd.a", "upd.b", "upd.a", "upd.b", "upd.a"]
            .iter()
            .enumerate()
        {
            let ack = publish(&nc, subject, &format!("payload-{}", i + 1)).await;
            assert_eq!(ack["seq"], i as u64 + 1, "{}: {ack}", c.what);
        }
        let mut cfg = base;
        for before in &c.before {
            cfg = merged(&cfg, before);
            api_ok(&nc, &stream_api("UPDATE"), cfg.clone()).await;
        }
        let r = api(&nc, &stream_api("UPDATE"), merged(&cfg, &c.patch)).await;
        let info = api_ok(&nc, &stream_api("INFO"), Value::Null).await;
        let state = (&info["state"]["messages"], &info["state"]["first_seq"]);
        match &c.expect {
            Expect::Refused(code, err_code, text) => {
                if r["error"] != error(*code, *err_code, text) {
                    wrong.push(format!("{}: {}", c.what, r["error"]));
                }
                if state != (&json!(5), &json!(1)) {
                    wrong.push(format!("{}: refused but state {state:?}", c.what));
                }
            }
            Expect::Accepted {
                messages,
                first_seq,
                config,
            } => {
                if r.get("error").is_some() {
                    wrong.push(format!("{}: {}", c.what, r["error"]));
                    continue;
                }
                if state != (&json!(messages), &json!(first_seq)) {
                    wrong.push(format!("{}: state {state:?}", c.what));
                }
                for (pointer, want) in config {
                    let got = r["config"].pointer(pointer).unwrap_or(&Value::Null);
                    if got != want {
                        wrong.push(format!("{}: {pointer} = {got}", c.what));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Limits → interest with consumers: what some consumer still needs stays, what every
/// matching consumer is done with goes, and what no consumer's filter matches stays.
#[tokio::test]
async fn switching_to_interest_keeps_what_consumers_need() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let cases = [
        // (consumer config, messages left, the consumer's num_pending)
        (json!({"durable_name": "C", "ack_policy": "explicit"}), 5, 5),
        (
            json!({"durable_name": "C", "ack_policy": "explicit", "filter_subject": "upd.a"}),
            5,
            3,
        ),
        (
            json!({"durable_name": "C", "ack_policy": "explicit", "filter_subject": "upd.b"}),
            5,
            2,
        ),
        (
            json!({"durable_name": "C", "ack_policy": "explicit", "deliver_policy": "new"}),
            0,
            0,
        ),
        (json!({"durable_name": "C", "ack_policy": "none"}), 5, 5),
    ];
    for (consumer, messages, pending) in cases {
        let _ = api(&nc, "$JS.API.STREAM.DELETE.UPD", Value::Null).await;
        let base = update_base();
        api_ok(&nc, "$JS.API.STREAM.CREATE.UPD", base.clone()).await;
        for subject in ["upd.a", "upd.b", "upd.a", "upd.b", "upd.a"] {
            publish(&nc, subject, "x").await;
        }
        api_ok(
            &nc,
            "$JS.API.CONSUMER.CREATE.UPD.C",
            json!({"stream_name": "UPD", "config": consumer}),
        )
        .await;
        let patch = json!({"retention": "interest"});
        api_ok(&nc, "$JS.API.STREAM.UPDATE.UPD", merged(&base, &patch)).await;
        let info = api_ok(&nc, "$JS.API.STREAM.INFO.UPD", Value::Null).await;
        assert_eq!(info["state"]["messages"], messages, "{consumer}");
        let ci = api_ok(&nc, "$JS.API.CONSUMER.INFO.UPD.C", Value::Null).await;
        assert_eq!(ci["num_pending"], pending, "{consumer}");
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Consumer filters and start positions.
// ---------------------------------------------------------------------------------------------

/// Where a created consumer starts: `(ack_floor.stream_seq, num_pending)`, or the error.
type Started = Result<(u64, u64), Value>;

/// Consumer creates on `F` (`f.>`, messages f.a, f.b, f.a, f.b, f.a): which filter sets are
/// refused, and where the others start (`delivered.stream_seq` = `ack_floor.stream_seq` =
/// start − 1, `num_pending`).
#[tokio::test]
async fn consumer_filters_and_start_positions() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    api_ok(
        &nc,
        "$JS.API.STREAM.CREATE.F",
        json!({"name": "F", "subjects": ["f.>"]}),
    )
    .await;
    for subject in ["f.a", "f.b", "f.a", "f.b", "f.a"] {
        publish(&nc, subject, "x").await;
    }
    let overlap = || Err(error(400, 10138, "consumer subject filters cannot overlap"));
    let started = |floor: u64, pending: u64| Ok((floor, pending));
    let policy = |text: &str| Err(error(400, 10094, text));
    let cases: Vec<(Value, Started)> = vec![
        (json!({"filter_subjects": ["f.a", "f.a"]}), overlap()),
        (json!({"filter_subjects": ["f.*", "f.a"]}), overlap()),
        (json!({"filter_subjects": ["f.>", "f.a.b"]}), overlap()),
        // Filters that only intersect are not an overlap.
        (json!({"filter_subjects": ["f.a.>", "f.*.b"]}), started(0, 0)),
        (json!({"filter_subjects": ["f.a", "f.b"]}), started(0, 5)),
        // Filters outside the stream's subjects are accepted and match nothing.
        (json!({"filter_subject": "g.a"}), started(0, 0)),
        (json!({"filter_subjects": ["f.a", "g.a"]}), started(0, 3)),
        (json!({"filter_subject": "*"}), started(0, 0)),
        (json!({"filter_subject": ">"}), started(0, 5)),
        (
            json!({"filter_subject": "f.a", "filter_subjects": ["f.b"]}),
            Err(error(400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified")),
        ),
        (
            json!({"filter_subjects": ["f.a", ""]}),
            Err(error(400, 10139, "consumer filter in FilterSubjects cannot be empty")),
        ),
        (
            json!({"deliver_policy": "by_start_sequence", "opt_start_seq": 0}),
            policy("consumer delivery policy is deliver by start sequence, but optional start sequence is not set"),
        ),
        (json!({"deliver_policy": "by_start_sequence", "opt_start_seq": 3}), started(2, 3)),
        // After the last message: nothing pending, the floor just below the start.
        (json!({"deliver_policy": "by_start_sequence", "opt_start_seq": 9}), started(8, 0)),
        (
            json!({"deliver_policy": "by_start_sequence", "opt_start_seq": 3, "filter_subject": "f.b"}),
            started(2, 1),
        ),
        (
            json!({"deliver_policy": "by_start_time", "opt_start_time": "2099-01-01T00:00:00Z"}),
            started(5, 0),
        ),
        (
            json!({"deliver_policy": "by_start_time", "opt_start_time": "2000-01-01T00:00:00Z"}),
            started(0, 5),
        ),
        (
            json!({"deliver_policy": "by_start_time"}),
            policy("consumer delivery policy is deliver by start time, but optional start time is not set"),
        ),
        (
            json!({"deliver_policy": "all", "opt_start_seq": 2}),
            policy("consumer delivery policy is deliver all, but optional start sequence is also set"),
        ),
        (
            json!({"deliver_policy": "last_per_subject"}),
            policy("consumer delivery policy is deliver last per subject, but optional filter subject is not set"),
        ),
        (json!({"deliver_policy": "last", "filter_subject": "f.b"}), started(3, 1)),
    ];
    let mut wrong = Vec::new();
    for (i, (extra, want)) in cases.into_iter().enumerate() {
        let name = format!("D{i}");
        let mut config = json!({"durable_name": name, "ack_policy": "explicit"});
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        let r = api(
            &nc,
            &format!("$JS.API.CONSUMER.CREATE.F.{name}"),
            json!({"stream_name": "F", "config": config}),
        )
        .await;
        let got = match r.get("error") {
            Some(e) => Err(e.clone()),
            None => {
                let floor = &r["ack_floor"]["stream_seq"];
                if &r["delivered"]["stream_seq"] != floor {
                    wrong.push(format!(
                        "{extra}: delivered {} ack_floor {floor}",
                        r["delivered"]
                    ));
                }
                Ok((floor.as_u64().unwrap(), r["num_pending"].as_u64().unwrap()))
            }
        };
        if got != want {
            wrong.push(format!("{extra}: got {got:?}, want {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Filters that intersect: a message both match is delivered and counted once.
#[tokio::test]
async fn intersecting_filters_deliver_a_message_once() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    api_ok(
        &nc,
        "$JS.API.STREAM.CREATE.X",
        json!({"name": "X", "subjects": ["x.>"]}),
    )
    .await;
    for subject in ["x.a.b", "x.a.c", "x.z.b", "x.z.c", "x.a.b"] {
        publish(&nc, subject, "x").await;
    }
    let r = api_ok(
        &nc,
        "$JS.API.CONSUMER.CREATE.X.C",
        json!({"stream_name": "X", "config": {"durable_name": "C", "ack_policy": "explicit",
            "filter_subjects": ["x.a.>", "x.*.b"]}}),
    )
    .await;
    // x.a.b, x.a.c, x.z.b, x.a.b: 4 messages, x.a.b matching both filters counted once.
    assert_eq!(r["num_pending"], 4, "{r}");
    let js = async_nats::jetstream::new(nc.clone());
    let stream = js.get_stream("X").await.unwrap();
    let consumer: async_nats::jetstream::consumer::PullConsumer =
        stream.get_consumer("C").await.unwrap();
    let got = common::fetch(&consumer, 10, Duration::from_secs(1)).await;
    let seqs: Vec<u64> = got
        .iter()
        .map(|m| m.info().unwrap().stream_sequence)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 5]);
}

/// `deliver_policy: last_per_subject` on pull consumers: the last message of each subject the
/// filter matches, in stream order (not the earlier ones, even between them), then every new
/// message. The consumer starts just below the first of those: `delivered` = `ack_floor` =
/// that − 1, `num_pending` = how many subjects; with nothing matching it starts at the last
/// stream seq.
#[tokio::test]
async fn last_per_subject_delivers_the_last_of_each_subject_then_new_ones() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    api_ok(
        &nc,
        "$JS.API.STREAM.CREATE.L",
        json!({"name": "L", "subjects": ["l.>"], "storage": "memory"}),
    )
    .await;
    // 1 l.b, 2 l.a, 3 l.b, 4 l.c, 5 l.b, 6 l.d.x: l.b's 3 lies between last seqs 2 and 4.
    for subject in ["l.b", "l.a", "l.b", "l.c", "l.b", "l.d.x"] {
        publish(&nc, subject, "x").await;
    }
    // (filter, start floor, num_pending at create, first deliveries, then after l.a and l.e
    // are published (7, 8): num_pending and deliveries)
    type Case = (Value, u64, u64, Vec<u64>, u64, Vec<u64>);
    let cases: Vec<Case> = vec![
        (
            json!({"filter_subject": "l.>"}),
            1,
            4,
            vec![2, 4, 5, 6],
            2,
            vec![7, 8],
        ),
        (
            json!({"filter_subject": ">"}),
            1,
            4,
            vec![2, 4, 5, 6],
            2,
            vec![7, 8],
        ),
        (
            json!({"filter_subject": "l.*"}),
            1,
            3,
            vec![2, 4, 5],
            2,
            vec![7, 8],
        ),
        (json!({"filter_subject": "l.a"}), 1, 1, vec![2], 1, vec![7]),
        (json!({"filter_subject": "l.b"}), 4, 1, vec![5], 0, vec![]),
        (
            json!({"filter_subjects": ["l.a", "l.b"]}),
            1,
            2,
            vec![2, 5],
            1,
            vec![7],
        ),
        (json!({"filter_subject": "m.x"}), 5, 0, vec![], 0, vec![]),
    ];
    let mut wrong = Vec::new();
    let name = |i: usize| format!("LPS{i}");
    for (i, (filter, floor, pending, first, _, _)) in cases.iter().enumerate() {
        let mut config = json!({"durable_name": name(i), "ack_policy": "explicit",
            "deliver_policy": "last_per_subject"});
        for (k, v) in filter.as_object().unwrap() {
            config[k] = v.clone();
        }
        let r = api_ok(
            &nc,
            &format!("$JS.API.CONSUMER.CREATE.L.{}", name(i)),
            json!({"stream_name": "L", "config": config}),
        )
        .await;
        let got = (
            &r["delivered"]["stream_seq"],
            &r["ack_floor"]["stream_seq"],
            &r["num_pending"],
        );
        if got != (&json!(floor), &json!(floor), &json!(pending)) {
            wrong.push(format!("{filter}: created {got:?}"));
        }
        // Two first (num_pending counts down), then the rest.
        let mut got = common::pull(&nc, "L", &name(i), 2).await;
        let ci = api_ok(
            &nc,
            &format!("$JS.API.CONSUMER.INFO.L.{}", name(i)),
            Value::Null,
        )
        .await;
        let left = pending.saturating_sub(got.len() as u64);
        if ci["num_pending"] != left {
            wrong.push(format!(
                "{filter}: num_pending {} after 2",
                ci["num_pending"]
            ));
        }
        got.extend(common::pull(&nc, "L", &name(i), 10).await);
        if common::seqs(&got) != *first {
            wrong.push(format!("{filter}: delivered {:?}", common::seqs(&got)));
        }
        let ci = api_ok(
            &nc,
            &format!("$JS.API.CONSUMER.INFO.L.{}", name(i)),
            Value::Null,
        )
        .await;
        let last = first.last().copied().unwrap_or(*floor);
        if (&ci["delivered"]["stream_seq"], &ci["num_pending"]) != (&json!(last), &json!(0)) {
            wrong.push(format!(
                "{filter}: delivered {} num_pending {} at the end",
                ci["delivered"], ci["num_pending"]
            ));
        }
    }
    publish(&nc, "l.a", "new").await;
    publish(&nc, "l.e", "new").await;
    for (i, (filter, _, _, _, pending, then)) in cases.iter().enumerate() {
        let ci = api_ok(
            &nc,
            &format!("$JS.API.CONSUMER.INFO.L.{}", name(i)),
            Value::Null,
        )
        .await;
        if ci["num_pending"] != *pending {
            wrong.push(format!(
                "{filter}: num_pending {} after new",
                ci["num_pending"]
            ));
        }
        let got = common::seqs(&common::pull(&nc, "L", &name(i), 10).await);
        if got != *then {
            wrong.push(format!("{filter}: then delivered {got:?}"));
        }
    }

    // Created now (last of l.*: c 4, b 5, a 7, e 8), then two more published: those count
    // and come after the four, l.a's 9 too.
    let r = api_ok(
        &nc,
        "$JS.API.CONSUMER.CREATE.L.LATE",
        json!({"stream_name": "L", "config": {"durable_name": "LATE", "ack_policy": "explicit",
            "deliver_policy": "last_per_subject", "filter_subject": "l.*"}}),
    )
    .await;
    assert_eq!(
        (&r["ack_floor"]["stream_seq"], &r["num_pending"]),
        (&json!(3), &json!(4))
    );
    publish(&nc, "l.a", "late").await;
    publish(&nc, "l.f", "late").await;
    let ci = api_ok(&nc, "$JS.API.CONSUMER.INFO.L.LATE", Value::Null).await;
    assert_eq!(ci["num_pending"], 6);
    let got = common::seqs(&common::pull(&nc, "L", "LATE", 20).await);
    assert_eq!(got, [4, 5, 7, 8, 9, 10]);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// With `max_msgs_per_subject: 1` every stored message is its subject's last: a
/// `last_per_subject` consumer then starts at the stream's first message, as `all` would
/// (nats-server's shortcut), whatever its filter matches.
#[tokio::test]
async fn last_per_subject_with_one_message_per_subject_starts_at_the_first() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    api_ok(
        &nc,
        "$JS.API.STREAM.CREATE.M",
        json!({"name": "M", "subjects": ["m.>"], "storage": "memory",
            "max_msgs_per_subject": 1}),
    )
    .await;
    // m.a 1 (replaced by 3), m.b 2, m.a 3, m.c 4: 2, 3, 4 stored.
    for subject in ["m.a", "m.b", "m.a", "m.c"] {
        publish(&nc, subject, "x").await;
    }
    let cases = [
        ("m.a", 1, vec![3]),
        ("m.>", 3, vec![2, 3, 4]),
        ("m.c", 1, vec![4]),
        ("x.y", 0, vec![]),
    ];
    for (i, (filter, pending, seqs)) in cases.into_iter().enumerate() {
        let name = format!("C{i}");
        let r = api_ok(
            &nc,
            &format!("$JS.API.CONSUMER.CREATE.M.{name}"),
            json!({"stream_name": "M", "config": {"durable_name": name, "ack_policy": "explicit",
                "deliver_policy": "last_per_subject", "filter_subject": filter}}),
        )
        .await;
        assert_eq!(
            (&r["ack_floor"]["stream_seq"], &r["num_pending"]),
            (&json!(1), &json!(pending)),
            "{filter}"
        );
        let got = common::seqs(&common::pull(&nc, "M", &name, 10).await);
        assert_eq!(got, seqs, "{filter}");
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Request bodies.
// ---------------------------------------------------------------------------------------------

/// STREAM.PURGE reads its body as JSON only when it starts (after JSON whitespace) with `{`
/// or `[`: anything else (`hello`, `1`, `"text"`, `null`) is a purge of everything, as an
/// empty body is. An array is refused, as is bad JSON, with 10025 before the stream is looked
/// up.
#[tokio::test]
async fn purge_bodies_that_are_not_json_objects_purge_everything() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let raw = |subject: &'static str, body: &'static str| {
        let nc = nc.clone();
        async move {
            let msg = tokio::time::timeout(
                Duration::from_secs(10),
                nc.request(subject, Bytes::from_static(body.as_bytes())),
            )
            .await
            .expect("answered in time")
            .expect("request");
            serde_json::from_slice::<Value>(&msg.payload).expect("JSON response")
        }
    };
    let invalid = |text: &str| error(400, 10025, &format!("invalid JSON: {text}"));
    let array = invalid(
        "json: cannot unmarshal array into Go value of type server.JSApiStreamPurgeRequest",
    );
    // (body, Ok(messages purged) or the error)
    let cases: Vec<(&'static str, Result<u64, Value>)> = vec![
        ("hello", Ok(3)),
        ("1", Ok(3)),
        ("\"text\"", Ok(3)),
        ("null", Ok(3)),
        (" \r\n\t", Ok(3)),
        ("{}", Ok(3)),
        (" \n{\"filter\": \"p.a\"}", Ok(2)),
        ("[]", Err(array.clone())),
        ("\n[1]", Err(array.clone())),
        ("{", Err(invalid("unexpected EOF"))),
        (
            "{\"unknown\": 1}",
            Err(invalid("json: unknown field \"unknown\"")),
        ),
    ];
    let mut wrong = Vec::new();
    for (body, want) in cases {
        let _ = api(&nc, "$JS.API.STREAM.DELETE.P", Value::Null).await;
        api_ok(
            &nc,
            "$JS.API.STREAM.CREATE.P",
            json!({"name": "P", "subjects": ["p.>"], "storage": "memory"}),
        )
        .await;
        for subject in ["p.a", "p.b", "p.a"] {
            publish(&nc, subject, "x").await;
        }
        let r = raw("$JS.API.STREAM.PURGE.P", body).await;
        let info = api_ok(&nc, "$JS.API.STREAM.INFO.P", Value::Null).await;
        let left = &info["state"]["messages"];
        match want {
            Ok(purged) => {
                if (&r["success"], &r["purged"], left)
                    != (&json!(true), &json!(purged), &json!(3 - purged))
                {
                    wrong.push(format!("{body:?}: {r}, {left} left"));
                }
            }
            Err(err) => {
                if (&r["error"], left) != (&err, &json!(3)) {
                    wrong.push(format!("{body:?}: {r}, {left} left"));
                }
            }
        }
    }
    // Not JSON: the stream is looked up (and its seal checked) as for an empty body.
    let r = raw("$JS.API.STREAM.PURGE.NOPE", "hello").await;
    assert_eq!(r["error"], error(404, 10059, "stream not found"));
    let r = raw("$JS.API.STREAM.PURGE.NOPE", "[]").await;
    assert_eq!(r["error"], array);
    api_ok(
        &nc,
        "$JS.API.STREAM.UPDATE.P",
        json!({"name": "P", "subjects": ["p.>"], "storage": "memory", "sealed": true}),
    )
    .await;
    let r = raw("$JS.API.STREAM.PURGE.P", "hello").await;
    assert_eq!(
        r["error"],
        error(400, 10109, "invalid operation on sealed stream")
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
