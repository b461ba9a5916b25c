//! Shared test harness for the consumer scenario tests: an in-memory stream and a virtual
//! clock (`consumer-semantics.md` behaviour, EXAMPLES.md §5). Included by the `consumer_*`
//! test files with `#[path = "consumer_harness.rs"] mod harness;`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use jsproto::consumer::{
    AckKind, AckTokens, Action, Consumer, ConsumerConfig, ConsumerState, DeliverPolicy, MsgMeta,
    PullRequest, PullStatus, StreamView, SubjectFilter,
};

pub const STREAM: &str = "ORDERS";
pub const CONSUMER: &str = "shipping";
/// Unix time of the harness epoch (stored timestamps are this plus elapsed virtual time).
pub const EPOCH_UNIX_NS: u64 = 1_795_936_983_000_000_000;

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

#[derive(Debug, Clone)]
pub struct StoredMsg {
    pub subject: String,
    pub size: usize,
    pub ts: u64,
}

/// A stream kept in a `BTreeMap`; filtered lookups scan, which is fine for tests.
#[derive(Debug, Clone, Default)]
pub struct MemStream {
    pub msgs: BTreeMap<u64, StoredMsg>,
    pub last_seq: u64,
    /// Reply subjects nobody listens on any more (their requester went away).
    pub gone: Vec<String>,
}

impl MemStream {
    pub fn append(&mut self, subject: &str, size: usize, ts: u64) -> u64 {
        self.last_seq += 1;
        self.msgs.insert(
            self.last_seq,
            StoredMsg {
                subject: subject.to_owned(),
                size,
                ts,
            },
        );
        self.last_seq
    }

    fn meta(seq: u64, m: &StoredMsg) -> MsgMeta {
        MsgMeta {
            seq,
            subject_len: m.subject.len(),
            size: m.size,
            timestamp_unix_ns: m.ts,
        }
    }
}

impl StreamView for MemStream {
    fn has_interest(&self, reply_to: &[u8]) -> bool {
        !self.gone.iter().any(|g| g.as_bytes() == reply_to)
    }

    fn first_seq(&self) -> u64 {
        self.msgs
            .keys()
            .next()
            .copied()
            .unwrap_or(self.last_seq + 1)
    }
    fn last_seq(&self) -> u64 {
        self.last_seq
    }
    fn load(&self, seq: u64) -> Option<MsgMeta> {
        self.msgs.get(&seq).map(|m| Self::meta(seq, m))
    }
    fn next_matching(&self, from: u64, filter: &SubjectFilter) -> Option<MsgMeta> {
        self.msgs
            .range(from..)
            .find(|(_, m)| filter.matches(m.subject.as_bytes()))
            .map(|(&s, m)| Self::meta(s, m))
    }
    fn num_matching(&self, from: u64, filter: &SubjectFilter) -> u64 {
        if filter.is_all() {
            return self.msgs.range(from..).count() as u64;
        }
        self.msgs
            .range(from..)
            .filter(|(_, m)| filter.matches(m.subject.as_bytes()))
            .count() as u64
    }
    fn last_matching(&self, filter: &SubjectFilter) -> Option<u64> {
        self.msgs
            .iter()
            .rev()
            .find(|(_, m)| filter.matches(m.subject.as_bytes()))
            .map(|(&s, _)| s)
    }
    fn last_per_subject(&self, filter: &SubjectFilter) -> Vec<u64> {
        let mut last = BTreeMap::new();
        for (&seq, m) in &self.msgs {
            if filter.matches(m.subject.as_bytes()) {
                last.insert(m.subject.as_str(), seq);
            }
        }
        let mut seqs: Vec<u64> = last.into_values().collect();
        seqs.sort_unstable();
        seqs
    }
    fn first_seq_at_or_after_time(&self, unix_ns: u64) -> Option<u64> {
        self.msgs
            .iter()
            .find(|(_, m)| m.ts >= unix_ns)
            .map(|(&s, _)| s)
    }
}

/// A consumer on `ORDERS`, a virtual clock and the stream, with helpers that feed inputs and
/// return the actions. Every helper checks the consumer's invariants afterwards.
pub struct Harness {
    pub start: Instant,
    pub now: Instant,
    pub stream: MemStream,
    pub consumer: Consumer,
    /// Default size (headers + payload) of published messages.
    pub msg_size: usize,
}

pub fn explicit() -> ConsumerConfig {
    ConsumerConfig {
        name: CONSUMER.to_owned(),
        ..ConsumerConfig::default()
    }
}

impl Harness {
    pub fn new(cfg: ConsumerConfig) -> Self {
        Self::with_stream(cfg, MemStream::default(), 1)
    }

    pub fn with_stream(cfg: ConsumerConfig, stream: MemStream, start_seq: u64) -> Self {
        #[allow(clippy::disallowed_methods)] // the only real clock read in the suite
        let start = Instant::now();
        let consumer = Consumer::new(STREAM, cfg, start_seq, &stream, start).expect("valid config");
        let h = Self {
            start,
            now: start,
            stream,
            consumer,
            msg_size: 7,
        };
        h.check();
        h
    }

    /// A consumer created with `policy` on `stream` ([`Consumer::with_deliver_policy`]).
    pub fn with_policy(cfg: ConsumerConfig, stream: MemStream, policy: DeliverPolicy) -> Self {
        let mut h = Self::with_stream(cfg.clone(), stream, 1);
        h.consumer = Consumer::with_deliver_policy(STREAM, cfg, policy, &h.stream, h.now)
            .expect("valid config");
        h.check();
        h
    }

