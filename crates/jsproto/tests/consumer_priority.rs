//! Priority groups (ADR-42) on virtual time, as nats-server 2.15 runs them (the same
//! behaviours are checked end to end against it in `tests/jetstream_priority_groups.rs`):
//! overflow gates that open when the backlog crosses a threshold, a pin handed over after
//! `priority_timeout`, `CONSUMER.UNPIN`, and the prioritized line.

#[path = "consumer_harness.rs"]
mod harness;

use std::time::Duration;

use harness::*;
use jsproto::consumer::{Action, Advisory, ConsumerConfig, PriorityPolicy, PullStatus};

fn with_policy(policy: PriorityPolicy) -> ConsumerConfig {
    ConsumerConfig {
        priority_policy: policy,
        priority_groups: vec!["jobs".into()],
        ..explicit()
    }
}

fn pinned(ttl: Duration) -> ConsumerConfig {
    with_policy(PriorityPolicy::PinnedClient { ttl })
}

/// The pin ids the deliveries among `actions` carry.
fn pins(actions: &[Action]) -> Vec<Option<String>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Deliver { pin_id, .. } => Some(pin_id.as_deref().map(str::to_owned)),
            _ => None,
        })
        .collect()
}

fn advisories(actions: &[Action]) -> Vec<Advisory> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Advisory(adv) => Some(adv.clone()),
            _ => None,
        })
        .collect()
}

const EXPIRES_60S: &str = r#""expires":60000000000"#;

