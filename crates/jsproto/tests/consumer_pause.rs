//! Consumer pause (`pause_until`, `CONSUMER.PAUSE`) on virtual time, as nats-server 2.15.1
//! pauses a pull consumer (observed): nothing is delivered or redelivered while paused; pull
//! requests still queue, heartbeat and expire; `no_wait` ends with `404 No Messages`; when the
//! pause runs out, what waits is delivered at its instant; a resume delivers at once.

#[path = "consumer_harness.rs"]
mod harness;

use std::time::Duration;

use harness::*;
use jsproto::consumer::{Action, ConsumerConfig, PullStatus};

fn statuses(actions: &[Action]) -> Vec<PullStatus> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Status { status, .. } => Some(status.clone()),
            _ => None,
        })
        .collect()
}

fn pause(h: &mut Harness, for_: Option<Duration>) -> Vec<Action> {
    let until = for_.map(|d| h.now + d);
    let mut out = Vec::new();
    h.consumer.set_pause(h.now, until, &h.stream, &mut out);
    h.check();
    out
}

#[test]
fn a_paused_consumer_delivers_when_the_pause_runs_out() {
    let mut h = Harness::new(explicit());
    h.publish_n(2);
    assert!(pause(&mut h, Some(secs(10))).is_empty());
    assert!(h.consumer.is_paused(h.now));
    let out = h.pull("w1", r#"{"batch":2,"expires":60000000000}"#);
    assert!(deliveries(&out).is_empty(), "nothing while paused");
    assert_eq!(h.info().num_waiting, 1, "the request waits");
    // A new message does not wake it either.
    assert!(deliveries(&h.publish()).is_empty());
    let fired = h.advance_timed(secs(20));
    let at: Vec<(Duration, u64)> = fired
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Deliver { ack, .. } => Some((*t, ack.stream_seq)),
            _ => None,
        })
        .collect();
    assert_eq!(at, vec![(secs(10), 1), (secs(10), 2)], "at the pause's end");
    assert!(!h.consumer.is_paused(h.now));
}

#[test]
fn a_resume_delivers_to_waiting_requests_at_once() {
    let mut h = Harness::new(explicit());
    h.publish_n(1);
    pause(&mut h, Some(secs(60)));
    h.pull("w1", r#"{"batch":1,"expires":30000000000}"#);
    h.advance(secs(1));
    let out = pause(&mut h, None);
    assert_eq!(deliveries(&out), vec![("w1".to_owned(), 1, 1)]);
}

#[test]
fn a_pause_in_the_past_is_no_pause() {
    let mut h = Harness::new(explicit());
    h.publish_n(1);
    h.advance(secs(5));
    let past = h.now - secs(1);
    let mut out = Vec::new();
    h.consumer.set_pause(h.now, Some(past), &h.stream, &mut out);
    assert!(!h.consumer.is_paused(h.now));
    let out = h.pull("w1", r#"{"batch":1}"#);
    assert_eq!(deliveries(&out).len(), 1);
}

#[test]
fn while_paused_requests_heartbeat_expire_and_no_wait_ends_at_once() {
    let mut h = Harness::new(explicit());
    h.publish_n(3);
    pause(&mut h, Some(secs(10)));
    let out = h.pull("w1", r#"{"batch":1,"no_wait":true}"#);
    assert_eq!(statuses(&out), vec![PullStatus::NoMessages]);
    // With `expires`, a no_wait request that got nothing keeps waiting, as unpaused.
    let out = h.pull("w2", r#"{"batch":1,"no_wait":true,"expires":2000000000}"#);
    assert!(statuses(&out).is_empty());
    let out = h.pull(
        "w3",
        r#"{"batch":1,"expires":1000000000,"idle_heartbeat":300000000}"#,
    );
    assert!(out.is_empty());
    let fired = h.advance(secs(3));
    let st = statuses(&fired);
    let beats = st
        .iter()
        .filter(|s| matches!(s, PullStatus::IdleHeartbeat { .. }))
        .count();
    assert_eq!(beats, 3, "heartbeats at 0.3, 0.6, 0.9 s: {st:?}");
    let timeouts = st
        .iter()
        .filter(|s| matches!(s, PullStatus::RequestTimeout(_)))
        .count();
    assert_eq!(timeouts, 2, "w3 and w2 expire: {st:?}");
    assert!(deliveries(&fired).is_empty());
}

#[test]
fn ack_waits_run_out_while_paused_and_redeliver_after() {
    let cfg = ConsumerConfig {
        ack_wait: secs(1),
        ..explicit()
    };
    let mut h = Harness::new(cfg);
    h.publish_n(1);
    let out = h.pull("w1", r#"{"batch":1}"#);
    assert_eq!(deliveries(&out).len(), 1);
    pause(&mut h, Some(secs(5)));
    h.pull("w2", r#"{"batch":1,"expires":60000000000}"#);
    assert!(deliveries(&h.advance(secs(3))).is_empty());
    let i = h.info();
    assert_eq!(i.num_ack_pending, 1);
    assert_eq!(i.num_redelivered, 0, "not counted before it goes out again");
    let out = h.advance(secs(3));
    assert_eq!(deliveries(&out), vec![("w2".to_owned(), 1, 2)]);
}

/// The pause running out by itself is reported once, at its instant ([`Action::Resumed`]: the
/// server's `paused: false` advisory, as nats-server's pause timer sends it); a resume by API
/// is not (the API path sends its own advisory).
#[test]
fn a_pause_that_runs_out_reports_the_resume_once() {
    let mut h = Harness::new(explicit());
    pause(&mut h, Some(secs(10)));
    let fired = h.advance_timed(secs(30));
    let resumed: Vec<Duration> = fired
        .iter()
        .filter(|(_, a)| matches!(a, Action::Resumed))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(resumed, vec![secs(10)], "once, at the pause's end");

    pause(&mut h, Some(secs(60)));
    h.advance(secs(1));
    let out = pause(&mut h, None);
    assert!(
        !out.iter().any(|a| matches!(a, Action::Resumed)),
        "a resume by API is not the pause running out: {out:?}"
    );
}
