//! JetStream: the `$JS.API` request handlers and the streams.
//!
//! Threads, not tasks, own JetStream state, because the stores do blocking file IO:
//! - the **API thread** takes every `$JS.API.…` request in arrival order (internal subscriptions
//!   hand them over a channel), keeps the set of streams, and creates, updates and deletes
//!   them; operations on one stream's data are passed to that stream's thread;
//! - each **stream thread** ([`stream::StreamEngine`]) owns its store and applies captured
//!   publishes (with PubAcks after the batch's write) and the API operations on the stream.
//!
//! Replies go out through the same router as every other message ([`outbox::Outbox`]), and so
//! do the `$JS.EVENT.ADVISORY.…` advisories, from the thread where the event happened
//! ([`advisory`]).
//!
//! Each account with JetStream ([`crate::account`]) has its own API thread and streams.
//!
//! On-disk layout under the JetStream directory (`<store_dir>/jetstream`), as nats-server's:
//! `<ACCOUNT>/streams/<name>/meta.json` (config and creation time) and
//! `<ACCOUNT>/streams/<name>/msgs/` (the file store), `<ACCOUNT>` being `$G` without
//! accounts. Memory streams are not persisted. The directory is this server's alone while
//! JetStream runs ([`store_dir::StoreDir`], a lock file in it).

pub mod advisory;
pub mod api;
pub mod api_queue;
pub mod consumers;
pub mod holders;
pub mod meta;
pub mod ops;
pub mod outbox;
pub mod owner;
pub mod pause;
pub mod replica;
pub mod reset;
pub mod store_dir;
pub mod stream;
pub mod unpin;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use bytes::Bytes;
use tracing::{info, warn};

use crate::router::{BurstWork, InternalHandler, RoutedMsg};
use crate::server::Server;

/// JetStream usage other threads can read at any time (monitoring, account info).
#[derive(Debug, Default)]
pub struct JsStats {
    /// Each stream's counters and whether it is stored in memory, by name.
    pub streams:
        std::sync::Mutex<std::collections::BTreeMap<String, (Arc<stream::StreamShared>, bool)>>,
    /// API requests answered (nats-server's `api.total`).
    pub api_total: std::sync::atomic::AtomicU64,
    /// API requests answered with an error (`api.errors`).
    pub api_errors: std::sync::atomic::AtomicU64,
}

/// Totals over every stream, as `/jsz` and account info report them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct JsUsage {
    /// Number of streams.
    pub streams: u64,
    /// Messages in all streams.
    pub messages: u64,
    /// Bytes in all streams (store accounting).
    pub bytes: u64,
    /// Bytes in memory streams.
    pub memory: u64,
    /// Bytes in file streams.
    pub storage: u64,
    /// Consumers on all streams.
    pub consumers: u64,
}

impl JsStats {
    /// Bytes stored by the streams of one storage type (`memory` or file), leaving out the
    /// stream whose counters are `except` (the caller counts its own, more recent, bytes).
    pub fn bytes_used(&self, memory: bool, except: &Arc<stream::StreamShared>) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        let streams = self.streams.lock().expect("stats lock poisoned");
        streams
            .values()
            .filter(|(shared, m)| *m == memory && !Arc::ptr_eq(shared, except))
            .map(|(shared, _)| shared.bytes.load(Relaxed))
            .sum()
    }

    /// Sums the streams' counters now.
    pub fn usage(&self) -> JsUsage {
        use std::sync::atomic::Ordering::Relaxed;
        let streams = self.streams.lock().expect("stats lock poisoned");
        let mut u = JsUsage {
            streams: streams.len() as u64,
            ..JsUsage::default()
        };
        for (shared, memory) in streams.values() {
            let bytes = shared.bytes.load(Relaxed);
            u.messages += shared.msgs.load(Relaxed);
            u.consumers += shared.consumers.load(Relaxed);
            u.bytes += bytes;
            if *memory {
                u.memory += bytes;
            } else {
                u.storage += bytes;
            }
        }
        u
    }
}

