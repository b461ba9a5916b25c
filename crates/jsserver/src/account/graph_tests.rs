//! No graph of imports, however it loops, makes routing recurse without a bound: random
//! accounts with random stream and service imports (literal and wildcard subjects, `prefix`
//! and `to`, from any account including their own, loops and all: the start-up check
//! ([`crate::auth::accounts`]) is left out, so the router meets every graph) are built in
//! process, and random publishes, requests, responses (to the reply subjects the
//! subscribers saw, so responses chain through imports), interest checks, subscribes and
//! unsubscribes run against them. Each must finish, never inside more than
//! [`MAX_CROSSINGS`] imports at once, on a bounded stack, and with a number of crossings
//! bounded by the graph's size (not its number of paths).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::crossing::{Crossing, MAX_CROSSINGS};
use super::Accounts;
use crate::auth::accounts::{
    AccountConfig, ClientLimits, Export, Import, ResponseType, ShareKind,
    DEFAULT_RESPONSE_THRESHOLD,
};
use crate::auth::config::AuthOptions;
use crate::connection::outbound::Take;
use crate::router::{ClientHandle, Counters, RouteScratch, RoutedMsg, Router};

/// Export and import subjects: literals and wildcards that overlap in every way.
const PATTERNS: &[&str] = &["s", "s.a", "s.b", "s.*", "s.>", "x.s.a", "x.>", ">"];
/// Subjects published to (the `to`/`prefix` forms of the patterns included).
const LITERALS: &[&str] = &[
    "s", "s.a", "s.b", "x.s", "x.s.a", "x.s.b", "p.s", "p.s.a", "p.x.s.a", "y.s.b", "x.x.s.a", "z",
];
/// Most stack one operation may use below the test's own frame, in bytes: the deepest
/// nesting allowed ([`MAX_CROSSINGS`]) takes some 45 KiB in a debug build; an unbounded
/// loop blows through this (or the thread's stack) at once.
const STACK_BUDGET: usize = 256 << 10;

#[derive(Debug, Clone)]
struct GenExport {
    service: bool,
    pattern: usize,
    response: ResponseType,
}

#[derive(Debug, Clone)]
struct GenImport {
    service: bool,
    from: usize,
    /// Which of the exporter's exports of that kind (modulo their number), and which of its
    /// subjects.
    export: usize,
    narrow: usize,
    /// 0: the same subject; 1: a `prefix` (streams) or `to: x.<subject>`; 2: `to:
    /// y.<subject>` (stream) or back onto another pattern when both are literal.
    local: u8,
}

#[derive(Debug, Clone)]
enum Op {
    /// A client of account `.0` subscribes to pattern or literal `.1` (sid per client).
    Sub(usize, usize, usize),
    /// Client `.1` of account `.0` drops its oldest subscription.
    Unsub(usize, usize),
    /// A publish in account `.0` on a literal (`.1` picks one, among those an import
    /// listens on there if any); a request when `.2` is `Some`, its reply
    /// subject picked among an inbox and the reply subjects seen in that account so far
    /// (a request whose responses go back through another import: how chains are made).
    Pub(usize, usize, Option<usize>),
    /// A response: a publish on one of the reply subjects seen so far (`.0`), in the
    /// account it was seen in, itself a request when `.1` is `Some` (as for `Pub`).
    Respond(usize, Option<usize>),
    /// Interest in account `.0` on a literal (picked as for `Pub`) for a message `.2`
    /// imports carried there.
    Interest(usize, usize, u8),
}

fn export() -> impl Strategy<Value = GenExport> {
    (
        any::<bool>(),
        0..PATTERNS.len(),
        prop_oneof![
            Just(ResponseType::Singleton),
            Just(ResponseType::Stream),
            Just(ResponseType::Chunked)
        ],
    )
        .prop_map(|(service, pattern, response)| GenExport {
            service,
            pattern,
            response,
        })
}

fn import(accounts: usize) -> impl Strategy<Value = GenImport> {
    (
        any::<bool>(),
        0..accounts,
        any::<usize>(),
        any::<usize>(),
        0u8..3,
    )
        .prop_map(|(service, from, export, narrow, local)| GenImport {
            service,
            from,
            export,
            narrow,
            local,
        })
}