fn body(extra: &str) -> String {
    format!(r#"{{"batch":1,{EXPIRES_60S},"group":"jobs"{extra}}}"#)
}

#[test]
fn overflow_pull_waits_until_the_backlog_reaches_min_pending() {
    let mut h = Harness::new(with_policy(PriorityPolicy::Overflow));
    h.publish_n(2);
    assert!(deliveries(&h.pull("standby", &body(r#","min_pending":4"#))).is_empty());
    assert!(deliveries(&h.publish()).is_empty(), "backlog 3 < 4");
    let out = h.publish();
    assert_eq!(deliveries(&out), [("standby".into(), 1, 1)], "backlog 4");
    assert_eq!(h.info().num_pending, 3);
}

#[test]
fn a_no_wait_pull_the_overflow_gate_holds_back_gets_404_at_once() {
    // As nats-server 2.15.1 (tests/scripts/priority_pull.py runs it there): a no_wait standby
    // whose min_pending is not met ends with 404 instead of waiting; a gate that is met serves.
    let mut h = Harness::new(with_policy(PriorityPolicy::Overflow));
    h.publish_n(3);
    let out = h.pull(
        "standby",
        r#"{"batch":1,"no_wait":true,"group":"jobs","min_pending":5}"#,
    );
    assert!(deliveries(&out).is_empty());
    assert_eq!(statuses(&out), [("standby".into(), PullStatus::NoMessages)]);
    assert_eq!(h.info().num_waiting, 0);
    let out = h.pull(
        "standby",
        r#"{"batch":1,"no_wait":true,"group":"jobs","min_pending":3}"#,
    );
    assert_eq!(deliveries(&out), [("standby".into(), 1, 1)]);
}

#[test]
fn overflow_either_threshold_is_enough_and_plain_pulls_pass_the_standby() {
    let mut h = Harness::new(with_policy(PriorityPolicy::Overflow));
    h.publish_n(3);
    // Queued first, but gated (3 pending < 10, 0 ack pending < 2): the plain request behind
    // it gets the message.
    h.pull("standby", &body(r#","min_pending":10,"min_ack_pending":2"#));
    let out = h.pull("worker", &body(""));
    assert_eq!(deliveries(&out), [("worker".into(), 1, 1)]);
    // The second delivery makes 2 ack pending: the standby's min_ack_pending is met for the
    // message after it, in the same round.
    let out = h.pull("worker", &body(""));
    assert_eq!(
        deliveries(&out),
        [("worker".into(), 2, 1), ("standby".into(), 3, 1)]
    );
}

#[test]
fn overflow_counts_a_redelivery_as_nats_server_does() {
    // nats-server checks `npc + 1` with npc already lowered for a new message, so a
    // redelivery counts one more than what is pending.
    let mut h = Harness::new(ConsumerConfig {
        ack_wait: secs(5),
        ..with_policy(PriorityPolicy::Overflow)
    });
    h.publish();
    assert_eq!(deliveries(&h.pull("w", &body(""))).len(), 1);
    h.advance(secs(6));
    let out = h.pull("standby", &body(r#","min_pending":1"#));
    assert_eq!(deliveries(&out), [("standby".into(), 1, 2)]);
}

#[test]
fn pin_goes_to_the_first_request_and_only_its_id_is_served() {
    let mut h = Harness::new(pinned(secs(600)));
    h.publish_n(3);
    let out = h.pull("a", &body(""));
    let pin = pins(&out)[0].clone().expect("a pin id");
    assert_eq!(
        advisories(&out),
        [Advisory::Pinned {
            group: "jobs".into(),
            pin_id: pin.clone()
        }]
    );
    assert_eq!(
        h.consumer.pin().map(|(id, _)| id.to_owned()),
        Some(pin.clone())
    );
    // Without the id: waits; with another: 423 at once; with it: served.
    assert!(h.pull("b", &body("")).is_empty());
    assert_eq!(
        codes(&h.pull("c", &body(r#","id":"zzz""#))),
        [(423, "Nats-Pin-Id mismatch".into())]
    );
    let out = h.pull("a", &body(&format!(r#","id":"{pin}""#)));
    assert_eq!(deliveries(&out), [("a".into(), 2, 1)]);
    assert_eq!(pins(&out), [Some(pin)]);
    // b's request is still waiting, unserved, and expires with 408.
    let out = h.advance(secs(61));
    assert_eq!(codes(&out)[0].0, 408);
}

#[test]
fn pin_runs_out_after_priority_timeout_and_passes_to_a_waiting_request() {
    let mut h = Harness::new(pinned(secs(10)));
    h.publish_n(2);
    let out = h.pull("a", &body(""));
    let pin = pins(&out)[0].clone().unwrap();
    assert!(h.pull("b", &body("")).is_empty(), "b has no id: it waits");
    // A request with the id at 8 s renews the pin to 18 s (and gets message 2).
    h.advance(secs(8));
    let out = h.pull(
        "a",
        &format!(r#"{{"batch":1,"expires":1000000000,"group":"jobs","id":"{pin}"}}"#),
    );
    assert_eq!(deliveries(&out), [("a".into(), 2, 1)]);
    h.advance(secs(4));
    assert!(deliveries(&h.publish()).is_empty(), "still pinned at 12 s");
    assert_eq!(h.consumer.poll_timeout(), Some(h.start + secs(18)));
    let out = h.advance(secs(6));
    let advs = advisories(&out);
    assert_eq!(
        advs[0],
        Advisory::Unpinned {
            group: "jobs".into(),
            reason: "timeout"
        }
    );
    // b's request (waiting since 0 s, expires at 60 s) takes a new pin with message 3.
    assert_eq!(deliveries(&out), [("b".into(), 3, 1)]);
    let new_pin = pins(&out)[0].clone().unwrap();
    assert_ne!(new_pin, pin);
    assert!(matches!(&advs[1], Advisory::Pinned { pin_id, .. } if *pin_id == new_pin));
}

#[test]
fn unpin_releases_and_a_request_holding_the_old_id_ends_with_wrong_pin_id() {
    let mut h = Harness::new(pinned(secs(600)));
    h.publish();
    let out = h.pull("a", r#"{"batch":5,"expires":60000000000,"group":"jobs"}"#);
    assert_eq!(deliveries(&out).len(), 1);
    let mut out = Vec::new();
    assert!(!h.consumer.unpin(h.now, "other", &h.stream, &mut out));
    assert!(out.is_empty());
    assert!(h.consumer.unpin(h.now, "jobs", &h.stream, &mut out));
    assert_eq!(
        advisories(&out),
        [Advisory::Unpinned {
            group: "jobs".into(),
            reason: "admin"
        }]
    );
    assert_eq!(h.consumer.pin(), None);
    h.pull("b", &body(""));
    let out = h.publish();
    assert_eq!(codes(&out), [(423, "Nats-Wrong-Pin-Id".into())]);
    assert_eq!(statuses(&out)[0].0, "a");
    assert_eq!(deliveries(&out), [("b".into(), 2, 1)]);
}

#[test]
fn a_body_without_group_fields_is_served_without_a_pin() {
    let mut h = Harness::new(pinned(secs(600)));
    h.publish();
    let out = h.pull("a", "1");
    assert_eq!(deliveries(&out).len(), 1);
    assert_eq!(pins(&out), [None]);
    assert_eq!(h.consumer.pin(), None);
}

#[test]
fn prioritized_line_orders_by_priority_then_arrival() {
    let mut h = Harness::new(with_policy(PriorityPolicy::Prioritized));
    h.pull("p5", &body(r#","priority":5"#));
    h.pull("none", "1");
    h.pull("p1", &body(r#","priority":1"#));
    h.pull("p0", &body(""));
    h.pull("p1b", &body(r#","priority":1"#));
    let out = h.publish_n(5);
    let order: Vec<String> = deliveries(&out).into_iter().map(|(r, _, _)| r).collect();
    assert_eq!(order, ["p0", "p1", "p1b", "p5", "none"]);
}

#[test]
fn prioritized_batch_requeues_behind_its_own_priority() {
    let mut h = Harness::new(with_policy(PriorityPolicy::Prioritized));
    h.pull(
        "a",
        r#"{"batch":2,"expires":60000000000,"group":"jobs","priority":1}"#,
    );
    h.pull(
        "b",
        r#"{"batch":2,"expires":60000000000,"group":"jobs","priority":1}"#,
    );
    h.pull(
        "c",
        r#"{"batch":2,"expires":60000000000,"group":"jobs","priority":2}"#,
    );
    let out = h.publish_n(6);
    let order: Vec<String> = deliveries(&out).into_iter().map(|(r, _, _)| r).collect();
    assert_eq!(order, ["a", "b", "a", "b", "c", "c"]);
}

#[test]
fn pin_ids_follow_the_seed() {
    let run = |seed| {
        let mut h = Harness::new(pinned(secs(600)));
        h.consumer.set_pin_seed(seed);
        h.publish();
        pins(&h.pull("a", &body("")))[0].clone().unwrap()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}
