//! The system account (`system_account: NAME`): where the server reports on itself, as
//! nats-server's (`server/events.go`).
//!
//! Its users may subscribe to the server's events and ask it for its monitoring data:
//!
//! - `$SYS.ACCOUNT.<account>.CONNECT` / `.DISCONNECT`: a client logged in / went away
//!   (`io.nats.server.advisory.v1.client_connect` / `client_disconnect`, with the client's id,
//!   host, account, user, name, lang and version, and on disconnect its message counts and
//!   the reason);
//! - `$SYS.REQ.SERVER.PING` (and `.STATSZ`): the server's statistics (`statsz`);
//!   `$SYS.REQ.SERVER.PING.<KIND>` and `$SYS.REQ.SERVER.<id>.<KIND>` for `VARZ`, `CONNZ`,
//!   `JSZ`, `HEALTHZ`, `STATSZ` (as `{"server": {...}, "data": {...}}`) and `IDZ`.
//!
//! Every message carries nats-server's `server` block (name, host, id, cluster and tags when
//! there are any, version, JetStream, a sequence number and the time). Other accounts see
//! none of it. In a cluster the requests are cluster-wide, as on nats-server: a
//! `$SYS.REQ.SERVER.PING` asked on any server is answered by every server of the cluster
//! ([`System::join_cluster`]), and a request body may narrow who answers (`server_name`,
//! `cluster`, `host`, `tags`, and `leader_only` for `JSZ`). Not here yet: the periodic
//! `$SYS.SERVER.<id>.STATSZ`, the account connection-count events (`...CONNS`), and the
//! account-scoped requests (`$SYS.REQ.ACCOUNT.…`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::account::Account;
use crate::connection::outbound::CloseReason;
use crate::connection::Connection;
use crate::monitor;
use crate::router::{BurstWork, InternalHandler, RouteScratch, RoutedMsg};
use crate::server::{Server, NATS_VERSION};

/// The system account of a running server and its event sequence.
pub struct System {
    account: Arc<Account>,
    seq: AtomicU64,
    /// The request handler subscribed now (replaced by a cluster-wide one when the server
    /// joins a cluster, [`System::join_cluster`]).
    handler: Mutex<Option<Arc<dyn InternalHandler>>>,
}

impl System {
    /// The system account `account`.
    pub fn new(account: Arc<Account>) -> Self {
        System {
            account,
            seq: AtomicU64::new(0),
            handler: Mutex::new(None),
        }
    }

    /// The system account.
    pub fn account(&self) -> &Arc<Account> {
        &self.account
    }

    /// The subjects the request handler takes: `$SYS.REQ.SERVER.PING`,
    /// `$SYS.REQ.SERVER.PING.*` and `$SYS.REQ.SERVER.<this server's id>.*`.
    fn subjects(server: &Server) -> [String; 3] {
        [
            "$SYS.REQ.SERVER.PING".to_owned(),
            "$SYS.REQ.SERVER.PING.*".to_owned(),
            format!("$SYS.REQ.SERVER.{}.*", server.server_id()),
        ]
    }

    /// Subscribes the request handlers in the system account, for this server's clients.
    pub fn start(&self, server: &Arc<Server>) {
        self.subscribe(server, false);
    }

    /// Makes the request handlers cluster-wide, as nats-server's are: their subscriptions are
    /// announced to the routes, so a `$SYS.REQ.SERVER.PING` asked on any server reaches
    /// every server of the cluster and each answers on the reply subject (the answers travel
    /// back over the routes), and `$SYS.REQ.SERVER.<id>.<KIND>` reaches the server `<id>`
    /// wherever it is asked. Call it once the account routers have the cluster's interest
    /// hook ([`crate::cluster::Cluster::start`]), before routes register.
    pub fn join_cluster(&self, server: &Arc<Server>) {
        self.subscribe(server, true);
    }

    fn subscribe(&self, server: &Arc<Server>, clustered: bool) {
        let router = self.account.router();
        let mut current = self.handler.lock().expect("system lock poisoned");
        if let Some(old) = current.take() {
            for subject in Self::subjects(server) {
                router.unsubscribe_internal(subject.as_bytes(), None, &old);
            }
        }
        let handler: Arc<dyn InternalHandler> = Arc::new(Requests {
            server: Arc::downgrade(server),
            clustered,
        });
        for subject in Self::subjects(server) {
            router
                .subscribe_internal(subject.as_bytes(), None, Arc::clone(&handler))
                .expect("system subjects are valid");
        }
        *current = Some(handler);
    }

    /// nats-server's `server` block, with the next sequence number.
    fn server_block(&self, server: &Server) -> Value {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let host = server
            .client_addr()
            .map_or_else(|| server.options().host.clone(), |a| a.ip().to_string());
        let mut block = json!({
            "name": server.server_name(),
            "host": host,
            "id": server.server_id(),
            "ver": NATS_VERSION,
            "jetstream": server.options().jetstream,
            "flags": 0,
            "seq": seq,
            "time": monitor::rfc3339(SystemTime::now()),
        });
        // `server_tags`; omitted when none, as nats-server's `tags,omitempty`.
        if !server.options().server_tags.is_empty() {
            block["tags"] = json!(server.options().server_tags);
        }
        // The cluster's name; omitted outside a cluster, as nats-server's `cluster,omitempty`.
        if let Some(cluster) = server.cluster() {
            block["cluster"] = json!(cluster.name());
        }
        block
    }