fn op(accounts: usize) -> impl Strategy<Value = Op> {
    let n = LITERALS.len() + PATTERNS.len() + 1;
    prop_oneof![
        (0..accounts, 0..3usize, 0..n).prop_map(|(a, c, s)| Op::Sub(a, c, s)),
        (0..accounts, 0..3usize).prop_map(|(a, c)| Op::Unsub(a, c)),
        (
            0..accounts,
            any::<usize>(),
            prop::option::of(any::<usize>())
        )
            .prop_map(|(a, s, r)| Op::Pub(a, s, r)),
        (any::<usize>(), prop::option::of(any::<usize>())).prop_map(|(s, r)| Op::Respond(s, r)),
        (0..accounts, any::<usize>(), 0u8..3).prop_map(|(a, s, h)| Op::Interest(a, s, h)),
    ]
}

/// One account: its exports, its imports, and whether a client listens on `>` there from
/// the start.
type GenAccount = (Vec<GenExport>, Vec<GenImport>, bool);

/// A graph of accounts; then the operations.
fn case() -> impl Strategy<Value = (Vec<GenAccount>, Vec<Op>)> {
    (1usize..=4).prop_flat_map(|n| {
        (
            prop::collection::vec(
                (
                    prop::collection::vec(export(), 1..4),
                    prop::collection::vec(import(n), 0..8),
                    any::<bool>(),
                ),
                n,
            ),
            prop::collection::vec(op(n), 1..80),
        )
    })
}

/// The patterns `narrow` picks from under `pattern` (itself first).
fn within(pattern: &str) -> Vec<&'static str> {
    PATTERNS
        .iter()
        .copied()
        .filter(|p| jsproto::subject::is_subset(p.as_bytes(), pattern.as_bytes()))
        .collect()
}

/// The accounts block of a generated graph: every import lies within an export of its
/// exporter (the router relies on that), nothing else is checked.
fn configs(graph: &[GenAccount]) -> Vec<AccountConfig> {
    let name = |i: usize| format!("A{i}");
    let mut accounts: Vec<AccountConfig> = graph
        .iter()
        .enumerate()
        .map(|(i, (exports, _, _))| AccountConfig {
            name: name(i),
            users: Vec::new(),
            nkeys: Vec::new(),
            jetstream: None,
            exports: exports
                .iter()
                .map(|e| Export {
                    kind: if e.service {
                        ShareKind::Service
                    } else {
                        ShareKind::Stream
                    },
                    subject: PATTERNS[e.pattern].to_owned(),
                    accounts: Vec::new(),
                    response: e.response,
                    threshold: DEFAULT_RESPONSE_THRESHOLD,
                })
                .collect(),
            imports: Vec::new(),
            limits: ClientLimits::default(),
        })
        .collect();
    for (i, (_, imports, _)) in graph.iter().enumerate() {
        for g in imports {
            let kind = if g.service {
                ShareKind::Service
            } else {
                ShareKind::Stream
            };
            let offered: Vec<&Export> = accounts[g.from]
                .exports
                .iter()
                .filter(|e| e.kind == kind)
                .collect();
            if offered.is_empty() {
                continue;
            }
            let export = offered[g.export % offered.len()];
            let choices = within(&export.subject);
            let subject = choices[g.narrow % choices.len()].to_owned();
            let literal = jsproto::subject::is_literal(subject.as_bytes());
            let local = match (g.local, kind) {
                (0, _) => subject.clone(),
                (1, ShareKind::Stream) => format!("p.{subject}"),
                (1, ShareKind::Service) => format!("x.{subject}"),
                (_, ShareKind::Stream) => format!("y.{subject}"),
                // A literal service subject may be renamed to any literal: onto another
                // account's export subject, the likeliest way into a loop.
                (_, ShareKind::Service) if literal => LITERALS[g.narrow % 3].to_owned(),
                (_, ShareKind::Service) => format!("x.{subject}"),
            };
            // What the start-up check refuses as a repeat, and the router's wiring cannot
            // tell apart: one stream subject twice from one exporter, one local service
            // subject twice.
            let duplicate = accounts[i].imports.iter().any(|o| {
                o.kind == kind
                    && o.account == name(g.from)
                    && if g.service {
                        o.local == local
                    } else {
                        o.subject == subject
                    }
            });
            if duplicate {
                continue;
            }
            accounts[i].imports.push(Import {
                kind,
                account: name(g.from),
                subject,
                local,
            });
        }
    }
    accounts
}