/// A request to the API thread.
pub enum ApiCmd {
    /// A `$JS.API.…` message.
    Request {
        /// The full request subject.
        subject: Bytes,
        /// Where to answer (none: carry out, answer nothing).
        reply: Option<Bytes>,
        /// The request's header block, if any.
        headers: Option<Bytes>,
        /// The request body.
        payload: Bytes,
        /// It came from another server of the cluster (a client of that server asked).
        from_route: bool,
        /// Its size as counted by the queue's bound ([`api_queue::ApiQueueBound`]), given back
        /// when the API thread takes it.
        queued_len: usize,
    },
    /// An operation the meta group applied for this account ([`meta::MetaOp`]), with
    /// whether this server led the meta group when it applied it (the meta leader answers
    /// deletes).
    Assigned {
        /// The operation.
        op: Box<meta::MetaOp>,
        /// This server is the meta leader.
        meta_leader: bool,
    },
    /// This server's replica of `stream` was removed from the stream's Raft group (the
    /// meta group gave the stream other servers): it stops and its files go.
    LeftGroup {
        /// The stream.
        stream: String,
    },
    /// Stop every stream (syncing its store) and end the thread.
    Shutdown,
}

/// The internal subscriber for the API subjects: forwards to the API thread.
struct ApiIngress {
    tx: mpsc::Sender<ApiCmd>,
    /// Requests waiting for the API thread, bounded: past it a request is dropped.
    bound: Arc<api_queue::ApiQueueBound>,
    /// In a cluster: every server's API thread gets every request (see [`api`]).
    clustered: bool,
}

impl InternalHandler for ApiIngress {
    /// Pull requests and direct gets belong to their consumer's or stream's own subscription:
    /// for a consumer or stream that does not exist, the requester gets no-responders, as from
    /// nats-server. Every other `$JS.API` subject is the API thread's, known or not (an
    /// unknown one gets no answer at all, as from nats-server, not no-responders).
    fn wants(&self, subject: &[u8], _hops: u8) -> bool {
        !(subject.starts_with(b"$JS.API.CONSUMER.MSG.NEXT.")
            || subject.starts_with(b"$JS.API.DIRECT.GET."))
    }

    fn on_message(&self, msg: RoutedMsg<'_>, _later: &mut BurstWork) {
        let queued_len = msg.subject.len()
            + msg.reply.map_or(0, |r| r.len())
            + msg.headers.map_or(0, |h| h.len())
            + msg.payload.len();
        if !self.bound.admit(queued_len, std::time::Instant::now()) {
            return;
        }
        let sent = self.tx.send(ApiCmd::Request {
            subject: msg.subject.clone(),
            reply: msg.reply.cloned(),
            headers: msg.headers.cloned(),
            payload: msg.payload.clone(),
            from_route: msg.remote.is_some(),
            queued_len,
        });
        if sent.is_err() {
            // The thread has stopped: nothing will take it.
            self.bound.release(queued_len);
        }
    }

    fn clustered(&self) -> bool {
        self.clustered
    }
}

/// The API thread's subscription: every `$JS.API` subject but pull requests and direct gets
/// ([`ApiIngress::wants`]). A request on a subject it does not know gets no answer, as from
/// nats-server 2.15.1; with JetStream off there is no subscriber and requesters get
/// no-responders.
const API_SUBJECTS: &[&str] = &["$JS.API.>"];

/// A running JetStream: one API thread per account and, through each, every stream thread
/// of that account.
pub struct JetStream {
    threads: Vec<(mpsc::Sender<ApiCmd>, JoinHandle<()>)>,
    /// The meta group, in a cluster.
    meta: Option<meta::Meta>,
    /// The locked JetStream directory: released when everything writing under it stopped.
    store: store_dir::StoreDir,
}

