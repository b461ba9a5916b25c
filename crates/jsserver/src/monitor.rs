//! The HTTP monitoring endpoint (`-m/--http_port`, or HTTPS with `-ms/--https_port`): `/varz`,
//! `/connz`, `/healthz`, `/jsz`.
//!
//! Field names and units follow nats-server's monitoring JSON (durations in nanoseconds where it
//! uses numbers, Go duration strings such as `"1m2s"` where it uses strings, RFC 3339 times).
//! Fields for features this server does not have (gateways, leaf nodes, route TLS, ...) are
//! left out rather than filled with made-up values.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tracing::warn;

use crate::options::SyncPolicy;
use crate::server::{Server, NATS_VERSION};

/// Serves the monitoring endpoint on `listener` until the server shuts down: plain HTTP, or
/// HTTPS with `tls` (the `tls` block's certificate without client certificates,
/// [`crate::tls::TlsOptions::monitor_config`]), each connection's handshake bounded by the
/// TLS `timeout`.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let shutdown = server.shutdown_token();
    let tls_timeout = server
        .options()
        .tls
        .as_ref()
        .map_or(crate::tls::DEFAULT_TLS_TIMEOUT, |t| t.timeout);
    let app = Router::new()
        .route("/", get(root))
        .route("/varz", get(varz))
        .route("/connz", get(connz))
        .route("/routez", get(routez))
        .route("/healthz", get(healthz))
        .route("/jsz", get(jsz))
        .with_state(server);
    let result = match tls {
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await
        }
        Some(config) => {
            let listener = TlsListener::new(listener, config, tls_timeout);
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await
        }
    };
    if let Err(err) = result {
        warn!(error = %err, "monitoring endpoint stopped");
    }
}