    fn publish(&self, subject: &str, body: &Value) {
        let subject = Bytes::from(subject.to_owned());
        if !self.account.router().has_interest(&subject) {
            return;
        }
        let payload = Bytes::from(body.to_string());
        let msg = RoutedMsg {
            subject: &subject,
            reply: None,
            headers: None,
            payload: &payload,
            hops: 0,
            remote: None,
        };
        let mut scratch = RouteScratch::default();
        self.account.router().route(None, msg, &mut scratch);
        scratch.flush_wakes();
    }

    /// `$SYS.ACCOUNT.<account>.CONNECT` for a client that just logged in.
    pub fn client_connected(&self, server: &Server, conn: &Connection) {
        let account = conn.account();
        let subject = format!("$SYS.ACCOUNT.{}.CONNECT", account.name());
        let now = SystemTime::now();
        let body = json!({
            "type": "io.nats.server.advisory.v1.client_connect",
            "id": nuid::next().as_str(),
            "timestamp": monitor::rfc3339(now),
            "server": self.server_block(server),
            "client": client_block(conn, &account, None),
        });
        self.publish(&subject, &body);
    }

    /// `$SYS.ACCOUNT.<account>.DISCONNECT` for a client that logged in and is gone.
    pub fn client_disconnected(&self, server: &Server, conn: &Connection, reason: CloseReason) {
        let account = conn.account();
        let subject = format!("$SYS.ACCOUNT.{}.DISCONNECT", account.name());
        let now = SystemTime::now();
        let c = &conn.handle.counters;
        let body = json!({
            "type": "io.nats.server.advisory.v1.client_disconnect",
            "id": nuid::next().as_str(),
            "timestamp": monitor::rfc3339(now),
            "server": self.server_block(server),
            "client": client_block(conn, &account, Some(now)),
            // As nats-server: what the client sent, and what it was sent.
            "sent": {
                "msgs": c.in_msgs.load(Ordering::Relaxed),
                "bytes": c.in_bytes.load(Ordering::Relaxed),
            },
            "received": {
                "msgs": c.out_msgs.load(Ordering::Relaxed),
                "bytes": c.out_bytes.load(Ordering::Relaxed),
            },
            "reason": match reason {
                CloseReason::Normal => "Client Closed",
                CloseReason::ProtocolError => "Protocol Violation",
                CloseReason::SlowConsumer => "Slow Consumer (Pending Bytes)",
            },
        });
        self.publish(&subject, &body);
    }

    /// The answer to a `$SYS.REQ.SERVER…` request of `kind` (`None`: a plain PING) with
    /// `body`, or `None` when this server does not answer it. As nats-server 2.15.1's `zReq`:
    /// a JSON body may hold its event filter (`server_name`, `cluster`, `host`, matched as
    /// substrings unless `exact_match`; `tags`, all of which this server must have; `domain`,
    /// never matched: this server has none) and a server it leaves out does not answer; a
    /// `JSZ` request with `"leader_only":true` is answered by the meta leader only (any
    /// server outside a cluster; none without JetStream). A body that is not JSON gets an
    /// answer with `"error":{"code":400,…}` instead of `data`. `IDZ` reads no body.
    fn answer(&self, server: &Server, kind: Option<&str>, body: &[u8]) -> Option<Value> {
        let kind = kind.unwrap_or("STATSZ");
        if kind != "IDZ" && !body.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice::<RequestOptions>(body) {
                Ok(opts) => {
                    if opts.filter.leaves_out(server) {
                        return None;
                    }
                    if kind == "JSZ" && opts.leader_only && !leads_jetstream(server) {
                        return None;
                    }
                }
                Err(err) => {
                    return Some(json!({
                        "server": self.server_block(server),
                        "error": {"code": 400, "description": err.to_string()},
                    }));
                }
            }
        }
        let data = match kind {
            "IDZ" => {
                let block = self.server_block(server);
                return Some(json!({
                    "name": block["name"],
                    "host": block["host"],
                    "id": block["id"],
                }));
            }
            "STATSZ" => {
                return Some(json!({
                    "server": self.server_block(server),
                    "statsz": statsz(server),
                }))
            }
            "VARZ" => monitor::varz_json(server),
            "CONNZ" => monitor::connz_json(server, &HashMap::new()),
            "JSZ" => monitor::jsz_json(server),
            "HEALTHZ" => json!({"status": "ok", "status_code": 200}),
            _ => return None,
        };
        Some(json!({ "server": self.server_block(server), "data": data }))
    }
}