impl JetStream {
    /// Starts JetStream for every account of `server` that has it enabled (the global account
    /// when no accounts are configured): recovers the streams stored under
    /// `<dir>/<ACCOUNT>/streams` and answers the JetStream API in that account's subject
    /// space. Accounts without JetStream get `10039 JetStream not enabled for account` to
    /// every API request, as from nats-server. `store` is the JetStream directory `dir`, locked
    /// by [`store_dir::StoreDir::open`]; it stays locked until [`JetStream::shutdown`] returns.
    ///
    /// # Errors
    /// When a directory cannot be created or read, or a thread cannot be started.
    pub fn start(server: &Arc<Server>, store: store_dir::StoreDir) -> anyhow::Result<JetStream> {
        let dir = store.path();
        let mut threads = Vec::new();
        // In a cluster: the meta group (the store dir is `dir`'s parent).
        let meta = match server.cluster() {
            Some(cluster) => {
                let store_dir = dir.parent().unwrap_or(dir);
                let meta =
                    meta::Meta::start(cluster, store_dir).context("starting the meta group")?;
                server.set_meta(Arc::clone(meta.state()));
                Some(meta)
            }
            None => None,
        };
        for account in server.accounts().iter() {
            let account_dir = dir.join(&**account.name());
            let enabled = account.jetstream_limits().is_some();
            let stats = Arc::new(JsStats::default());
            let (tx, rx) = mpsc::channel();
            let mut state = api::Api::new(
                Arc::clone(server),
                Arc::clone(account),
                account_dir.clone(),
                Arc::clone(&stats),
            );
            state.set_self_tx(tx.clone());
            if let Some(meta) = &meta {
                state.set_meta(Arc::clone(meta.state()), meta.sender());
            }
            if enabled {
                std::fs::create_dir_all(streams_dir(&account_dir))
                    .with_context(|| format!("creating {}", streams_dir(&account_dir).display()))?;
                account.set_jetstream_stats(stats);
                let recovered = state.recover().context("recovering streams")?;
                if recovered > 0 {
                    info!(
                        "Recovered {recovered} stream(s) of account {}",
                        account.name()
                    );
                }
            }
            if let Some(meta) = &meta {
                meta.state().register_account(account.name(), tx.clone());
            }
            let bound = Arc::new(api_queue::ApiQueueBound::new(
                server.options().jetstream_request_queue_limit,
                api_queue::MAX_BYTES,
            ));
            let ingress: Arc<dyn InternalHandler> = Arc::new(ApiIngress {
                tx: tx.clone(),
                bound: Arc::clone(&bound),
                clustered: meta.is_some(),
            });
            for subject in API_SUBJECTS {
                account
                    .router()
                    .subscribe_internal(subject.as_bytes(), None, Arc::clone(&ingress))
                    .expect("API subjects are valid");
            }
            let thread = std::thread::Builder::new()
                .name(format!("jetstream-api-{}", account.name()))
                .spawn(move || state.run(rx, &bound))
                .context("starting the JetStream API thread")?;
            threads.push((tx, thread));
        }
        Ok(JetStream {
            threads,
            meta,
            store,
        })
    }

    /// What the meta group applied (in a cluster).
    pub fn meta(&self) -> Option<&Arc<meta::MetaState>> {
        self.meta.as_ref().map(meta::Meta::state)
    }

    /// Stops every stream (their stores are synced) and waits for the threads to end.
    pub fn shutdown(self) {
        for (tx, _) in &self.threads {
            let _ = tx.send(ApiCmd::Shutdown);
        }
        for (_, thread) in self.threads {
            if thread.join().is_err() {
                warn!("a JetStream API thread panicked");
            }
        }
        if let Some(meta) = self.meta {
            meta.shutdown();
        }
        // Nothing writes under the directory any more: another server may have it.
        drop(self.store);
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a crash leaves either
/// the old or the new content. With `fsync`, the file is synced before the rename and the
/// directory after it, so the new content is also on disk when this returns.
///
/// # Errors
/// The file system's error (the temporary file may be left behind).
pub fn write_atomically(path: &Path, bytes: &[u8], fsync: bool) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    if fsync {
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if fsync {
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
    }
    Ok(())
}

/// `<account_dir>/streams`: where an account's stream directories live (`account_dir` is
/// `<store_dir>/jetstream/<ACCOUNT>`, `$G` for the global account).
pub fn streams_dir(account_dir: &Path) -> PathBuf {
    account_dir.join("streams")
}