/// The reply subjects of the messages queued for `conn`, a client of `account` (`MSG
/// <subject> <sid> <reply> <size>`), each added to `seen` once.
fn collect_replies(account: usize, conn: &ClientHandle, seen: &mut Vec<(usize, Bytes)>) {
    let mut spare = BytesMut::new();
    while let Take::Write = conn.outbound.take(&mut spare) {
        let text = String::from_utf8_lossy(&spare).into_owned();
        for line in text.split("\r\n").filter(|l| l.starts_with("MSG ")) {
            let parts: Vec<&str> = line.split(' ').collect();
            if parts.len() == 5 {
                let reply = (account, Bytes::from(parts[3].to_owned()));
                if !seen.contains(&reply) && seen.len() < 256 {
                    seen.push(reply);
                }
            }
        }
    }
}

/// A reply subject in account `a`: an inbox, or one seen there.
fn reply_in(replies: &[(usize, Bytes)], a: usize, pick: usize) -> Bytes {
    let seen: Vec<&Bytes> = replies.iter().filter(|r| r.0 == a).map(|r| &r.1).collect();
    match pick % (seen.len() + 1) {
        0 => Bytes::from_static(b"_INBOX.me"),
        i => seen[i - 1].clone(),
    }
}

/// Runs `ops` against the accounts of `graph`; panics when a bound is broken. Returns the
/// deepest nesting of crossings seen.
fn run(graph: &[GenAccount], ops: &[Op]) -> usize {
    let auth = AuthOptions {
        accounts: configs(graph),
        ..AuthOptions::default()
    };
    let imports: usize = auth.accounts.iter().map(|a| a.imports.len()).sum();
    let accounts = Accounts::new(&auth, &Arc::new(Counters::default()));
    let account = |i: usize| accounts.get(&format!("A{i}")).expect("account");
    let clients: Vec<Vec<Arc<ClientHandle>>> = (0..graph.len())
        .map(|a| {
            (0..3)
                .map(|c| Arc::new(ClientHandle::new((a * 10 + c) as u64, 1 << 20)))
                .collect()
        })
        .collect();
    let mut sids: Vec<Vec<Vec<Bytes>>> = vec![vec![Vec::new(); 3]; graph.len()];
    let mut next_sid = 0u64;
    for (a, (_, _, wide)) in graph.iter().enumerate() {
        if *wide {
            account(a)
                .router()
                .subscribe(
                    &clients[a][2],
                    Bytes::from_static(b">"),
                    None,
                    Bytes::from_static(b"wide"),
                )
                .expect("valid subject");
        }
    }
    // Per account, the subjects its import handlers listen on (or any, if none), so most
    // publishes meet an import.
    let targets: Vec<Vec<&str>> = (0..graph.len())
        .map(|a| {
            let here = format!("A{a}");
            let listened: Vec<&str> = auth
                .accounts
                .iter()
                .flat_map(|i| i.imports.iter().map(move |x| (i, x)))
                .filter_map(|(importer, x)| match x.kind {
                    ShareKind::Stream if x.account == here => Some(x.subject.as_str()),
                    ShareKind::Service if importer.name == here => Some(x.local.as_str()),
                    _ => None,
                })
                .collect();
            let hit: Vec<&str> = LITERALS
                .iter()
                .copied()
                .filter(|l| {
                    listened
                        .iter()
                        .any(|p| jsproto::subject::matches(p.as_bytes(), l.as_bytes()))
                })
                .collect();
            if hit.is_empty() {
                LITERALS.to_vec()
            } else {
                hit
            }
        })
        .collect();
    let mut replies: Vec<(usize, Bytes)> = Vec::new();
    let payload = Bytes::from_static(b"x");
    // Each import crossed at most twice per message it is offered (its interest, then the
    // message), every import offered the message at most once per import the message came
    // through, plus the response chain (each service import's responses once).
    let steps = (2 * imports * (imports + 2) + 2) as u64;
    let top = {
        let marker = 0u8;
        std::ptr::from_ref(&marker) as usize
    };
    let _ = Crossing::take_counts();
    let mut deepest = 0;
    for op in ops {
        let mut scratch = RouteScratch::default();
        let mut publish = |a: usize, subject: &Bytes, reply: Option<&Bytes>| {
            route_published(account(a).router(), subject, reply, &payload, &mut scratch);
        };
        match *op {
            Op::Sub(a, c, s) => {
                let subject = match s {
                    s if s < LITERALS.len() => LITERALS[s],
                    s if s < LITERALS.len() + PATTERNS.len() => PATTERNS[s - LITERALS.len()],
                    _ => "_R_.>",
                };
                next_sid += 1;
                let sid = Bytes::from(next_sid.to_string());
                account(a)
                    .router()
                    .subscribe(&clients[a][c], Bytes::from(subject), None, sid.clone())
                    .expect("valid subject");
                sids[a][c].push(sid);
            }
            Op::Unsub(a, c) => {
                if !sids[a][c].is_empty() {
                    let sid = sids[a][c].remove(0);
                    account(a).router().unsubscribe(&clients[a][c], &sid, None);
                }
            }
            Op::Pub(a, s, reply) => {
                let reply = reply.map(|r| reply_in(&replies, a, r));
                let subject = targets[a][s % targets[a].len()];
                publish(a, &Bytes::from(subject), reply.as_ref());
            }
            Op::Respond(s, reply) => {
                if !replies.is_empty() {
                    let (a, subject) = replies[s % replies.len()].clone();
                    let reply = reply.map(|r| reply_in(&replies, a, r));
                    publish(a, &subject, reply.as_ref());
                }
            }
            Op::Interest(a, s, hops) => {
                let subject = targets[a][s % targets[a].len()];
                let _ = account(a)
                    .router()
                    .has_interest_at(subject.as_bytes(), hops);
            }
        }
        let counts = Crossing::take_counts();
        assert!(counts.deepest <= MAX_CROSSINGS, "{op:?}: {counts:?}");
        assert!(
            counts.entered <= steps,
            "{op:?}: {} crossings, bound {steps} for {imports} imports",
            counts.entered
        );
        if counts.entered > 0 {
            let used = top.saturating_sub(counts.lowest);
            assert!(used < STACK_BUDGET, "{op:?}: {used} bytes of stack");
        }
        deepest = deepest.max(counts.deepest);
        for (a, conns) in clients.iter().enumerate() {
            for conn in conns {
                collect_replies(a, conn, &mut replies);
            }
        }
    }
    deepest
}