fn json_response(value: Value) -> Response {
    ([(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")], Json(value)).into_response()
}

async fn root() -> Response {
    json_response(json!({
        "endpoints": ["/varz", "/connz", "/routez", "/healthz", "/jsz"],
    }))
}

async fn healthz(
    State(server): State<Arc<Server>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    use jsproto::api::cluster::Health;
    let on = |k: &str| params.get(k).is_some_and(|x| x == "true" || x == "1");
    let view = server.meta().map(|m| m.view());
    let leaderless = view.as_ref().is_some_and(|v| v.leader.is_none());
    if !leaderless || on("js-server-only") || on("js-enabled-only") {
        return json_response(healthz_json());
    }
    // As nats-server 2.15.1 in a JetStream cluster whose meta group has no leader: never
    // had one since start-up, or lost it.
    let had = view.is_some_and(|v| v.had_leader);
    let mut health = if on("details") {
        Health::no_meta_leader_details()
    } else {
        Health::no_meta_leader()
    };
    if had {
        health.error = health
            .error
            .replace(jsproto::api::cluster::NO_META_LEADER, LOST_META_LEADER);
        for issue in &mut health.errors {
            issue.error = LOST_META_LEADER.to_string();
        }
    }
    let status =
        StatusCode::from_u16(health.http_status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let body = serde_json::to_value(&health).unwrap_or(Value::Null);
    (status, json_response(body)).into_response()
}

/// `/healthz`'s error text once the meta leader a server knew is gone (nats-server 2.15.1's,
/// seen in `tests/cluster_meta.rs`).
const LOST_META_LEADER: &str = "JetStream is not current with the meta leader";

/// `/healthz`'s body when healthy: `{"status":"ok"}`. In a JetStream cluster whose meta group
/// has no leader, `/healthz` answers HTTP 503 with
/// [`jsproto::api::cluster::Health::no_meta_leader`] (the `?details=true` form
/// [`jsproto::api::cluster::Health::no_meta_leader_details`]), as nats-server 2.15.1.
pub fn healthz_json() -> Value {
    json!({ "status": "ok" })
}

async fn varz(State(server): State<Arc<Server>>) -> Response {
    json_response(varz_json(&server))
}

/// `/varz`'s body (also the system account's `VARZ` answer).
pub fn varz_json(server: &Server) -> Value {
    let opts = server.options();
    let now = SystemTime::now();
    let counters = server.counters();
    let conns = server.connections();
    let subscriptions: usize = conns.iter().map(|c| c.handle.num_subs()).sum();
    let addr = server.client_addr();
    let mut v = json!({
        "server_id": server.server_id(),
        "server_name": server.server_name(),
        "version": NATS_VERSION,
        "proto": 1,
        "host": addr.map_or_else(|| opts.host.clone(), |a| a.ip().to_string()),
        "port": addr.map_or(opts.port, |a| a.port()),
        "ping_interval": nanos(opts.ping_interval),
        "ping_max": opts.ping_max,
        "http_host": opts.http_host,
        "http_port": opts.http_port.unwrap_or(0),
        "max_control_line": opts.max_control_line,
        "max_payload": opts.max_payload,
        "max_pending": opts.max_pending,
        "write_deadline": nanos(opts.write_deadline),
        "start": rfc3339(server.start_time()),
        "now": rfc3339(now),
        "uptime": go_duration(now.duration_since(server.start_time()).unwrap_or_default()),
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "connections": conns.len(),
        "total_connections": server.total_connections(),
        "in_msgs": counters.in_msgs.load(Ordering::Relaxed),
        "in_bytes": counters.in_bytes.load(Ordering::Relaxed),
        "out_msgs": counters.out_msgs.load(Ordering::Relaxed),
        "out_bytes": counters.out_bytes.load(Ordering::Relaxed),
        "slow_consumers": counters.slow_consumers.load(Ordering::Relaxed),
        "subscriptions": subscriptions,
    });
    if let Some(rss) = resident_memory_bytes() {
        v["mem"] = json!(rss);
    }
    // `max_subscriptions`, omitted when 0 (no limit), as nats-server's `omitempty`.
    if opts.max_subscriptions > 0 {
        v["max_subscriptions"] = json!(opts.max_subscriptions);
    }
    // `server_tags`, lower-cased; omitted when none (nats-server's `tags,omitempty`).
    if !opts.server_tags.is_empty() {
        v["tags"] = json!(opts.server_tags);
    }
    if opts.jetstream {
        v["jetstream"] = json!({ "config": jetstream_config(server) });
    }
    if let Some(ws) = &opts.websocket {
        // nats-server's fields; false and empty ones left out, as there.
        let addr = server.websocket_addr();
        let mut w = json!({
            "host": addr.map_or_else(|| ws.host.clone(), |a| a.ip().to_string()),
            "port": addr.map_or(ws.port, |a| a.port()),
            "handshake_timeout": nanos(ws.handshake_timeout),
        });
        if ws.no_tls {
            w["no_tls"] = json!(true);
        }
        if ws.same_origin {
            w["same_origin"] = json!(true);
        }
        if !ws.allowed_origins.is_empty() {
            w["allowed_origins"] = json!(ws.allowed_origins);
        }
        if ws.compression {
            w["compression"] = json!(true);
        }
        v["websocket"] = w;
    }
    if let Some(cluster) = server.cluster() {
        // nats-server's `cluster` section (no TLS or route authorization here, so no
        // `tls_*` or `auth_timeout`), and its top-level `connect_urls` and `routes` count.
        let addr = cluster.listen_addr();
        v["cluster"] = json!({
            "name": cluster.name(),
            "addr": addr.ip().to_string(),
            "cluster_port": addr.port(),
            "urls": cluster.configured_routes(),
        });
        v["connect_urls"] = json!(cluster.client_urls());
        v["routes"] = json!(cluster.routes().len());
    }
    v
}

async fn routez(
    State(server): State<Arc<Server>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    json_response(routez_json(&server, &params))
}

/// `/routez`'s body, with nats-server's field names: the server's routes to the other
/// servers of its cluster (none when it is not in one); `subs=1` adds each route's
/// `subscriptions_list` (the subjects its server announced interest in).
pub fn routez_json(server: &Server, params: &HashMap<String, String>) -> Value {
    let subs = params
        .get("subs")
        .is_some_and(|v| v == "1" || v == "true" || v == "detail");
    let now = SystemTime::now();
    let routes: Vec<Value> = server
        .cluster()
        .map(|c| c.routes())
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            let mut v = serde_json::to_value(&r).expect("a RouteInfo serializes");
            v["start"] = json!(rfc3339(r.start));
            v["last_activity"] = json!(rfc3339(r.last_activity));
            v["uptime"] = json!(go_duration(now.duration_since(r.start).unwrap_or_default()));
            v["idle"] = json!(go_duration(
                now.duration_since(r.last_activity).unwrap_or_default()
            ));
            if subs {
                v["subscriptions_list"] = json!(r.subscriptions_list);
            }
            v
        })
        .collect();
    json!({
        "server_id": server.server_id(),
        "server_name": server.server_name(),
        "now": rfc3339(now),
        "num_routes": routes.len(),
        "routes": routes,
    })
}

async fn connz(
    State(server): State<Arc<Server>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    json_response(connz_json(&server, &params))
}

/// `/connz`'s body for the query `params` (`offset`, `limit`, `subs`, `auth`).
pub fn connz_json(server: &Server, params: &HashMap<String, String>) -> Value {
    let offset: usize = params
        .get("offset")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let limit: usize = params
        .get("limit")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let subs = params
        .get("subs")
        .is_some_and(|v| v == "1" || v == "true" || v == "detail");
    let auth = params.get("auth").is_some_and(|v| v == "1" || v == "true");
    let now = SystemTime::now();
    let all = server.connections();
    let list: Vec<Value> = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(|c| {
            let h = &c.handle;
            let last = SystemTime::UNIX_EPOCH
                + Duration::from_nanos(c.last_activity_ns.load(Ordering::Relaxed));
            let info = c.info.lock().expect("info lock poisoned").clone();
            let mut v = json!({
                "cid": h.id,
                "kind": "Client",
                "type": "nats",
                "ip": c.peer.ip().to_string(),
                "port": c.peer.port(),
                "start": rfc3339(c.start),
                "last_activity": rfc3339(last),
                "uptime": go_duration(now.duration_since(c.start).unwrap_or_default()),
                "idle": go_duration(now.duration_since(last).unwrap_or_default()),
                "pending_bytes": h.outbound.pending_bytes(),
                "in_msgs": h.counters.in_msgs.load(Ordering::Relaxed),
                "out_msgs": h.counters.out_msgs.load(Ordering::Relaxed),
                "in_bytes": h.counters.in_bytes.load(Ordering::Relaxed),
                "out_bytes": h.counters.out_bytes.load(Ordering::Relaxed),
                "subscriptions": h.num_subs(),
            });
            for (key, value) in [
                ("name", info.name),
                ("lang", info.lang),
                ("version", info.version),
            ] {
                if !value.is_empty() {
                    v[key] = json!(value);
                }
            }
            if auth {
                if !info.authorized_user.is_empty() {
                    v["authorized_user"] = json!(info.authorized_user);
                }
                let account = c.account();
                if **account.name() != *crate::auth::accounts::GLOBAL_ACCOUNT {
                    v["account"] = json!(&**account.name());
                }
            }
            if subs {
                let mut list = h.sub_subjects();
                list.sort();
                v["subscriptions_list"] = json!(list);
            }
            v
        })
        .collect();
    json!({
        "server_id": server.server_id(),
        "now": rfc3339(now),
        "num_connections": list.len(),
        "total": all.len(),
        "offset": offset,
        "limit": limit,
        "connections": list,
    })
}

async fn jsz(
    State(server): State<Arc<Server>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let mut v = jsz_json(&server);
    let on = |k: &str| params.get(k).is_some_and(|x| x == "true" || x == "1");
    if on("accounts") || on("streams") {
        v["account_details"] = account_details(&server, on("streams"));
    }
    json_response(v)
}

/// `/jsz?accounts=true[&streams=true]`'s `account_details`, as nats-server's: each account
/// with JetStream, and with `streams` each stream this server holds (`name`, `cluster.leader`
/// as this server knows it, `state` with `messages`, `bytes`, `first_seq`, `last_seq`,
/// `consumer_count`).
fn account_details(server: &Server, streams: bool) -> Value {
    let list: Vec<Value> = server
        .accounts()
        .iter()
        .filter_map(|a| {
            let stats = a.jetstream_stats()?;
            let mut v = json!({ "name": a.name().to_string(), "id": a.name().to_string() });
            if streams {
                let held = stats.streams.lock().expect("stats lock poisoned");
                let detail: Vec<Value> = held
                    .iter()
                    .map(|(name, (shared, _))| {
                        let mut s = json!({
                            "name": name,
                            "state": {
                                "messages": shared.msgs.load(Ordering::Relaxed),
                                "bytes": shared.bytes.load(Ordering::Relaxed),
                                "first_seq": shared.first_seq.load(Ordering::Relaxed),
                                "last_seq": shared.last_seq.load(Ordering::Relaxed),
                                "consumer_count": shared.consumers.load(Ordering::Relaxed),
                            },
                        });
                        let leader = shared.leader_name();
                        let leader = if leader.is_empty() && shared.leader.load(Ordering::Relaxed) {
                            server.server_name().to_string()
                        } else {
                            leader
                        };
                        if !leader.is_empty() {
                            s["cluster"] = json!({ "leader": leader });
                        }
                        s
                    })
                    .collect();
                v["stream_detail"] = json!(detail);
            }
            Some(v)
        })
        .collect();
    json!(list)
}

/// `/jsz`'s body.
pub fn jsz_json(server: &Server) -> Value {
    let now = SystemTime::now();
    if !server.options().jetstream {
        return json!({
            "server_id": server.server_id(),
            "now": rfc3339(now),
            "disabled": true,
        });
    }
    let mut v = json!({
        "server_id": server.server_id(),
        "now": rfc3339(now),
        "config": jetstream_config(server),
    });
    if let (Some(meta), Some(cluster)) = (server.meta(), server.cluster()) {
        // As nats-server's `meta_cluster`: the meta group's name, leader and size, and the
        // other members.
        let view = meta.view();
        let me = server.server_name();
        let peers = cluster.peers();
        let replicas: Vec<Value> = view
            .members
            .iter()
            .filter(|m| m.as_str() != me)
            .map(|m| {
                let up = peers.iter().any(|p| &p.name == m);
                json!({ "name": m, "current": up, "offline": !up })
            })
            .collect();
        let mut mc = json!({
            "name": cluster.name(),
            "cluster_size": view.members.len(),
            "replicas": replicas,
        });
        if let Some(leader) = &view.leader {
            mc["leader"] = json!(leader);
        }
        v["meta_cluster"] = mc;
    }
    let stats = server.jetstream_stats();
    if !stats.is_empty() {
        let mut total = crate::jetstream::JsUsage::default();
        let (mut api_total, mut api_errors) = (0, 0);
        for s in &stats {
            let u = s.usage();
            total.memory += u.memory;
            total.storage += u.storage;
            total.streams += u.streams;
            total.consumers += u.consumers;
            total.messages += u.messages;
            total.bytes += u.bytes;
            api_total += s.api_total.load(Ordering::Relaxed);
            api_errors += s.api_errors.load(Ordering::Relaxed);
        }
        v["memory"] = json!(total.memory);
        v["storage"] = json!(total.storage);
        v["streams"] = json!(total.streams);
        v["consumers"] = json!(total.consumers);
        v["messages"] = json!(total.messages);
        v["bytes"] = json!(total.bytes);
        v["accounts"] = json!(stats.len());
        v["api"] = json!({
            "level": jsproto::api::API_LEVEL,
            "total": api_total,
            "errors": api_errors,
        });
    }
    v
}

fn jetstream_config(server: &Server) -> Value {
    let opts = server.options();
    let mut config = json!({
        "store_dir": opts.jetstream_dir().display().to_string(),
        "sync_interval": match opts.sync_interval {
            SyncPolicy::Interval(d) => nanos(d),
            SyncPolicy::Always => 0,
        },
    });
    if let SyncPolicy::Always = opts.sync_interval {
        config["sync_always"] = json!(true);
    }
    if let Some(max) = opts.max_memory_store {
        config["max_memory"] = json!(max);
    }
    if let Some(max) = opts.max_file_store {
        config["max_storage"] = json!(max);
    }
    config
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A time as RFC 3339 with nanoseconds, UTC, as nats-server's JSON.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_nanos(t).to_string()
}

/// A duration the way nats-server's monitoring prints uptimes and idle times (its `myUptime`):
/// whole seconds, `0s`, `1m2s`, `3h4m5s`, and from one day on with days and every smaller unit,
/// `2d3h4m5s`, `1d0h0m7s`.
///
/// Under a day this is Go's `Duration.String` of the whole seconds
/// ([`jsproto::duration::format_go_duration`]); the days are this endpoint's own rule.
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    if days == 0 {
        return jsproto::duration::format_go_duration(Duration::from_secs(rest));
    }
    let (h, m, s) = (rest / 3600, (rest % 3600) / 60, rest % 60);
    format!("{days}d{h}h{m}m{s}s")
}

/// The process's resident set size in bytes, from `/proc/self/statm` (Linux only).
pub fn resident_memory_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// HTTPS monitoring: accepts TCP connections and hands axum those whose TLS handshake
/// succeeded within the TLS `timeout`. Each handshake runs in its own task, so a client that
/// never finishes one holds up nobody else.
struct TlsListener {
    local: std::net::SocketAddr,
    ready: tokio::sync::mpsc::Receiver<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        std::net::SocketAddr,
    )>,
}

impl TlsListener {
    fn new(
        listener: TcpListener,
        config: Arc<rustls::ServerConfig>,
        timeout: std::time::Duration,
    ) -> Self {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, ready) = tokio::sync::mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (socket, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        warn!(error = %err, "error accepting monitoring connection");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    break;
                }
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(timeout, acceptor.accept(socket)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(err)) => {
                            tracing::debug!("{peer} - monitoring TLS handshake error: {err}");
                        }
                        Err(_) => tracing::debug!("{peer} - monitoring TLS handshake timeout"),
                    }
                });
            }
        });
        TlsListener { local, ready }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept task only stops once this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_nats_server_uptimes() {
        assert_eq!(go_duration(Duration::from_millis(900)), "0s");
        assert_eq!(go_duration(Duration::from_secs(62)), "1m2s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(
            go_duration(Duration::from_secs(2 * 86_400 + 3 * 3600 + 4 * 60 + 5)),
            "2d3h4m5s"
        );
    }
}