    pub fn check(&self) {
        if let Err(e) = self.consumer.check_invariants(&self.stream) {
            panic!("invariant broken at {:?}: {e}", self.elapsed());
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    pub fn unix_now(&self) -> u64 {
        EPOCH_UNIX_NS + self.elapsed().as_nanos() as u64
    }

    /// Stores a message on `subject` and tells the consumer.
    pub fn publish_on(&mut self, subject: &str) -> Vec<Action> {
        let ts = self.unix_now();
        let size = self.msg_size;
        let seq = self.stream.append(subject, size, ts);
        let mut out = Vec::new();
        self.consumer
            .on_stream_append(self.now, seq, subject.as_bytes(), &self.stream, &mut out);
        self.check();
        out
    }

    pub fn publish(&mut self) -> Vec<Action> {
        self.publish_on("orders.new")
    }

    pub fn publish_n(&mut self, n: usize) -> Vec<Action> {
        (0..n).flat_map(|_| self.publish()).collect()
    }

    /// A pull request with a JSON (or empty/integer) body.
    pub fn pull(&mut self, reply: &str, body: &str) -> Vec<Action> {
        let mut out = Vec::new();
        self.consumer.on_pull_body(
            self.now,
            Bytes::from(reply.to_owned()),
            body.as_bytes(),
            &self.stream,
            &mut out,
        );
        self.check();
        out
    }

    pub fn pull_req(&mut self, reply: &str, req: PullRequest) -> Vec<Action> {
        let mut out = Vec::new();
        self.consumer.on_pull_request(
            self.now,
            Bytes::from(reply.to_owned()),
            req,
            &self.stream,
            &mut out,
        );
        self.check();
        out
    }

    /// An ack message with `payload` on the subject of `tokens`, optionally with a reply.
    pub fn ack_with(
        &mut self,
        tokens: AckTokens,
        payload: &[u8],
        reply: Option<&str>,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let reply = reply.map(|r| Bytes::from(r.to_owned()));
        self.consumer.on_ack(
            self.now,
            tokens,
            AckKind::parse(payload),
            reply,
            &self.stream,
            &mut out,
        );
        self.check();
        out
    }

    pub fn ack(&mut self, tokens: AckTokens) -> Vec<Action> {
        self.ack_with(tokens, b"", None)
    }

    pub fn nak(&mut self, tokens: AckTokens) -> Vec<Action> {
        self.ack_with(tokens, b"-NAK", None)
    }

    /// Moves the clock forward, firing each deadline at its own instant.
    pub fn advance(&mut self, by: Duration) -> Vec<Action> {
        self.advance_timed(by).into_iter().map(|(_, a)| a).collect()
    }

    /// Like `advance`, with each action's time since the harness start.
    pub fn advance_timed(&mut self, by: Duration) -> Vec<(Duration, Action)> {
        let end = self.now + by;
        let mut fired = Vec::new();
        while let Some(at) = self.consumer.poll_timeout().filter(|&at| at <= end) {
            assert!(at >= self.now, "poll_timeout went backwards");
            self.now = at;
            let mut out = Vec::new();
            self.consumer.on_timeout(at, &self.stream, &mut out);
            self.check();
            let t = self.elapsed();
            fired.extend(out.into_iter().map(|a| (t, a)));
            if self.consumer.poll_timeout() == Some(at) {
                panic!("on_timeout left a deadline at the same instant");
            }
        }
        self.now = end;
        fired
    }

    pub fn info(&self) -> ConsumerState {
        self.consumer.info()
    }

    /// (delivered, ack_floor) as ((cseq, sseq), (cseq, sseq)).
    pub fn seqs(&self) -> ((u64, u64), (u64, u64)) {
        let i = self.info();
        (
            (i.delivered.consumer_seq, i.delivered.stream_seq),
            (i.ack_floor.consumer_seq, i.ack_floor.stream_seq),
        )
    }
}

/// The deliveries among `actions`: (reply, stream seq, delivery count).
pub fn deliveries(actions: &[Action]) -> Vec<(String, u64, u64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Deliver { reply_to, ack, .. } => Some((
                String::from_utf8_lossy(reply_to).into_owned(),
                ack.stream_seq,
                ack.delivery_count,
            )),
            _ => None,
        })
        .collect()
}

/// The ack tokens of the deliveries among `actions`.
pub fn tokens(actions: &[Action]) -> Vec<AckTokens> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Deliver { ack, .. } => Some(*ack),
            _ => None,
        })
        .collect()
}

/// (stream seq, delivery count) of the deliveries.
pub fn seq_dc(actions: &[Action]) -> Vec<(u64, u64)> {
    deliveries(actions)
        .into_iter()
        .map(|(_, s, d)| (s, d))
        .collect()
}

/// The statuses among `actions`: (reply, status).
pub fn statuses(actions: &[Action]) -> Vec<(String, PullStatus)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Status { reply_to, status } => Some((
                String::from_utf8_lossy(reply_to).into_owned(),
                status.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// (code, description) of the statuses.
pub fn codes(actions: &[Action]) -> Vec<(u16, String)> {
    statuses(actions)
        .into_iter()
        .map(|(_, s)| (s.code(), s.description().into_owned()))
        .collect()
}

pub fn ack_replies(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::AckReply { reply_to } => Some(String::from_utf8_lossy(reply_to).into_owned()),
            _ => None,
        })
        .collect()
}
