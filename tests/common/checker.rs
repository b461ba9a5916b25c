//! A Jepsen-style checker for JetStream runs with faults: it records what clients were told
//! (every PubAck, every delivery, every confirmed ack) while the run goes on, and then
//! checks those promises against the stream and consumer as the cluster reports them
//! afterwards:
//!
//! - **no acknowledged publish lost**: every id that got a PubAck is in the stream, at the
//!   sequence the PubAck named;
//! - **no sequence handed out twice**: no two ids were acknowledged with the same sequence,
//!   and an id published again (a retry with the same `Nats-Msg-Id`) was acknowledged with
//!   the sequence of its first copy (`duplicate: true`), never stored a second time;
//! - **no confirmed ack redelivered**: once an ack was confirmed (an ack sent with a reply
//!   subject, answered by the server), no pull request made after that gets the message
//!   again;
//! - **the consumer's state adds up** (after a drain): every stored message was delivered,
//!   the ack floor is the last sequence, nothing is pending.
//!
//! Payloads are the ids themselves (`p0-17`), so the stream read back says which id each
//! sequence holds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

/// One PubAck a publisher received.
#[derive(Debug, Clone)]
pub struct PubAckRecord {
    /// The id published (payload and `Nats-Msg-Id`).
    pub id: String,
    /// The stream sequence the PubAck named.
    pub seq: u64,
    /// The PubAck said `duplicate: true`.
    pub duplicate: bool,
    /// When it arrived.
    pub at: Instant,
}

/// One delivery a worker received.
#[derive(Debug, Clone)]
pub struct DeliveryRecord {
    /// The id delivered.
    pub id: String,
    /// Its stream sequence (from the ack subject).
    pub seq: u64,
    /// Its delivery count.
    pub count: i64,
    /// The worker that got it.
    pub worker: usize,
    /// When the pull request that brought it was sent.
    pub pulled_at: Instant,
}

/// The history of one run; shared by the publishers and workers (`Arc<History>`).
#[derive(Debug, Default)]
pub struct History {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    acks: Vec<PubAckRecord>,
    deliveries: Vec<DeliveryRecord>,
    /// Confirmed acks: id -> (seq, when the confirmation arrived).
    confirmed: HashMap<String, (u64, Instant)>,
    /// Every id a publisher tried to publish.
    attempted: HashSet<String>,
    /// Events of the run (faults), for the violations' messages.
    marks: Vec<(String, Instant)>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// A publisher is about to publish `id` (the first attempt).
    pub fn attempt(&self, id: &str) {
        self.lock().attempted.insert(id.to_owned());
    }

    /// A PubAck for `id` arrived.
    pub fn pub_ack(&self, id: &str, seq: u64, duplicate: bool) {
        self.lock().acks.push(PubAckRecord {
            id: id.to_owned(),
            seq,
            duplicate,
            at: Instant::now(),
        });
    }

    /// Notes an event of the run (a fault, a heal): violations name the last event before
    /// the PubAck concerned.
    pub fn mark(&self, event: &str) {
        self.lock().marks.push((event.to_owned(), Instant::now()));
    }

    /// `"<ms> ms after <event>"` for the last event before `at`.
    fn when(&self, at: Instant) -> String {
        let inner = self.lock();
        match inner.marks.iter().rev().find(|(_, t)| *t <= at) {
            Some((event, t)) => format!("{} ms after {event}", (at - *t).as_millis()),
            None => "before any fault".to_owned(),
        }
    }

    /// A worker received `id` (stream `seq`, delivery `count`) from a pull request sent at
    /// `pulled_at`.
    pub fn delivered(&self, id: &str, seq: u64, count: i64, worker: usize, pulled_at: Instant) {
        self.lock().deliveries.push(DeliveryRecord {
            id: id.to_owned(),
            seq,
            count,
            worker,
            pulled_at,
        });
    }

    /// The server confirmed the ack of `id` (stream `seq`).
    pub fn confirmed(&self, id: &str, seq: u64) {
        self.lock()
            .confirmed
            .entry(id.to_owned())
            .or_insert((seq, Instant::now()));
    }

    /// The PubAcks so far.
    pub fn acks(&self) -> Vec<PubAckRecord> {
        self.lock().acks.clone()
    }

    /// The deliveries so far.
    pub fn deliveries(&self) -> Vec<DeliveryRecord> {
        self.lock().deliveries.clone()
    }

    /// How many distinct ids have a confirmed ack.
    pub fn confirmed_count(&self) -> usize {
        self.lock().confirmed.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("history lock")
    }