/// The `client` block of a connect or disconnect event.
fn client_block(conn: &Connection, account: &Account, stop: Option<SystemTime>) -> Value {
    let info = conn.info.lock().expect("info lock poisoned").clone();
    let mut c = json!({
        "start": monitor::rfc3339(conn.start),
        "host": conn.peer.ip().to_string(),
        "id": conn.handle.id,
        "acc": &**account.name(),
    });
    for (key, value) in [
        ("user", info.authorized_user),
        ("name", info.name),
        ("lang", info.lang),
        ("ver", info.version),
    ] {
        if !value.is_empty() {
            c[key] = json!(value);
        }
    }
    if let Some(stop) = stop {
        c["stop"] = json!(monitor::rfc3339(stop));
    }
    c["kind"] = json!("Client");
    c["client_type"] = json!("nats");
    c
}

/// nats-server's `statsz` fields that this server has.
fn statsz(server: &Server) -> Value {
    let counters = server.counters();
    let conns = server.connections();
    let subscriptions: usize = conns.iter().map(|c| c.handle.num_subs()).sum();
    let (in_msgs, in_bytes) = (
        counters.in_msgs.load(Ordering::Relaxed),
        counters.in_bytes.load(Ordering::Relaxed),
    );
    let (out_msgs, out_bytes) = (
        counters.out_msgs.load(Ordering::Relaxed),
        counters.out_bytes.load(Ordering::Relaxed),
    );
    let mut v = json!({
        "start": monitor::rfc3339(server.start_time()),
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "connections": conns.len(),
        "total_connections": server.total_connections(),
        "subscriptions": subscriptions,
        "sent": {"msgs": out_msgs, "bytes": out_bytes},
        "received": {"msgs": in_msgs, "bytes": in_bytes},
        "slow_consumers": counters.slow_consumers.load(Ordering::Relaxed),
        // This server and those it has a route to.
        "active_servers": 1 + server.cluster().map_or(0, |c| c.peers().len()),
    });
    if let Some(mem) = monitor::resident_memory_bytes() {
        v["mem"] = json!(mem);
    }
    v
}

/// The options of a `$SYS.REQ.SERVER…` request body that decide whether this server answers
/// (nats-server's `EventFilterOptions` and `JSzOptions.leader_only`); other fields are
/// ignored.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct RequestOptions {
    #[serde(flatten)]
    filter: EventFilter,
    leader_only: bool,
}

/// nats-server's `EventFilterOptions`: which servers answer a request.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct EventFilter {
    server_name: String,
    cluster: String,
    host: String,
    exact_match: bool,
    tags: Vec<String>,
    domain: String,
}

impl EventFilter {
    /// Whether `server` is left out (nats-server's `filterRequest`).
    fn leaves_out(&self, server: &Server) -> bool {
        let name = server.server_name();
        let host = server
            .client_addr()
            .map_or_else(|| server.options().host.clone(), |a| a.ip().to_string());
        let cluster = server
            .cluster()
            .map(|c| c.name().to_string())
            .unwrap_or_default();
        let differs = |want: &str, have: &str| {
            !want.is_empty()
                && if self.exact_match {
                    want != have
                } else {
                    !have.contains(want)
                }
        };
        if differs(&self.server_name, name)
            || differs(&self.host, &host)
            || differs(&self.cluster, &cluster)
        {
            return true;
        }
        let have = &server.options().server_tags;
        if self
            .tags
            .iter()
            .any(|t| !have.contains(&t.trim().to_lowercase()))
        {
            return true;
        }
        // No JetStream domain here: a request for one leaves this server out.
        !self.domain.is_empty()
    }
}

/// Whether `server` answers a `leader_only` JSZ request: the meta leader in a cluster, any
/// JetStream server outside one.
fn leads_jetstream(server: &Server) -> bool {
    if !server.options().jetstream {
        return false;
    }
    match (server.cluster(), server.meta()) {
        (Some(_), Some(meta)) => meta.is_leader(),
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// Answers `$SYS.REQ.SERVER.PING[.<KIND>]` and `$SYS.REQ.SERVER.<id>.<KIND>`: for this
/// server's clients, or, once [clustered](System::join_cluster), for every server's.
struct Requests {
    server: Weak<Server>,
    clustered: bool,
}

impl InternalHandler for Requests {
    fn clustered(&self) -> bool {
        self.clustered
    }

    fn on_message(&self, msg: RoutedMsg<'_>, _later: &mut BurstWork) {
        let (Some(server), Some(reply)) = (self.server.upgrade(), msg.reply) else {
            return;
        };
        let Some(system) = server.system() else {
            return;
        };
        let subject = String::from_utf8_lossy(msg.subject);
        let kind = subject
            .strip_prefix("$SYS.REQ.SERVER.PING")
            .map(|rest| rest.strip_prefix('.'))
            .unwrap_or_else(|| subject.rsplit('.').next());
        let Some(body) = system.answer(&server, kind, msg.payload) else {
            return;
        };
        let payload = Bytes::from(body.to_string());
        let out = RoutedMsg {
            subject: reply,
            reply: None,
            headers: None,
            payload: &payload,
            hops: 0,
            remote: None,
        };
        let mut scratch = RouteScratch::default();
        system.account.router().route(None, out, &mut scratch);
        scratch.flush_wakes();
    }
}
