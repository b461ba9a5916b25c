//! Core NATS across a cluster of three servers started with nats-server's cluster flags
//! (`--cluster nats://127.0.0.1:P --routes nats://127.0.0.1:Q --cluster_name C
//! --server_name nN`), on free loopback ports: messages, queue groups, request/reply and
//! no-responders across nodes, a node given one seed route meeting the third, clients
//! learning every node (INFO `connect_urls`), a killed node rejoining, and gossip leading to
//! a node's advertised route address (`--cluster_advertise`, `cluster { advertise }`). Every
//! test also runs against three nats-servers (`JSSERVER_TEST_BINARY=nats-server`).
//!
//! Interest travels between servers asynchronously (as on nats-server), so a test waits
//! until the publishing node's `/routez?subs=1` lists the subscriber's subject before it
//! publishes.

mod common;
#[path = "common/proxy.rs"]
mod proxy;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{free_port, TestServer};
use futures_util::StreamExt;
use proxy::Proxy;
use serde_json::Value;

/// How long a wait for a cluster condition may take (a wait, not a timing assertion).
const WAIT: Duration = Duration::from_secs(15);

/// One node: its process and ports.
struct Node {
    server: TestServer,
    name: &'static str,
    cluster: u16,
    http: u16,
    routes: Vec<u16>,
    extra: Vec<String>,
}

impl Node {
    /// Starts `name` with its client port free, monitoring on `http`, routes accepted on
    /// `cluster` and dialed to `routes`, in cluster `C`.
    fn start(name: &'static str, cluster: u16, http: u16, routes: &[u16]) -> Node {
        Node::start_with(name, cluster, http, routes, &[])
    }

    /// [`Node::start`] with `extra` arguments at the end.
    fn start_with(
        name: &'static str,
        cluster: u16,
        http: u16,
        routes: &[u16],
        extra: &[String],
    ) -> Node {
        let routes: Vec<(u16, Option<&str>)> = routes.iter().map(|&p| (p, None)).collect();
        Node::start_full(name, cluster, http, None, &routes, extra)
    }

    /// [`Node::start`] with route authorization: `own` (`user:pass`) in `--cluster` (what a
    /// server dialing it must present), and each route's `user:pass` in its `--routes` URL.
    fn start_auth(
        name: &'static str,
        cluster: u16,
        http: u16,
        own: Option<&str>,
        routes: &[(u16, Option<&str>)],
    ) -> Node {
        Node::start_full(name, cluster, http, own, routes, &[])
    }