proptest! {
    // 1024 cases (some 40 000 operations, a quarter of them through imports, over a hundred
    // cut as loops); `PROPTEST_CASES` sets another number.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(1024),
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_import_graph_makes_routing_recurse_without_a_bound((graph, ops) in case()) {
        run(&graph, &ops);
    }
}

/// The loops of the fault report, each on its own: the first publish or request into the
/// loop returns (a request with no responder, as nats-server answers those it starts with).
#[test]
fn the_reported_loops_end() {
    let svc = |pattern: usize| GenExport {
        service: true,
        pattern,
        response: ResponseType::Singleton,
    };
    let stream = |pattern: usize| GenExport {
        service: false,
        pattern,
        ..svc(pattern)
    };
    let import = |service: bool, from: usize| GenImport {
        service,
        from,
        export: 0,
        narrow: 0,
        local: 0,
    };
    // PATTERNS[0] = "s", [4] = "s.>".
    let both_services = vec![
        (vec![svc(0)], vec![import(true, 1)], false),
        (vec![svc(0)], vec![import(true, 0)], false),
    ];
    let both_streams = vec![
        (vec![stream(4)], vec![import(false, 1)], false),
        (vec![stream(4)], vec![import(false, 0)], false),
    ];
    let own = vec![(
        vec![svc(0), stream(4)],
        vec![import(true, 0), import(false, 0)],
        false,
    )];
    // Narrowed to PATTERNS[3] = "s.>" itself.
    let wild = |from: usize| GenImport {
        narrow: 3,
        ..import(true, from)
    };
    let wildcards = vec![
        (vec![svc(4)], vec![wild(1)], false),
        (vec![svc(4)], vec![wild(0)], false),
    ];
    let three = vec![
        (vec![svc(0)], vec![import(true, 1)], false),
        (vec![svc(0)], vec![import(true, 2)], false),
        (vec![svc(0)], vec![import(true, 0)], false),
    ];
    for graph in [both_services, both_streams, own, wildcards, three] {
        let auth = AuthOptions {
            accounts: configs(&graph),
            ..AuthOptions::default()
        };
        let accounts = Accounts::new(&auth, &Arc::new(Counters::default()));
        let a = accounts.get("A0").expect("A0");
        for subject in ["s", "s.a"] {
            assert!(
                !a.router().has_interest(subject.as_bytes()),
                "{subject}: nobody listens anywhere"
            );
        }
        let reply = Bytes::from_static(b"_INBOX.me");
        let payload = Bytes::new();
        let mut scratch = RouteScratch::default();
        for subject in ["s", "s.a"] {
            let subject = Bytes::from_static(subject.as_bytes());
            let heard = route_published(a.router(), &subject, Some(&reply), &payload, &mut scratch);
            assert!(!heard, "no responders");
        }
        assert!(Crossing::take_counts().deepest <= 2);
    }
}