    /// Checks `acks` (a snapshot of [`History::acks`] taken before `stream` was read)
    /// against `stream`, the stream's contents read back (sequence -> id). Returns the
    /// violations found (empty: none).
    pub fn check_publishes(
        &self,
        acks: &[PubAckRecord],
        stream: &BTreeMap<u64, String>,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        let mut seq_of: HashMap<&str, u64> = HashMap::new();
        let mut id_of: HashMap<u64, &str> = HashMap::new();
        for a in acks {
            if let Some(&first) = seq_of.get(a.id.as_str()) {
                if first != a.seq {
                    problems.push(format!(
                        "{} acknowledged at seq {first} and again at seq {} (duplicate: {}): \
                         stored twice",
                        a.id, a.seq, a.duplicate
                    ));
                }
            } else {
                seq_of.insert(&a.id, a.seq);
            }
            if let Some(other) = id_of.get(&a.seq) {
                if *other != a.id {
                    problems.push(format!(
                        "seq {} handed out twice: to {other} and to {}",
                        a.seq, a.id
                    ));
                }
            } else {
                id_of.insert(a.seq, &a.id);
            }
        }
        let stored_at: HashMap<&str, u64> =
            stream.iter().map(|(s, id)| (id.as_str(), *s)).collect();
        let last = stream.keys().next_back().copied().unwrap_or(0);
        let mut lost: Vec<(u64, String)> = Vec::new();
        for a in acks {
            if seq_of.get(a.id.as_str()) != Some(&a.seq) || a.duplicate {
                continue;
            }
            let (id, seq) = (&a.id, a.seq);
            let found = stream.get(&seq);
            if found == Some(id) {
                continue;
            }
            let what = match found {
                Some(other) => format!("seq {seq} holds {other}"),
                None => format!("no message at seq {seq} (the stream ends at {last})"),
            };
            let elsewhere = match stored_at.get(id.as_str()) {
                Some(s) => format!("stored at seq {s} instead"),
                None => "not in the stream".to_owned(),
            };
            lost.push((
                seq,
                format!(
                    "acknowledged {id} at seq {seq} ({}) is lost: {what}, {elsewhere}",
                    self.when(a.at)
                ),
            ));
        }
        // Ids acknowledged only as duplicates (their first PubAck never came).
        for (id, seq) in &seq_of {
            if !acks.iter().any(|a| a.id == *id && !a.duplicate)
                && stream.get(seq) != Some(&id.to_string())
            {
                lost.push((
                    *seq,
                    format!("acknowledged {id} at seq {seq} (duplicate) is lost"),
                ));
            }
        }
        lost.sort();
        problems.extend(lost.into_iter().map(|(_, p)| p));
        let attempted = self.lock().attempted.clone();
        let mut where_stored: HashMap<&str, u64> = HashMap::new();
        for (seq, id) in stream {
            if let Some(first) = where_stored.insert(id, *seq) {
                problems.push(format!(
                    "{id} stored twice, at seq {first} and {seq} (dedup failed)"
                ));
            }
            if !attempted.contains(id) {
                problems.push(format!("seq {seq} holds {id:?}, which nobody published"));
            }
        }
        problems
    }

    /// Deliveries of a message whose ack had been confirmed before the pull request that
    /// brought it was sent.
    pub fn check_no_redelivery_after_confirm(&self) -> Vec<String> {
        let inner = self.lock();
        inner
            .deliveries
            .iter()
            .filter_map(|d| {
                let (seq, at) = inner.confirmed.get(&d.id)?;
                (d.pulled_at > *at).then(|| {
                    format!(
                        "{} (seq {seq}) delivered again as seq {} (count {}, worker {}) after \
                         its ack was confirmed",
                        d.id, d.seq, d.count, d.worker
                    )
                })
            })
            .collect()
    }

    /// After a drain: every message of `stream` was delivered at least once, and an ack
    /// confirmed for it named its sequence. (An ack may take effect without its
    /// confirmation reaching the worker, when a leader changes in between: the consumer's
    /// ack floor, checked by [`check_consumer_info`], says whether everything was acked.)
    pub fn check_all_delivered(&self, stream: &BTreeMap<u64, String>) -> Vec<String> {
        let inner = self.lock();
        let delivered: HashSet<&str> = inner.deliveries.iter().map(|d| d.id.as_str()).collect();
        let mut problems = Vec::new();
        for (seq, id) in stream {
            if !delivered.contains(id.as_str()) {
                problems.push(format!("{id} (seq {seq}) never delivered"));
            }
            if let Some((s, _)) = inner.confirmed.get(id) {
                if s != seq {
                    problems.push(format!(
                        "{id} is at seq {seq} but its confirmed ack named seq {s}"
                    ));
                }
            }
        }
        problems
    }

    /// Ids delivered more than once (any worker, any delivery count).
    pub fn delivered_more_than_once(&self) -> Vec<String> {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        let inner = self.lock();
        for d in &inner.deliveries {
            *count.entry(&d.id).or_default() += 1;
        }
        count
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(id, n)| format!("{id} delivered {n} times"))
            .collect()
    }
}