    /// [`Node::start_auth`] with `extra` arguments at the end.
    fn start_full(
        name: &'static str,
        cluster: u16,
        http: u16,
        own: Option<&str>,
        routes: &[(u16, Option<&str>)],
        extra: &[String],
    ) -> Node {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("server.log");
        let at = |userinfo: Option<&str>| userinfo.map(|u| format!("{u}@")).unwrap_or_default();
        let mut args: Vec<String> = [
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-m",
            &http.to_string(),
            "-l",
            &log.display().to_string(),
            "--cluster",
            &format!("nats://{}127.0.0.1:{cluster}", at(own)),
            "--cluster_name",
            "C",
            "--server_name",
            name,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        if !routes.is_empty() {
            let list: Vec<String> = routes
                .iter()
                .map(|(p, u)| format!("nats://{}127.0.0.1:{p}", at(*u)))
                .collect();
            args.push("--routes".into());
            args.push(list.join(","));
        }
        args.extend_from_slice(extra);
        Node {
            server: TestServer::spawn(args, dir, log),
            name,
            cluster,
            http,
            routes: routes.iter().map(|(p, _)| *p).collect(),
            extra: extra.to_vec(),
        }
    }

    /// Starts `name` from a config file: `cluster_block` is the body of its `cluster { }`
    /// (name `C` and the listen address are added).
    fn start_conf(name: &'static str, cluster: u16, http: u16, cluster_block: &str) -> Node {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("server.log");
        let conf = dir.path().join("server.conf");
        std::fs::write(
            &conf,
            format!(
                "server_name: {name}\nlisten: \"127.0.0.1:-1\"\nhttp: \"127.0.0.1:{http}\"\n\
                 cluster {{\n  name: C\n  listen: \"127.0.0.1:{cluster}\"\n{cluster_block}\n}}\n"
            ),
        )
        .expect("write config");
        let args = vec![
            "-c".to_string(),
            conf.display().to_string(),
            "-l".to_string(),
            log.display().to_string(),
        ];
        Node {
            server: TestServer::spawn(args, dir, log),
            name,
            cluster,
            http,
            routes: Vec::new(),
            extra: Vec::new(),
        }
    }

    /// Kills it (SIGKILL) and starts it again on the same ports.
    fn restart(mut self) -> Node {
        self.server.kill9();
        Node::start_with(
            self.name,
            self.cluster,
            self.http,
            &self.routes,
            &self.extra,
        )
    }

    async fn client(&self) -> async_nats::Client {
        async_nats::connect(self.server.url())
            .await
            .expect("connect")
    }

    fn routez(&self, subs: bool) -> Value {
        let path = if subs { "/routez?subs=1" } else { "/routez" };
        serde_json::from_str(&http_get(self.http, path)).expect("routez json")
    }

    /// The names of the servers it has a route to.
    fn peers(&self) -> HashSet<String> {
        self.routez(false)["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["remote_name"].as_str().map(str::to_owned))
            .collect()
    }

    /// Waits until it has routes to exactly `names`.
    fn wait_for_peers(&self, names: &[&str]) {
        let want: HashSet<String> = names.iter().map(|n| n.to_string()).collect();
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.peers();
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: routes to {got:?}, want {want:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether server `peer` announced interest in `subject` to this node.
    fn has_interest_from(&self, peer: &str, subject: &str) -> bool {
        self.routez(true)["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["remote_name"] == peer)
            .any(|r| {
                r["subscriptions_list"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|s| s == subject))
            })
    }

    /// Waits until server `peer`'s interest in `subject` reached this node (`present`), or
    /// until it is gone (`!present`).
    fn wait_for_interest(&self, peer: &str, subject: &str, present: bool) {
        let deadline = Instant::now() + WAIT;
        while self.has_interest_from(peer, subject) != present {
            assert!(
                Instant::now() < deadline,
                "{}: interest of {peer} in {subject:?} still {}",
                self.name,
                !present
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Three nodes: n1 seeds itself (a route to itself is dropped), n2 and n3 are given n1 only
/// and meet each other through it. Returns once every node has routes to the two others.
fn three_nodes() -> [Node; 3] {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let seed = ports[0].0;
    let nodes = [
        Node::start("n1", ports[0].0, ports[0].1, &[seed]),
        Node::start("n2", ports[1].0, ports[1].1, &[seed]),
        Node::start("n3", ports[2].0, ports[2].1, &[seed]),
    ];
    nodes[0].wait_for_peers(&["n2", "n3"]);
    nodes[1].wait_for_peers(&["n1", "n3"]);
    nodes[2].wait_for_peers(&["n1", "n2"]);
    nodes
}

/// A raw client of `port` that sent `CONNECT {"protocol":1}` (so it takes asynchronous
/// INFOs), its first INFO read.
fn raw_client(port: u16) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(b"CONNECT {\"protocol\":1,\"verbose\":false}\r\nPING\r\n")
        .unwrap();
    let mut reader = std::io::BufReader::new(s);
    let mut info = String::new();
    reader.read_line(&mut info).expect("INFO");
    assert!(info.starts_with("INFO "), "{info}");
    reader
}

/// A minimal HTTP/1.0 GET of a monitoring port; the body.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect monitor");
    s.set_read_timeout(Some(WAIT)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned()
}

async fn next(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("a message in time")
        .expect("subscription open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_requests_and_no_responders_cross_the_cluster() {
    let [n1, _n2, n3] = three_nodes();
    let (a, c) = (n1.client().await, n3.client().await);

    // A subscriber on n1 gets what is published on n3.
    let mut sub = a.subscribe("orders.>").await.unwrap();
    a.flush().await.unwrap();
    n3.wait_for_interest("n1", "orders.>", true);
    c.publish("orders.new", "o-1".into()).await.unwrap();
    c.flush().await.unwrap();
    let m = next(&mut sub).await;
    assert_eq!(
        (m.subject.as_str(), &m.payload[..]),
        ("orders.new", &b"o-1"[..])
    );

    // Request on n3, responder on n1.
    let mut svc = a.subscribe("svc.price").await.unwrap();
    let responder = a.clone();
    let serving = tokio::spawn(async move {
        while let Some(req) = svc.next().await {
            let reply = req.reply.expect("a request has a reply subject");
            let body = format!("price of {}", String::from_utf8_lossy(&req.payload));
            responder.publish(reply, body.into()).await.unwrap();
            responder.flush().await.unwrap();
        }
    });
    a.flush().await.unwrap();
    n3.wait_for_interest("n1", "svc.price", true);
    let answer = tokio::time::timeout(WAIT, c.request("svc.price", "apples".into()))
        .await
        .expect("answered in time")
        .expect("answered");
    assert_eq!(&answer.payload[..], b"price of apples");

    // Nobody anywhere: no responders, from n3 at once.
    let err = c.request("svc.nobody", "x".into()).await.unwrap_err();
    assert_eq!(
        err.kind(),
        async_nats::client::RequestErrorKind::NoResponders
    );

    // The responder goes: its interest leaves n3, and requests get no responders again.
    serving.abort();
    let _ = serving.await;
    drop(a);
    n3.wait_for_interest("n1", "svc.price", false);
    let err = c.request("svc.price", "x".into()).await.unwrap_err();
    assert_eq!(
        err.kind(),
        async_nats::client::RequestErrorKind::NoResponders
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_members_on_two_nodes_get_each_message_once() {
    let [n1, n2, n3] = three_nodes();
    let (a, b, c) = (n1.client().await, n2.client().await, n3.client().await);
    let mut qa = a.queue_subscribe("jobs", "workers".into()).await.unwrap();
    let mut qb = b.queue_subscribe("jobs", "workers".into()).await.unwrap();
    a.flush().await.unwrap();
    b.flush().await.unwrap();
    n3.wait_for_interest("n1", "jobs", true);
    n3.wait_for_interest("n2", "jobs", true);

    // Published on n3, which has no member: each job to one member on n1 or n2.
    const JOBS: usize = 200;
    for i in 0..JOBS {
        c.publish("jobs", i.to_string().into()).await.unwrap();
    }
    c.flush().await.unwrap();
    let mut seen = HashSet::new();
    let (mut on_a, mut on_b) = (0, 0);
    while seen.len() < JOBS {
        let m = tokio::select! {
            m = qa.next() => { on_a += 1; m }
            m = qb.next() => { on_b += 1; m }
            () = tokio::time::sleep(Duration::from_secs(5)) => {
                panic!("only {} of {JOBS} jobs arrived", seen.len())
            }
        };
        let job = String::from_utf8(m.expect("open").payload.to_vec()).unwrap();
        assert!(seen.insert(job.clone()), "job {job} delivered twice");
    }
    assert!(
        on_a > 0 && on_b > 0,
        "both nodes' members work: {on_a} / {on_b}"
    );
    // Nothing more comes.
    let extra = tokio::time::timeout(Duration::from_millis(300), async {
        tokio::select! { m = qa.next() => m, m = qb.next() => m }
    })
    .await;
    assert!(extra.is_err(), "a job delivered twice: {extra:?}");

    // Published on n1, which has a member: jsserver gives every job to the local member.
    // nats-server 2.15 does not: it picks among its local members and the routes with
    // members at random (observed with this test), so there each job is only checked to
    // arrive once.
    for i in 0..20 {
        a.publish("jobs", format!("local-{i}").into())
            .await
            .unwrap();
    }
    a.flush().await.unwrap();
    if reference_server() {
        let mut got = HashSet::new();
        while got.len() < 20 {
            let m = tokio::select! {
                m = qa.next() => m,
                m = qb.next() => m,
                () = tokio::time::sleep(Duration::from_secs(5)) => panic!("{} of 20", got.len()),
            };
            assert!(got.insert(m.expect("open").payload), "delivered twice");
        }
        return;
    }
    for i in 0..20 {
        let m = next(&mut qa).await;
        assert_eq!(m.payload, format!("local-{i}").as_bytes());
    }
    let remote = tokio::time::timeout(Duration::from_millis(300), qb.next()).await;
    assert!(remote.is_err(), "a local publish went to the remote member");
}

/// Whether the tests run against nats-server (`JSSERVER_TEST_BINARY`), for the one place
/// where jsserver chooses differently.
fn reference_server() -> bool {
    common::server_binary().contains("nats-server")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_seed_route_is_enough_and_clients_learn_every_node() {
    // three_nodes gives n2 and n3 only n1's address: they met through n1.
    let nodes = three_nodes();
    let mut want: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.server.port))
        .collect();
    want.sort();
    for node in &nodes {
        let client = node.client().await;
        let info = client.server_info();
        let mut urls = info.connect_urls.clone();
        urls.sort();
        assert_eq!(urls, want, "{}: INFO connect_urls", node.name);
        let varz: Value = serde_json::from_str(&http_get(node.http, "/varz")).unwrap();
        assert_eq!(varz["cluster"]["name"], "C", "{varz}");
        assert_eq!(varz["cluster"]["cluster_port"], node.cluster, "{varz}");
    }
    let routez = nodes[1].routez(false);
    let to_n1 = routez["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["remote_name"] == "n1")
        .expect("a route to n1");
    assert_eq!(to_n1["did_solicit"], true, "{routez}");
    assert_eq!(to_n1["is_configured"], true, "{routez}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_rejoins_and_interest_flows_again() {
    let [n1, n2, n3] = three_nodes();
    // A client of n1 connected before (protocol 1) is told of n2's new client port by an
    // asynchronous INFO. (async-nats keeps its first INFO in `server_info()`, so this reads
    // the protocol itself.)
    let mut watcher = raw_client(n1.server.port);
    let n2 = n2.restart();
    n2.wait_for_peers(&["n1", "n3"]);
    n1.wait_for_peers(&["n2", "n3"]);
    n3.wait_for_peers(&["n1", "n2"]);
    let new_url = format!("\"127.0.0.1:{}\"", n2.server.port);
    let deadline = Instant::now() + WAIT;
    loop {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut watcher, &mut line).expect("read");
        if line.starts_with("INFO ") && line.contains("connect_urls") && line.contains(&new_url) {
            break;
        }
        assert!(
            !line.is_empty() && Instant::now() < deadline,
            "no INFO naming {new_url}; last line {line:?}"
        );
    }
    let b = n2.client().await;
    let mut sub = b.subscribe("after.restart").await.unwrap();
    b.flush().await.unwrap();
    n3.wait_for_interest("n2", "after.restart", true);
    let c = n3.client().await;
    c.publish("after.restart", "back".into()).await.unwrap();
    c.flush().await.unwrap();
    assert_eq!(&next(&mut sub).await.payload[..], b"back");
    // And the other way.
    let mut sub = c.subscribe("from.n2").await.unwrap();
    c.flush().await.unwrap();
    n2.wait_for_interest("n3", "from.n2", true);
    b.publish("from.n2", "hi".into()).await.unwrap();
    b.flush().await.unwrap();
    assert_eq!(&next(&mut sub).await.payload[..], b"hi");
    drop(n1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_dial_each_other_keep_one_route_per_pair() {
    // Every node given every other: each pair dials twice at once.
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let others =
        |i: usize| -> Vec<u16> { (0..3).filter(|&j| j != i).map(|j| ports[j].0).collect() };
    let nodes = [
        Node::start("n1", ports[0].0, ports[0].1, &others(0)),
        Node::start("n2", ports[1].0, ports[1].1, &others(1)),
        Node::start("n3", ports[2].0, ports[2].1, &others(2)),
    ];
    let names = ["n1", "n2", "n3"];
    for (i, node) in nodes.iter().enumerate() {
        let want: Vec<&str> = names.iter().copied().filter(|n| *n != names[i]).collect();
        node.wait_for_peers(&want);
    }
    // Duplicates are dropped as they are found: wait until the count settles. nats-server
    // keeps a pool of `pool_size` (3) routes per peer plus one for the system account,
    // jsserver one.
    let per_peer = if reference_server() { 4 } else { 1 };
    let deadline = Instant::now() + WAIT;
    loop {
        let counts: Vec<usize> = nodes
            .iter()
            .map(|n| n.routez(false)["routes"].as_array().map_or(0, Vec::len))
            .collect();
        if counts.iter().all(|&c| c == 2 * per_peer) {
            break;
        }
        assert!(Instant::now() < deadline, "routes per node: {counts:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // And messages still cross exactly once.
    let (a, c) = (nodes[0].client().await, nodes[2].client().await);
    let mut sub = a.subscribe("once").await.unwrap();
    a.flush().await.unwrap();
    nodes[2].wait_for_interest("n1", "once", true);
    c.publish("once", "1".into()).await.unwrap();
    c.flush().await.unwrap();
    assert_eq!(&next(&mut sub).await.payload[..], b"1");
    let again = tokio::time::timeout(Duration::from_millis(300), sub.next()).await;
    assert!(again.is_err(), "delivered twice: {again:?}");
}

/// `a` starts first: its dial to `b` fails and is retried a second later. `b` starts and
/// dials `a`, and traffic flows over that route; `a`'s retry then finds `b` connected. The
/// route already carrying traffic stays and the retry's connection is the duplicate (as
/// nats-server does), so nothing `b` sends meanwhile is lost. (Before: the route dialed by
/// the server of smaller id was kept, so half the time the working route was closed under
/// the traffic, and what was in flight on it was gone.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dial_retry_that_finds_the_peer_connected_loses_nothing_in_flight() {
    let (pa, pb) = ((free_port(), free_port()), (free_port(), free_port()));
    // `a` dials `b` by an address that is not the one `b` gives (a proxy here; a DNS name
    // or a load balancer in the field), so only a connection tells `a` it reaches `b`.
    let to_b = Proxy::start(pb.0);
    let a = Node::start("a", pa.0, pa.1, &[to_b.port]);
    let b = Node::start("b", pb.0, pb.1, &[pa.0]);
    let started = Instant::now();
    a.wait_for_peers(&["b"]);
    b.wait_for_peers(&["a"]);
    let (ca, cb) = (a.client().await, b.client().await);
    let mut sub = ca.subscribe("flow").await.unwrap();
    ca.flush().await.unwrap();
    b.wait_for_interest("a", "flow", true);
    // Publish across the retry (it comes about a second after `a` started).
    let mut sent = 0u64;
    while started.elapsed() < Duration::from_millis(2500) {
        cb.publish("flow", sent.to_string().into()).await.unwrap();
        sent += 1;
        if sent % 50 == 0 {
            cb.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    cb.flush().await.unwrap();
    for want in 0..sent {
        let got = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .unwrap_or_else(|_| panic!("message {want} of {sent} lost"))
            .expect("subscription open");
        assert_eq!(
            std::str::from_utf8(&got.payload).unwrap(),
            want.to_string(),
            "messages {want}.. of {sent}"
        );
    }
    if !reference_server() {
        // The route `b` dialed is the one kept, on both ends; no registered route was
        // closed as a duplicate.
        let routes = a.routez(false)["routes"].clone();
        let routes = routes.as_array().expect("routes");
        assert_eq!(routes.len(), 1, "{routes:?}");
        assert_eq!(routes[0]["did_solicit"], false, "{routes:?}");
        for n in [&a, &b] {
            let log = n.server.log_text();
            assert!(
                !log.contains("closed: Duplicate Route"),
                "{}: a registered route was closed as a duplicate:\n{log}",
                n.name
            );
        }
    }
}

/// Route authorization: a server given `--cluster nats://ruser:rpass@...` takes routes only
/// from servers presenting that user and password (in their route URL, or their own
/// `--cluster` credentials for a route they learned by gossip); one presenting none or a
/// wrong password is refused and never joins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_must_present_the_cluster_user_and_password() {
    let ports: Vec<(u16, u16)> = (0..4).map(|_| (free_port(), free_port())).collect();
    let secret = Some("ruser:rpass");
    let n1 = Node::start_auth("n1", ports[0].0, ports[0].1, secret, &[]);
    let n2 = Node::start_auth(
        "n2",
        ports[1].0,
        ports[1].1,
        secret,
        &[(ports[0].0, secret)],
    );
    n1.wait_for_peers(&["n2"]);
    n2.wait_for_peers(&["n1"]);
    let none = Node::start_auth("none", ports[2].0, ports[2].1, None, &[(ports[0].0, None)]);
    let wrong = Node::start_auth(
        "wrong",
        ports[3].0,
        ports[3].1,
        None,
        &[(ports[0].0, Some("ruser:guess"))],
    );
    // Each dialed at least once (their first dial is at start) and was refused.
    only_n2_joined(&n1, &n2, &[&none, &wrong], "Router authentication error").await;
    assert!(n1.server.log_text().contains("User \"ruser\""));
}

/// A test CA and route certificates it signs (for `127.0.0.1`, usable by either end of a
/// route), as PEM files.
struct RoutePki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl RoutePki {
    fn new(name: &str) -> RoutePki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let ca_key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = params.self_signed(&ca_key).expect("CA cert");
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write CA");
        RoutePki { dir, ca, ca_key }
    }

    /// The `tls { }` block of a node whose certificate this CA signs, verifying peers.
    fn tls_block(&self, node: &str) -> String {
        use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        params.distinguished_name.push(DnType::CommonName, node);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("sign");
        let (cert_file, key_file) = (
            self.dir.path().join(format!("{node}-cert.pem")),
            self.dir.path().join(format!("{node}-key.pem")),
        );
        std::fs::write(&cert_file, cert.pem()).expect("write cert");
        std::fs::write(&key_file, key.serialize_pem()).expect("write key");
        format!(
            "  tls {{\n    cert_file: {:?}\n    key_file: {:?}\n    ca_file: {:?}\n    \
             verify: true\n    timeout: 2\n  }}",
            cert_file.display().to_string(),
            key_file.display().to_string(),
            self.dir.path().join("ca.pem").display().to_string()
        )
    }
}

/// Route TLS (`cluster { tls { cert_file, key_file, ca_file, verify: true } }`): two nodes
/// whose certificates the same CA signed route over TLS and carry messages; a node without
/// TLS, and one whose certificate another CA signed, are refused and never join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_over_tls_take_only_certificates_of_the_cluster_ca() {
    let pki = RoutePki::new("cluster CA");
    let other = RoutePki::new("another CA");
    let ports: Vec<(u16, u16)> = (0..4).map(|_| (free_port(), free_port())).collect();
    let routes = |to: u16| format!("  routes: [ \"nats-route://127.0.0.1:{to}\" ]");
    let n1 = Node::start_conf("n1", ports[0].0, ports[0].1, &pki.tls_block("n1"));
    let n2 = Node::start_conf(
        "n2",
        ports[1].0,
        ports[1].1,
        &format!("{}\n{}", routes(ports[0].0), pki.tls_block("n2")),
    );
    n1.wait_for_peers(&["n2"]);
    n2.wait_for_peers(&["n1"]);
    let plain = Node::start_conf("plain", ports[2].0, ports[2].1, &routes(ports[0].0));
    let stranger = Node::start_conf(
        "stranger",
        ports[3].0,
        ports[3].1,
        &format!("{}\n{}", routes(ports[0].0), other.tls_block("stranger")),
    );
    only_n2_joined(&n1, &n2, &[&plain, &stranger], "TLS route handshake error").await;
}

/// After `outsiders` each dialed `n1` at least once: on ours `n1` logged `refusal` once
/// per outsider (nats-server is given 2 s), no outsider has a route, `n1` has one to `n2`
/// only, and that route carries a message.
async fn only_n2_joined(n1: &Node, n2: &Node, outsiders: &[&Node], refusal: &str) {
    if !reference_server() {
        let deadline = Instant::now() + WAIT;
        loop {
            let log = n1.server.log_text();
            if log.matches(refusal).count() >= outsiders.len() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no {refusal:?} in n1's log:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    } else {
        std::thread::sleep(Duration::from_secs(2));
    }
    for n in outsiders {
        assert!(
            n.peers().is_empty(),
            "{}: routes to {:?}",
            n.name,
            n.peers()
        );
    }
    let want: HashSet<String> = ["n2".to_string()].into();
    assert_eq!(n1.peers(), want);
    let (a, b) = (n1.client().await, n2.client().await);
    let mut sub = a.subscribe("admitted").await.unwrap();
    a.flush().await.unwrap();
    n2.wait_for_interest("n1", "admitted", true);
    b.publish("admitted", "1".into()).await.unwrap();
    b.flush().await.unwrap();
    assert_eq!(&next(&mut sub).await.payload[..], b"1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_message_sent_to_a_node_whose_member_left_reaches_another_member() {
    let [n1, n2, n3] = three_nodes();
    let (a, b, c) = (n1.client().await, n2.client().await, n3.client().await);
    // n1's member takes three jobs and goes (UNSUB with a max); n2's stays.
    let mut qa = a.queue_subscribe("jobs", "workers".into()).await.unwrap();
    qa.unsubscribe_after(3).await.unwrap();
    let mut qb = b.queue_subscribe("jobs", "workers".into()).await.unwrap();
    a.flush().await.unwrap();
    b.flush().await.unwrap();
    n3.wait_for_interest("n1", "jobs", true);
    n3.wait_for_interest("n2", "jobs", true);

    // A burst on n3, sent before n3 can hear that n1's member left: n1 is chosen for jobs it
    // has no member for any more, and passes them on to n2 (nats-server's processMsgResults:
    // a routed queue message no local member takes goes to a route with members).
    const JOBS: usize = 200;
    for i in 0..JOBS {
        c.publish("jobs", i.to_string().into()).await.unwrap();
    }
    c.flush().await.unwrap();
    let mut seen = HashSet::new();
    let mut on_a = 0;
    while seen.len() < JOBS {
        let m = tokio::select! {
            Some(m) = qa.next() => { on_a += 1; m }
            m = qb.next() => m.expect("open"),
            () = tokio::time::sleep(Duration::from_secs(5)) => {
                panic!("only {} of {JOBS} jobs arrived", seen.len())
            }
        };
        let job = String::from_utf8(m.payload.to_vec()).unwrap();
        assert!(seen.insert(job.clone()), "job {job} delivered twice");
    }
    assert!(on_a <= 3, "n1's member got {on_a} jobs past its max of 3");
    let extra = tokio::time::timeout(Duration::from_millis(300), qb.next()).await;
    assert!(extra.is_err(), "a job delivered twice: {extra:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gossip_leads_to_the_advertised_route_address() {
    // n1 dials nobody; n2 and n3 dial n1 only, and each advertises a proxy in front of its
    // cluster port (n2 with --cluster_advertise, n3 with `advertise` in its config file).
    // They learn of each other from n1, so the route between them can only go through the
    // proxies: cutting the proxies parts n2 from n3 and leaves n1's routes alone.
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let (p2, p3) = (Proxy::start(ports[1].0), Proxy::start(ports[2].0));
    let n1 = Node::start("n1", ports[0].0, ports[0].1, &[]);
    let n2 = Node::start_with(
        "n2",
        ports[1].0,
        ports[1].1,
        &[ports[0].0],
        &[
            "--cluster_advertise".into(),
            format!("127.0.0.1:{}", p2.port),
            "--connect_retries".into(),
            "120".into(),
        ],
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("n3.conf");
    std::fs::write(
        &conf,
        format!(
            "server_name: n3\nhttp: 127.0.0.1:{}\ncluster {{\n  name: C\n  \
             listen: 127.0.0.1:{}\n  advertise: \"127.0.0.1:{}\"\n  \
             routes: [ nats-route://127.0.0.1:{} ]\n  connect_retries: 120\n}}\n",
            ports[2].1, ports[2].0, p3.port, ports[0].0
        ),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let args: Vec<String> = [
        "-a",
        "127.0.0.1",
        "-p",
        "-1",
        "-l",
        &log.display().to_string(),
        "-c",
        &conf.display().to_string(),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let n3 = Node {
        server: TestServer::spawn(args, dir, log),
        name: "n3",
        cluster: ports[2].0,
        http: ports[2].1,
        routes: vec![ports[0].0],
        extra: Vec::new(),
    };
    n1.wait_for_peers(&["n2", "n3"]);
    n2.wait_for_peers(&["n1", "n3"]);
    n3.wait_for_peers(&["n1", "n2"]);
    assert!(
        p2.forwarded() + p3.forwarded() > 0,
        "n2 and n3 met without their advertised addresses"
    );
    p2.cut();
    p3.cut();
    n2.wait_for_peers(&["n1"]);
    n3.wait_for_peers(&["n1"]);
    n1.wait_for_peers(&["n2", "n3"]);
    // Healed, they meet again through the proxies (a learned route is retried
    // `connect_retries` times).
    p2.heal();
    p3.heal();
    n2.wait_for_peers(&["n1", "n3"]);
    n3.wait_for_peers(&["n1", "n2"]);
}