/// A request passed on from service to service (each responder asks the next account's
/// service, with the reply subject it was given: routed here directly, as a client's reader
/// refuses such reply subjects) makes a chain of responses: one crossing per link on the way
/// back, all nested. Up to [`MAX_CROSSINGS`] links the response reaches the requester; one
/// more and it is dropped, on a stack well within [`STACK_BUDGET`].
#[test]
fn a_chain_of_responses_ends_at_the_bound() {
    for links in [MAX_CROSSINGS, MAX_CROSSINGS + 1] {
        // A<i> serves `s` and imports A<i+1>'s `s` as `next`.
        let configs: Vec<AccountConfig> = (0..=links)
            .map(|i| AccountConfig {
                name: format!("A{i}"),
                users: Vec::new(),
                nkeys: Vec::new(),
                jetstream: None,
                exports: vec![Export {
                    kind: ShareKind::Service,
                    subject: "s".into(),
                    accounts: Vec::new(),
                    response: ResponseType::Singleton,
                    threshold: DEFAULT_RESPONSE_THRESHOLD,
                }],
                imports: (i < links)
                    .then(|| Import {
                        kind: ShareKind::Service,
                        account: format!("A{}", i + 1),
                        subject: "s".into(),
                        local: "next".into(),
                    })
                    .into_iter()
                    .collect(),
                limits: ClientLimits::default(),
            })
            .collect();
        let auth = AuthOptions {
            accounts: configs,
            ..AuthOptions::default()
        };
        let accounts = Accounts::new(&auth, &Arc::new(Counters::default()));
        let router = |i: usize| accounts.get(&format!("A{i}")).expect("account").router();
        let clients: Vec<Arc<ClientHandle>> = (0..=links)
            .map(|i| Arc::new(ClientHandle::new(i as u64, 1 << 20)))
            .collect();
        router(0)
            .subscribe(&clients[0], "_INBOX.me".into(), None, "1".into())
            .expect("subscribed");
        for (i, c) in clients.iter().enumerate().skip(1) {
            router(i)
                .subscribe(c, "s".into(), None, "1".into())
                .expect("subscribed");
        }
        let payload = Bytes::from_static(b"x");
        let mut scratch = RouteScratch::default();
        let mut publish = |i: usize, subject: &Bytes, reply: Option<&Bytes>| {
            route_published(router(i), subject, reply, &payload, &mut scratch)
        };
        // Each account asks the next, with the reply subject it was given.
        let mut reply = Bytes::from_static(b"_INBOX.me");
        let next = Bytes::from_static(b"next");
        for i in 0..links {
            assert!(publish(i, &next, Some(&reply)), "link {i} has a responder");
            let mut seen = Vec::new();
            collect_replies(i + 1, &clients[i + 1], &mut seen);
            assert_eq!(seen.len(), 1, "link {i}: {seen:?}");
            reply = seen.remove(0).1;
        }
        // The last one answers.
        let top = {
            let marker = 0u8;
            std::ptr::from_ref(&marker) as usize
        };
        let _ = Crossing::take_counts();
        let heard = publish(links, &reply, None);
        let counts = Crossing::take_counts();
        let mut spare = BytesMut::new();
        let answered = matches!(clients[0].outbound.take(&mut spare), Take::Write);
        let used = top.saturating_sub(counts.lowest);
        assert!(heard);
        assert!(counts.deepest <= MAX_CROSSINGS, "{counts:?}");
        assert!(
            used < STACK_BUDGET,
            "{used} bytes of stack for {links} links"
        );
        if links <= MAX_CROSSINGS {
            assert!(answered, "{links} links: the answer arrives");
            assert_eq!(counts.refused, 0, "{counts:?}");
        } else {
            assert!(!answered, "{links} links: the answer is dropped");
            assert!(counts.refused > 0, "{counts:?}");
        }
    }
}

/// Routes a message published in `router`'s account by a client (no headers, not carried by
/// an import, not from a route) and flushes the wakes: whether anyone heard it.
fn route_published(
    router: &Router,
    subject: &Bytes,
    reply: Option<&Bytes>,
    payload: &Bytes,
    scratch: &mut RouteScratch,
) -> bool {
    let msg = RoutedMsg {
        subject,
        reply,
        headers: None,
        payload,
        hops: 0,
        remote: None,
    };
    let heard = router.route(None, msg, scratch);
    scratch.flush_wakes();
    heard
}
