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
//! Every message carries nats-server's `server` block (name, host, id, version, tags when
//! `server_tags` has any, JetStream, a sequence number and the time). Other accounts see none of it. Not here yet: the periodic
//! `$SYS.SERVER.<id>.STATSZ`, the account connection-count events (`...CONNS`), and the
//! account-scoped requests (`$SYS.REQ.ACCOUNT.…`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
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
}

impl System {
    /// The system account `account`.
    pub fn new(account: Arc<Account>) -> Self {
        System {
            account,
            seq: AtomicU64::new(0),
        }
    }

    /// The system account.
    pub fn account(&self) -> &Arc<Account> {
        &self.account
    }

    /// Subscribes the request handlers in the system account.
    pub fn start(&self, server: &Arc<Server>) {
        let handler: Arc<dyn InternalHandler> = Arc::new(Requests {
            server: Arc::downgrade(server),
        });
        for subject in [
            "$SYS.REQ.SERVER.PING".to_owned(),
            "$SYS.REQ.SERVER.PING.*".to_owned(),
            format!("$SYS.REQ.SERVER.{}.*", server.server_id()),
        ] {
            self.account
                .router()
                .subscribe_internal(subject.as_bytes(), None, Arc::clone(&handler))
                .expect("system subjects are valid");
        }
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

    /// The answer to a `$SYS.REQ.SERVER…` request of `kind` (`None`: a plain PING).
    fn answer(&self, server: &Server, kind: Option<&str>) -> Option<Value> {
        let data = match kind.unwrap_or("STATSZ") {
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
        "active_servers": 1,
    });
    if let Some(mem) = monitor::resident_memory_bytes() {
        v["mem"] = json!(mem);
    }
    v
}

/// Answers `$SYS.REQ.SERVER.PING[.<KIND>]` and `$SYS.REQ.SERVER.<id>.<KIND>`.
struct Requests {
    server: Weak<Server>,
}

impl InternalHandler for Requests {
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
        let Some(body) = system.answer(&server, kind) else {
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