/// Checks a consumer's info after a drain of a stream whose last sequence is `last_seq`:
/// nothing pending or waiting for an ack, and the ack floor and delivered sequence at the
/// end of the stream.
pub fn check_consumer_info(
    info: &async_nats::jetstream::consumer::Info,
    last_seq: u64,
) -> Vec<String> {
    let mut problems = Vec::new();
    if info.num_ack_pending != 0 {
        problems.push(format!(
            "num_ack_pending {} after the drain",
            info.num_ack_pending
        ));
    }
    if info.num_pending != 0 {
        problems.push(format!("num_pending {} after the drain", info.num_pending));
    }
    if info.ack_floor.stream_sequence != last_seq {
        problems.push(format!(
            "ack floor at stream seq {}, the stream ends at {last_seq}",
            info.ack_floor.stream_sequence
        ));
    }
    if info.delivered.stream_sequence != last_seq {
        problems.push(format!(
            "delivered up to stream seq {}, the stream ends at {last_seq}",
            info.delivered.stream_sequence
        ));
    }
    if info.ack_floor.consumer_sequence > info.delivered.consumer_sequence {
        problems.push(format!(
            "ack floor consumer seq {} past delivered {}",
            info.ack_floor.consumer_sequence, info.delivered.consumer_sequence
        ));
    }
    problems
}

/// Reads the whole of stream `name` (first to last sequence as its info says when the
/// read starts) through a fresh ephemeral pull consumer (in memory, one replica, no acks),
/// retried from where it stopped when a request fails; sequence -> payload (the id).
/// Panics when the read does not finish within `limit` (a generous bound).
pub async fn read_stream(
    js: &async_nats::jetstream::Context,
    name: &str,
    limit: Duration,
) -> BTreeMap<u64, String> {
    use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
    let deadline = Instant::now() + limit;
    let last = loop {
        match stream_state(js, name).await {
            Ok(state) => break state,
            Err(e) => {
                assert!(Instant::now() < deadline, "stream info of {name}: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let mut out = BTreeMap::new();
    let mut next = last.0.max(1);
    while next <= last.1 {
        assert!(
            Instant::now() < deadline,
            "reading {name}: stuck at seq {next} of {}",
            last.1
        );
        let stream = match js.get_stream(name).await {
            Ok(s) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let consumer = match stream
            .create_consumer(pull::Config {
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: next,
                },
                ack_policy: AckPolicy::None,
                memory_storage: true,
                num_replicas: 1,
                inactive_threshold: Duration::from_secs(30),
                ..Default::default()
            })
            .await
        {
            Ok(c) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        while next <= last.1 {
            let Ok(mut batch) = consumer
                .fetch()
                .max_messages(500)
                .expires(Duration::from_secs(1))
                .messages()
                .await
            else {
                break;
            };
            let mut got = 0;
            let mut failed = false;
            while let Some(m) = batch.next().await {
                let Ok(m) = m else {
                    failed = true;
                    break;
                };
                let seq = m.info().expect("ack subject").stream_sequence;
                out.insert(seq, String::from_utf8_lossy(&m.payload).into_owned());
                next = next.max(seq + 1);
                got += 1;
            }
            if failed || got == 0 {
                break;
            }
        }
        let _ = stream
            .delete_consumer(consumer.cached_info().name.as_str())
            .await;
    }
    out.retain(|seq, _| *seq <= last.1);
    find_skipped(js, name, last, &mut out, deadline).await;
    out
}

/// Looks up with `STREAM.MSG.GET` (answered by the stream's leader from its store) every
/// sequence from `first` to `last` the reading consumer did not deliver, and adds those
/// stored. A consumer without acks that was handed messages for a pull request whose
/// delivery a leader change cut off does not deliver them again (at most once, as
/// nats-server's): that is not a message missing from the stream. Prints what it found.
async fn find_skipped(
    js: &async_nats::jetstream::Context,
    name: &str,
    (first, last): (u64, u64),
    out: &mut BTreeMap<u64, String>,
    deadline: Instant,
) {
    use async_nats::jetstream::stream::RawMessageErrorKind;
    let skipped: Vec<u64> = (first.max(1)..=last)
        .filter(|s| !out.contains_key(s))
        .collect();
    let mut found = Vec::new();
    for seq in skipped {
        loop {
            assert!(
                Instant::now() < deadline,
                "reading {name}: no answer to MSG.GET of seq {seq}"
            );
            let stream = match js.get_stream_no_info(name).await {
                Ok(s) => s,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            match stream.get_raw_message(seq).await {
                Ok(m) => {
                    out.insert(seq, String::from_utf8_lossy(&m.payload).into_owned());
                    found.push(seq);
                    break;
                }
                Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    if let (Some(a), Some(b)) = (found.first(), found.last()) {
        eprintln!(
            "reading {name}: the reading consumer skipped {} stored messages (seq {a} to {b}); \
             MSG.GET found them",
            found.len()
        );
    }
}

/// The stream's first and last sequence, from its info.
pub async fn stream_state(
    js: &async_nats::jetstream::Context,
    name: &str,
) -> Result<(u64, u64), String> {
    let mut stream = js.get_stream(name).await.map_err(|e| e.to_string())?;
    let info = stream.info().await.map_err(|e| e.to_string())?;
    Ok((info.state.first_sequence, info.state.last_sequence))
}
