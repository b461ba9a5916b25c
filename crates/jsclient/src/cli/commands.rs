//! What each command does, and how its output looks.

use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt;
use jsclient::jetstream::{self, consumer, Context};
use jsclient::{Client, ConnectOptions, Headers};
use jsproto::api::cluster::ClusterInfo;
use jsproto::api::consumer::{
    ConsumerAction, ConsumerConfig, ConsumerInfo, CreateConsumerRequest, PriorityPolicy,
};
use jsproto::api::error::codes;
use jsproto::api::stream::{
    DiscardPolicy, RetentionPolicy, StorageType, StreamInfo, StreamMsgGetResponse,
};
use jsproto::api::time::Timestamp;
use jsproto::api::StreamConfig;

use super::args::{
    Ack, Cli, Command, ConsumerAddArgs, ConsumerCommand, ConsumerEditArgs, ConsumerNextArgs,
    ConsumerPauseArgs, ConsumerSubArgs, Deliver, Discard, Priority, PubArgs, Replay, RequestArgs,
    Retention, ServerCommand, ServerListArgs, ServerRaftCommand, ServerRaftStepDownArgs, Storage,
    StreamAddArgs, StreamClusterCommand, StreamCommand, StreamStepDownArgs, SubArgs,
};
use super::format::{self, Columns};
use super::output::{errln, out, outln};
use super::{CliError, CliResult};

/// Global settings every command sees.
struct Env {
    client: Client,
    json: bool,
    timeout: std::time::Duration,
}

impl Env {
    fn js(&self) -> Context {
        jetstream::new(self.client.clone()).with_timeout(self.timeout)
    }
}

/// Connects and runs the command.
pub async fn run(cli: Cli) -> CliResult {
    let mut opts = ConnectOptions::new()
        .name("jsctl")
        .connection_timeout(cli.timeout)
        .request_timeout(cli.timeout)
        .max_reconnects(Some(0));
    // As the `nats` CLI: user and password, else a token, else an nkey seed file or a creds
    // file (and the URL's `user:pass@` when none is given).
    if let Some(user) = &cli.user {
        opts = opts.user_and_password(user, cli.password.clone().unwrap_or_default());
    } else if let Some(token) = &cli.token {
        opts = opts.token(token);
    }
    if let Some(file) = &cli.nkey {
        opts = opts.nkey_from_file(file)?;
    }
    if let Some(file) = &cli.creds {
        opts = opts.credentials_file(file)?;
    }
    // As the `nats` CLI: any TLS flag means TLS.
    if let Some(ca) = &cli.tls_ca {
        opts = opts.add_root_certificates(ca);
    }
    match (&cli.tls_cert, &cli.tls_key) {
        (Some(cert), Some(key)) => opts = opts.add_client_certificate(cert, key),
        (None, None) => {}
        _ => return Err(CliError("--tlscert and --tlskey go together".into())),
    }
    if cli.tls_first {
        opts = opts.tls_first();
    }
    let client = opts.connect(&cli.server).await?;
    let env = Env {
        client,
        json: cli.json,
        timeout: cli.timeout,
    };
    let result = match cli.command {
        Command::Pub(a) => publish(&env, a).await,
        Command::Sub(a) => subscribe(&env, a).await,
        Command::Request(a) => request(&env, a).await,
        Command::Stream(c) => stream_command(&env, c).await,
        Command::Consumer(c) => consumer_command(&env, c).await,
        Command::Server(ServerCommand::List(a)) => server_list(&env, a).await,
        Command::Server(ServerCommand::Raft(ServerRaftCommand::StepDown(a))) => {
            meta_step_down(&env, a).await
        }
    };
    // Whatever was published or acknowledged reaches the server before we exit.
    let _ = env.client.flush().await;
    result
}

fn parse_headers(list: &[String]) -> CliResult<Option<Headers>> {
    if list.is_empty() {
        return Ok(None);
    }
    let mut headers = Headers::new();
    for h in list {
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| CliError(format!("invalid header {h:?}: expected Key:Value")))?;
        headers
            .append(k.trim(), v.trim())
            .map_err(|e| CliError(format!("invalid header {h:?}: {e}")))?;
    }
    Ok(Some(headers))
}

fn print_json<T: serde::Serialize>(value: &T) -> CliResult {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError(e.to_string()))?;
    outln!("{text}");
    Ok(())
}

fn body_text(payload: &[u8]) -> String {
    String::from_utf8_lossy(payload).into_owned()
}

// ---------------------------------------------------------------------------------------------
// pub / sub / request
// ---------------------------------------------------------------------------------------------

/// The body with `{{Count}}` (also `{{.Count}}`, `{{ Count }}`) replaced by `n`.
fn render_body(template: &str, n: u64) -> String {
    let n = n.to_string();
    template
        .replace("{{Count}}", &n)
        .replace("{{.Count}}", &n)
        .replace("{{ Count }}", &n)
        .replace("{{ .Count }}", &n)
}

async fn publish(env: &Env, a: PubArgs) -> CliResult {
    let headers = parse_headers(&a.headers)?;
    let js = env.js();
    for n in 1..=a.count.max(1) {
        let body = render_body(&a.body, n);
        let len = body.len();
        let payload = Bytes::from(body);
        if a.jetstream {
            let pending = match &headers {
                Some(h) => {
                    js.publish_with_headers(a.subject.clone(), h.clone(), payload)
                        .await?
                }
                None => js.publish(a.subject.clone(), payload).await?,
            };
            let ack = pending.await?;
            if env.json {
                outln!(
                    "{}",
                    serde_json::to_string(&ack).map_err(|e| CliError(e.to_string()))?
                );
            } else {
                let dup = if ack.duplicate { " (duplicate)" } else { "" };
                outln!(
                    "Published {len} bytes to {:?}: Stored in Stream: {} Sequence: {}{dup}",
                    a.subject,
                    ack.stream,
                    format::num(ack.seq)
                );
            }
        } else {
            match &headers {
                Some(h) => {
                    env.client
                        .publish_with_headers(a.subject.clone(), h.clone(), payload)
                        .await?
                }
                None => env.client.publish(a.subject.clone(), payload).await?,
            }
            if !env.json {
                outln!("Published {len} bytes to {:?}", a.subject);
            }
        }
    }
    Ok(())
}

async fn subscribe(env: &Env, a: SubArgs) -> CliResult {
    let mut sub = match &a.queue {
        Some(q) => {
            env.client
                .queue_subscribe(a.subject.clone(), q.clone())
                .await?
        }
        None => env.client.subscribe(a.subject.clone()).await?,
    };
    env.client.flush().await?;
    if !env.json {
        match &a.queue {
            Some(q) => errln!("Subscribing on {} in group {q}", a.subject),
            None => errln!("Subscribing on {}", a.subject),
        }
    }
    let mut n = 0u64;
    while let Some(msg) = sub.next().await {
        n += 1;
        if env.json {
            let value = serde_json::json!({
                "subject": msg.subject,
                "reply": msg.reply,
                "headers": msg.headers.as_ref().map(|h| h.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect::<Vec<_>>()),
                "data": body_text(&msg.payload),
            });
            outln!("{value}");
        } else {
            outln!("[#{n}] Received on {:?}", msg.subject);
            if let Some(h) = &msg.headers {
                for (k, v) in h.iter() {
                    outln!("{k}: {v}");
                }
            }
            outln!("{}\n", body_text(&msg.payload));
        }
        if a.count > 0 && n >= a.count {
            break;
        }
    }
    Ok(())
}

async fn request(env: &Env, a: RequestArgs) -> CliResult {
    let headers = parse_headers(&a.headers)?;
    let start = Instant::now();
    let reply = match headers {
        Some(h) => {
            env.client
                .request_with_headers(a.subject.clone(), h, Bytes::from(a.body))
                .await?
        }
        None => {
            env.client
                .request(a.subject.clone(), Bytes::from(a.body))
                .await?
        }
    };
    if env.json {
        outln!(
            "{}",
            serde_json::json!({ "subject": reply.subject, "data": body_text(&reply.payload) })
        );
    } else {
        outln!("Received with rtt {:?}", start.elapsed());
        if let Some(h) = &reply.headers {
            for (k, v) in h.iter() {
                outln!("{k}: {v}");
            }
        }
        outln!("{}", body_text(&reply.payload));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// streams
// ---------------------------------------------------------------------------------------------

async fn stream_command(env: &Env, c: StreamCommand) -> CliResult {
    let js = env.js();
    match c {
        StreamCommand::Add(a) => {
            let name = a.stream.clone();
            let s = js.create_stream(stream_config(a)).await?;
            if env.json {
                return print_json(s.cached_info());
            }
            outln!("Stream {name} was created\n");
            out!("{}", stream_info_text(s.cached_info()));
        }
        StreamCommand::Info(a) => {
            let s = js.get_stream(&a.stream).await?;
            if env.json {
                return print_json(s.cached_info());
            }
            out!("{}", stream_info_text(s.cached_info()));
        }
        StreamCommand::Cluster(StreamClusterCommand::StepDown(a)) => {
            stream_step_down(env, &js, a).await?;
        }
        StreamCommand::Ls(a) => {
            let names = js.stream_names().await?;
            let mut infos = Vec::new();
            for name in &names {
                infos.push(js.get_stream(name).await?.cached_info().clone());
            }
            infos.sort_by(|x, y| x.config.name.cmp(&y.config.name));
            if env.json {
                let names: Vec<&str> = infos.iter().map(|i| i.config.name.as_str()).collect();
                return print_json(&names);
            }
            if a.names {
                for i in &infos {
                    outln!("{}", i.config.name);
                }
            } else if infos.is_empty() {
                outln!("No Streams defined");
            } else {
                let rows: Vec<Vec<String>> = infos
                    .iter()
                    .map(|i| {
                        vec![
                            i.config.name.clone(),
                            i.config.description.clone(),
                            format::time(&i.created),
                            format::num(i.state.messages),
                            format::bytes(i.state.bytes),
                            if i.state.last_seq == 0 {
                                "never".to_owned()
                            } else {
                                format::duration(format::since(&i.ts, &i.state.last_ts))
                            },
                        ]
                    })
                    .collect();
                outln!("Streams:\n");
                out!(
                    "{}",
                    format::table(
                        &[
                            "Name",
                            "Description",
                            "Created",
                            "Messages",
                            "Size",
                            "Last Message"
                        ],
                        &rows
                    )
                );
            }
        }
        StreamCommand::Rm(a) => {
            js.delete_stream(&a.stream).await?;
            if env.json {
                return print_json(&serde_json::json!({ "success": true }));
            }
            outln!("Deleted stream {}", a.stream);
        }
        StreamCommand::Purge(a) => {
            let purged = js.purge_stream(&a.stream).await?;
            if env.json {
                return print_json(&serde_json::json!({ "success": true, "purged": purged }));
            }
            outln!(
                "Purged {} messages from stream {}",
                format::num(purged),
                a.stream
            );
        }
        StreamCommand::Get(a) => {
            let msg = get_message(&js, &a.stream, a.seq).await?;
            if env.json {
                return print_json(&msg);
            }
            let m = &msg.message;
            outln!(
                "Item: {}#{} received {} on Subject {}\n",
                a.stream,
                m.seq,
                format::time(&m.time),
                m.subject
            );
            print_stored_headers(&m.hdrs);
            outln!("{}", body_text(&m.data));
        }
        StreamCommand::View(a) => {
            let info = js.get_stream(&a.stream).await?.cached_info().clone();
            let mut shown = 0u64;
            let first = info.state.first_seq.max(1);
            for seq in first..=info.state.last_seq {
                if a.count > 0 && shown >= a.count {
                    break;
                }
                let msg = match get_message(&js, &a.stream, seq).await {
                    Ok(m) => m,
                    Err(e) => match e.err_code() {
                        // Deleted (or acknowledged out of a work queue): skip it.
                        Some(codes::JSNoMessageFoundErr | codes::JSStreamMsgDeleteFailedF) => {
                            continue
                        }
                        _ => return Err(e.into()),
                    },
                };
                shown += 1;
                let m = &msg.message;
                if env.json {
                    outln!(
                        "{}",
                        serde_json::to_string(&msg).map_err(|e| CliError(e.to_string()))?
                    );
                    continue;
                }
                outln!(
                    "[{}] Subject: {} Received: {}\n",
                    m.seq,
                    m.subject,
                    format::time(&m.time)
                );
                print_stored_headers(&m.hdrs);
                outln!("{}\n", body_text(&m.data));
            }
            if shown == 0 && !env.json {
                outln!("No messages in stream {}", a.stream);
            }
        }
    }
    Ok(())
}

async fn get_message(
    js: &Context,
    stream: &str,
    seq: u64,
) -> Result<StreamMsgGetResponse, jetstream::JetStreamError> {
    let body = serde_json::to_vec(&serde_json::json!({ "seq": seq })).expect("json");
    js.request(&format!("STREAM.MSG.GET.{stream}"), Bytes::from(body))
        .await
}

fn print_stored_headers(block: &[u8]) {
    if block.is_empty() {
        return;
    }
    if let Ok(h) = Headers::parse(block) {
        outln!("Headers:\n");
        for (k, v) in h.iter() {
            outln!("  {k}: {v}");
        }
        outln!();
    }
}

fn stream_config(a: StreamAddArgs) -> StreamConfig {
    let subjects = if a.subjects.is_empty() {
        vec![a.stream.clone()]
    } else {
        a.subjects
    };
    let mut cfg = StreamConfig::new(a.stream, subjects);
    cfg.retention = match a.retention {
        Retention::Limits => RetentionPolicy::Limits,
        Retention::Interest => RetentionPolicy::Interest,
        Retention::Work => RetentionPolicy::WorkQueue,
    };
    cfg.storage = match a.storage {
        Storage::File => StorageType::File,
        Storage::Memory => StorageType::Memory,
    };
    cfg.discard = match a.discard {
        Discard::Old => DiscardPolicy::Old,
        Discard::New => DiscardPolicy::New,
    };
    cfg.max_msgs = a.max_msgs;
    cfg.max_msgs_per_subject = a.max_msgs_per_subject;
    cfg.max_bytes = a.max_bytes;
    cfg.max_msg_size = a.max_msg_size;
    cfg.max_age = a.max_age.unwrap_or_default();
    cfg.duplicate_window = a.dupe_window.unwrap_or_default();
    cfg.num_replicas = a.replicas;
    cfg.description = a.description.unwrap_or_default();
    cfg
}

/// `stream info` text: configuration, options, limits, state.
fn stream_info_text(info: &StreamInfo) -> String {
    let cfg = &info.config;
    let st = &info.state;
    let mut c = Columns::new(format!(
        "Information for Stream {} created {}",
        cfg.name,
        format::time(&info.created)
    ));
    c.row_if("Description", &cfg.description, !cfg.description.is_empty());
    c.row("Subjects", cfg.subjects.join(", "));
    c.row("Replicas", cfg.num_replicas.max(1));
    c.row("Storage", format::title_case(cfg.storage.as_str()));
    c.section("Options");
    c.row("Retention", format::title_case(cfg.retention.as_str()));
    c.row("Acknowledgments", !cfg.no_ack);
    c.row("Discard Policy", format::title_case(cfg.discard.as_str()));
    c.row("Duplicate Window", format::duration(cfg.duplicate_window));
    c.row("Allows Msg Delete", !cfg.deny_delete);
    c.row("Allows Purge", !cfg.deny_purge);
    c.row("Allows Rollups", cfg.allow_rollup_hdrs);
    c.section("Limits");
    c.row("Maximum Messages", format::limit(cfg.max_msgs));
    c.row(
        "Maximum Per Subject",
        format::limit(cfg.max_msgs_per_subject),
    );
    c.row(
        "Maximum Bytes",
        if cfg.max_bytes < 0 {
            "unlimited".to_owned()
        } else {
            format::bytes(cfg.max_bytes.unsigned_abs())
        },
    );
    c.row(
        "Maximum Age",
        if cfg.max_age.is_zero() {
            "unlimited".to_owned()
        } else {
            format::duration(cfg.max_age)
        },
    );
    c.row(
        "Maximum Message Size",
        format::limit(i64::from(cfg.max_msg_size)),
    );
    c.row("Maximum Consumers", format::limit(cfg.max_consumers));
    c.section("State");
    c.row("Messages", format::num(st.messages));
    c.row("Bytes", format::bytes(st.bytes));
    if st.first_ts.is_zero() {
        c.row("First Sequence", format::num(st.first_seq));
    } else {
        c.row(
            "First Sequence",
            format!(
                "{} @ {}",
                format::num(st.first_seq),
                format::time(&st.first_ts)
            ),
        );
    }
    if st.last_ts.is_zero() {
        c.row("Last Sequence", format::num(st.last_seq));
    } else {
        c.row(
            "Last Sequence",
            format!(
                "{} @ {}",
                format::num(st.last_seq),
                format::time(&st.last_ts)
            ),
        );
    }
    c.row_if(
        "Deleted Messages",
        format::num(st.num_deleted),
        st.num_deleted > 0,
    );
    c.row("Active Consumers", format::num(st.consumer_count));
    c.row_if(
        "Number of Subjects",
        format::num(st.num_subjects),
        st.num_subjects > 0,
    );
    // Clustered servers only: standalone, nats-server's stream info has `cluster` with just
    // the server's name as leader, which says nothing.
    if let Some(cluster) = info.cluster.as_ref().filter(|c| !c.name.is_empty()) {
        cluster_rows(&mut c, cluster, &info.ts);
    }
    c.render()
}

/// The `Cluster Information` section of `stream info` and `consumer info`: the cluster's
/// name, the Raft group, the leader (and since when) and one `Replica` row per other peer:
/// `n3, outdated, OFFLINE, seen 1.50s ago, 8 operations behind` (`current`/`outdated`,
/// `OFFLINE` when the server is known gone, when the leader last heard from it (`not seen`
/// when never), and its lag when it has one).
fn cluster_rows(c: &mut Columns, cluster: &ClusterInfo, now: &Timestamp) {
    c.section("Cluster Information");
    c.row_if("Name", &cluster.name, !cluster.name.is_empty());
    c.row_if(
        "Raft Group",
        &cluster.raft_group,
        !cluster.raft_group.is_empty(),
    );
    let leader = match (&cluster.leader, &cluster.leader_since) {
        (l, _) if l.is_empty() => "none (no leader elected)".to_owned(),
        (l, Some(since)) => format!("{l} (for {})", format::duration(format::since(now, since))),
        (l, None) => l.clone(),
    };
    c.row("Leader", leader);
    for peer in &cluster.replicas {
        c.row("Replica", replica_text(peer));
    }
}

/// One `Replica` row of [`cluster_rows`].
fn replica_text(peer: &jsproto::api::cluster::PeerInfo) -> String {
    let mut parts = vec![
        peer.name.clone(),
        if peer.current { "current" } else { "outdated" }.to_owned(),
    ];
    if peer.offline {
        parts.push("OFFLINE".to_owned());
    }
    parts.push(if peer.active.is_zero() {
        "not seen".to_owned()
    } else {
        format!("seen {} ago", format::duration(peer.active))
    });
    match peer.lag {
        0 => {}
        1 => parts.push("1 operation behind".to_owned()),
        n => parts.push(format!("{} operations behind", format::num(n))),
    }
    parts.join(", ")
}

/// How long `stream cluster step-down` waits for the next leader.
const ELECTION_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `stream cluster step-down`: asks the leader to step down, then reads the stream's info
/// until another server (the preferred one, if given) leads, and prints it with the cluster
/// section.
async fn stream_step_down(env: &Env, js: &Context, a: StreamStepDownArgs) -> CliResult {
    let before = js.get_stream(&a.stream).await?.cached_info().clone();
    let cluster = before.cluster.clone().unwrap_or_default();
    if cluster.name.is_empty() {
        return Err(CliError(format!(
            "stream {} is not clustered: the server runs without a cluster",
            a.stream
        )));
    }
    let peers = cluster.replicas.len() + usize::from(!cluster.leader.is_empty());
    if peers < 2 {
        return Err(CliError(format!(
            "stream {} has one replica: no other server can lead it",
            a.stream
        )));
    }
    if !env.json {
        outln!(
            "Requesting leader step down of {:?} in a {peers} peer RAFT group",
            cluster.leader
        );
    }
    js.stream_leader_stepdown(&a.stream, a.preferred.as_deref())
        .await?;
    // Between two leaders nobody answers STREAM.INFO: ask often, each time briefly.
    let poll = env.js().with_timeout(std::time::Duration::from_secs(1));
    let deadline = Instant::now() + ELECTION_WAIT.max(env.timeout);
    let after = loop {
        if let Ok(s) = poll.get_stream(&a.stream).await {
            let info = s.cached_info().clone();
            let leader = info
                .cluster
                .as_ref()
                .map(|c| c.leader.clone())
                .unwrap_or_default();
            let wanted = match &a.preferred {
                Some(p) => leader == *p,
                None => !leader.is_empty() && leader != cluster.leader,
            };
            if wanted {
                break info;
            }
        }
        if Instant::now() >= deadline {
            return Err(CliError(format!(
                "no new leader for stream {} within {}",
                a.stream,
                format::duration(ELECTION_WAIT.max(env.timeout))
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    if env.json {
        return print_json(&after);
    }
    let new = after.cluster.clone().unwrap_or_default();
    outln!("New leader elected {:?}\n", new.leader);
    let mut c = Columns::new("");
    cluster_rows(&mut c, &new, &after.ts);
    out!("{}", c.render());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// server list
// ---------------------------------------------------------------------------------------------

/// The subject every server answers with its statistics (system account only).
const SERVER_PING: &str = "$SYS.REQ.SERVER.PING";

/// After the last answer, how long `server list` waits for another.
const PING_QUIET: std::time::Duration = std::time::Duration::from_millis(500);

/// The parts of a `$SYS.REQ.SERVER.PING` answer `server list` shows (nats-server 2.15.1's
/// `{"server":{…},"statsz":{…}}`; everything else is ignored).
#[derive(Debug, serde::Deserialize)]
struct PingAnswer {
    server: PingServer,
    #[serde(default)]
    statsz: PingStats,
}

/// `server` of a [`PingAnswer`].
#[derive(Debug, serde::Deserialize)]
struct PingServer {
    #[serde(default)]
    name: String,
    #[serde(default)]
    host: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    ver: String,
    #[serde(default)]
    jetstream: bool,
}

/// `statsz` of a [`PingAnswer`].
#[derive(Debug, Default, serde::Deserialize)]
struct PingStats {
    #[serde(default)]
    connections: u64,
}

/// `server list`: one `$SYS.REQ.SERVER.PING` with an inbox as reply, answers collected until
/// none came for [`PING_QUIET`] after the last (or the first did not come within `--timeout`,
/// or `expect` answered), as the `nats` CLI's `server list` does; a table sorted by name.
async fn server_list(env: &Env, a: ServerListArgs) -> CliResult {
    let inbox = env.client.new_inbox();
    let mut sub = env.client.subscribe(inbox.clone()).await?;
    env.client
        .publish_with_reply(SERVER_PING, inbox, Bytes::new())
        .await?;
    env.client.flush().await?;
    let mut raw: Vec<serde_json::Value> = Vec::new();
    let mut answers: Vec<PingAnswer> = Vec::new();
    loop {
        let wait = if answers.is_empty() {
            env.timeout
        } else {
            PING_QUIET
        };
        match tokio::time::timeout(wait, sub.next()).await {
            // No subscriber at all (not a system account user): the server's 503 status.
            Ok(Some(msg)) if msg.status == Some(503) && answers.is_empty() => {
                return Err(CliError(format!(
                    "no responders for {SERVER_PING}: it is answered to system account users only"
                )));
            }
            Ok(Some(msg)) => {
                let answer: PingAnswer = serde_json::from_slice(&msg.payload)
                    .map_err(|e| CliError(format!("unexpected answer to {SERVER_PING}: {e}")))?;
                raw.push(serde_json::from_slice(&msg.payload).unwrap_or_default());
                answers.push(answer);
                if a.expect.is_some_and(|n| answers.len() >= n) {
                    break;
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    if answers.is_empty() {
        return Err(CliError(format!(
            "no server answered {SERVER_PING} within {} (it is answered to system account users only)",
            format::duration(env.timeout)
        )));
    }
    if env.json {
        return print_json(&raw);
    }
    answers.sort_by(|x, y| x.server.name.cmp(&y.server.name));
    let rows: Vec<Vec<String>> = answers
        .iter()
        .map(|a| {
            let s = &a.server;
            vec![
                if s.name.is_empty() {
                    s.id.clone()
                } else {
                    s.name.clone()
                },
                s.cluster.clone(),
                s.host.clone(),
                s.ver.clone(),
                format::num(a.statsz.connections),
                if s.jetstream { "yes" } else { "no" }.to_owned(),
            ]
        })
        .collect();
    out!(
        "{}",
        format::table(
            &[
                "Name",
                "Cluster",
                "Host",
                "Version",
                "Connections",
                "JetStream"
            ],
            &rows
        )
    );
    let connections: u64 = answers.iter().map(|a| a.statsz.connections).sum();
    let plural =
        |n: u64, word: &str| format!("{} {word}{}", format::num(n), if n == 1 { "" } else { "s" });
    outln!(
        "\n{}, {}",
        plural(answers.len() as u64, "server"),
        plural(connections, "connection")
    );
    if let Some(n) = a.expect {
        if answers.len() < n {
            return Err(CliError(format!(
                "expected {n} servers, {} answered",
                answers.len()
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// server raft step-down
// ---------------------------------------------------------------------------------------------

/// The request the `nats` CLI reads the meta group from: every server's `/jsz` through the
/// system account, `{"leader_only":true}` asking for the meta leader's answer alone (as
/// nats-server answers it; a server that ignores the option answers too, naming the leader it
/// knows).
const JSZ_PING: &str = "$SYS.REQ.SERVER.PING.JSZ";

/// `{"data":{"meta_cluster":{…}}}` of a [`JSZ_PING`] answer.
#[derive(Debug, Default, serde::Deserialize)]
struct JszAnswer {
    #[serde(default)]
    data: JszData,
}

/// `data` of a [`JszAnswer`].
#[derive(Debug, Default, serde::Deserialize)]
struct JszData {
    #[serde(default)]
    meta_cluster: Option<jsproto::api::cluster::MetaClusterInfo>,
}

/// The meta group as the first answer to [`JSZ_PING`] within `wait` tells it.
async fn meta_cluster(
    env: &Env,
    wait: std::time::Duration,
) -> CliResult<jsproto::api::cluster::MetaClusterInfo> {
    let ask = env
        .client
        .request(JSZ_PING, Bytes::from_static(br#"{"leader_only":true}"#));
    let msg = match tokio::time::timeout(wait, ask).await {
        Ok(Ok(msg)) => msg,
        Ok(Err(jsclient::RequestError::NoResponders)) => {
            return Err(CliError(format!(
                "no responders for {JSZ_PING}: it is answered to system account users only"
            )))
        }
        Ok(Err(jsclient::RequestError::TimedOut)) | Err(_) => {
            return Err(CliError(format!(
                "no server answered {JSZ_PING} within {}",
                format::duration(wait)
            )))
        }
        Ok(Err(e)) => return Err(e.into()),
    };
    let answer: JszAnswer = serde_json::from_slice(&msg.payload)
        .map_err(|e| CliError(format!("unexpected answer to {JSZ_PING}: {e}")))?;
    answer
        .data
        .meta_cluster
        .ok_or_else(|| CliError("the server is not in a JetStream cluster".into()))
}

/// `server raft step-down`, as the `nats` CLI's: reads the meta leader, asks it to step down
/// (`$JS.API.META.LEADER.STEPDOWN` with the placement asked for), then reads the meta group
/// until another server (the preferred one, if given) leads, and prints it.
async fn meta_step_down(env: &Env, a: ServerRaftStepDownArgs) -> CliResult {
    let before = meta_cluster(env, env.timeout).await?;
    if before.leader.is_empty() {
        return Err(CliError("the meta group has no leader now".into()));
    }
    let peers = if before.cluster_size > 0 {
        before.cluster_size
    } else {
        before.replicas.len() as u64 + 1
    };
    if !env.json {
        outln!(
            "Requesting leader step down of {:?} in a {peers} peer RAFT group",
            before.leader
        );
    }
    let placement =
        (a.preferred.is_some() || a.cluster.is_some() || !a.tags.is_empty()).then(|| {
            jsproto::api::stream::Placement {
                preferred: a.preferred.clone().unwrap_or_default(),
                cluster: a.cluster.clone().unwrap_or_default(),
                tags: a.tags.clone(),
            }
        });
    match env.js().meta_leader_stepdown(placement).await {
        Ok(_) => {}
        Err(jetstream::JetStreamError::Request(jsclient::RequestError::TimedOut)) => {
            return Err(CliError(format!(
                "no answer to $JS.API.META.LEADER.STEPDOWN within {}: it is answered to system \
                 account users only, by the meta leader",
                format::duration(env.timeout)
            )))
        }
        Err(e) => return Err(e.into()),
    }
    // Between two leaders nobody may answer: ask often, each time briefly.
    let wait = ELECTION_WAIT.max(env.timeout);
    let deadline = Instant::now() + wait;
    let after = loop {
        if let Ok(mc) = meta_cluster(env, std::time::Duration::from_secs(1)).await {
            let wanted = match &a.preferred {
                Some(p) => mc.leader == *p,
                None => !mc.leader.is_empty() && mc.leader != before.leader,
            };
            if wanted {
                break mc;
            }
        }
        if Instant::now() >= deadline {
            return Err(CliError(format!(
                "no new meta leader within {}",
                format::duration(wait)
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    if env.json {
        return print_json(&after);
    }
    outln!("New leader elected {:?}", after.leader);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// consumers
// ---------------------------------------------------------------------------------------------

async fn consumer_command(env: &Env, c: ConsumerCommand) -> CliResult {
    let js = env.js();
    match c {
        ConsumerCommand::Add(a) => {
            let stream = a.stream.clone();
            let name = a.consumer.clone();
            let mut consumer = js
                .create_consumer_on_stream(consumer_config(a), &stream)
                .await?;
            let info = consumer.info().await?.clone();
            if env.json {
                return print_json(&info);
            }
            outln!("Consumer {stream} > {name} was created\n");
            out!("{}", consumer_info_text(&info));
        }
        ConsumerCommand::Info(a) => {
            let consumer = js.get_consumer_from_stream(&a.consumer, &a.stream).await?;
            if env.json {
                return print_json(consumer.cached_info());
            }
            out!("{}", consumer_info_text(consumer.cached_info()));
        }
        ConsumerCommand::Ls(a) => {
            let s = js.get_stream(&a.stream).await?;
            let mut names = s.consumer_names().await?;
            names.sort();
            if env.json {
                return print_json(&names);
            }
            if a.names {
                for n in &names {
                    outln!("{n}");
                }
                return Ok(());
            }
            if names.is_empty() {
                outln!("No Consumers defined");
                return Ok(());
            }
            let mut rows = Vec::new();
            for n in &names {
                let c = s.get_consumer(n).await?;
                let i = c.cached_info();
                let last = match &i.delivered.last_active {
                    Some(t) => format::duration(format::since(&i.ts, t)),
                    None => "never".to_owned(),
                };
                rows.push(vec![
                    i.name.clone(),
                    i.config
                        .as_ref()
                        .map(|c| c.description.clone())
                        .unwrap_or_default(),
                    format::time(&i.created),
                    format::num(i.num_ack_pending),
                    format::num(i.num_pending),
                    last,
                ]);
            }
            outln!("Consumers for Stream {}:\n", a.stream);
            out!(
                "{}",
                format::table(
                    &[
                        "Name",
                        "Description",
                        "Created",
                        "Ack Pending",
                        "Unprocessed",
                        "Last Delivery"
                    ],
                    &rows
                )
            );
        }
        ConsumerCommand::Rm(a) => {
            js.delete_consumer_from_stream(&a.consumer, &a.stream)
                .await?;
            if env.json {
                return print_json(&serde_json::json!({ "success": true }));
            }
            outln!("Deleted consumer {} > {}", a.stream, a.consumer);
        }
        ConsumerCommand::Edit(a) => {
            let info = consumer_edit(&js, a).await?;
            if env.json {
                return print_json(&info);
            }
            out!("{}", consumer_info_text(&info));
        }
        ConsumerCommand::Next(a) => consumer_next(env, &js, a).await?,
        ConsumerCommand::Sub(a) => consumer_sub(env, &js, a).await?,
        ConsumerCommand::Pause(a) => consumer_pause(env, &js, a).await?,
        ConsumerCommand::Resume(a) => {
            let r = js.pause_consumer(&a.stream, &a.consumer, None).await?;
            if env.json {
                return print_json(&r);
            }
            outln!("Consumer {} > {} was resumed", a.stream, a.consumer);
        }
        ConsumerCommand::Pending(a) => consumer_pending(env, &js, &a.stream, &a.consumer).await?,
        ConsumerCommand::Unpin(a) => {
            js.unpin_consumer(&a.stream, &a.consumer, &a.group).await?;
            if env.json {
                return print_json(&serde_json::json!({ "success": true }));
            }
            outln!(
                "Unpinned group {} of consumer {} > {}",
                a.group,
                a.stream,
                a.consumer
            );
        }
    }
    Ok(())
}

/// `consumer pending`: every page of `CONSUMER.PENDING`, as one table (or JSON list).
async fn consumer_pending(env: &Env, js: &Context, stream: &str, consumer: &str) -> CliResult {
    let mut all = Vec::new();
    loop {
        let page = js
            .consumer_pending(stream, consumer, all.len() as u64)
            .await?;
        let got = page.pending.len();
        all.extend(page.pending);
        if got == 0 || all.len() as u64 >= page.total {
            break;
        }
    }
    if env.json {
        return print_json(&all);
    }
    if all.is_empty() {
        outln!("No unacknowledged messages on {stream} > {consumer}");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|p| {
            let (holder, conn) = match &p.holder {
                None => ("unknown (before a restart)".to_owned(), String::new()),
                Some(h) => {
                    let who = if h.name.is_empty() {
                        h.reply.clone()
                    } else {
                        h.name.clone()
                    };
                    let conn = match h.cid {
                        Some(cid) => format!("cid {cid} {}", h.addr),
                        None => "gone".to_owned(),
                    };
                    (who, conn)
                }
            };
            vec![
                format::num(p.stream_seq),
                format::num(u64::from(p.deliveries)),
                format::duration(p.age),
                if p.queued { "redelivery queue" } else { "out" }.to_owned(),
                holder,
                conn,
            ]
        })
        .collect();
    outln!("Unacknowledged messages of {stream} > {consumer}:\n");
    out!(
        "{}",
        format::table(
            &[
                "Stream Seq",
                "Deliveries",
                "Age",
                "State",
                "Holder",
                "Connection"
            ],
            &rows
        )
    );
    Ok(())
}

/// `consumer pause`: `until` is a duration from now or an RFC 3339 time.
async fn consumer_pause(env: &Env, js: &Context, a: ConsumerPauseArgs) -> CliResult {
    let until = match format::parse_duration(&a.until) {
        Ok(d) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            Timestamp::from_unix_nanos(u64::try_from((now + d).as_nanos()).unwrap_or(u64::MAX))
        }
        Err(_) => a.until.parse::<Timestamp>().map_err(|_| {
            CliError(format!(
                "{:?} is neither a duration (10m, 1h) nor an RFC 3339 time",
                a.until
            ))
        })?,
    };
    let r = js
        .pause_consumer(&a.stream, &a.consumer, Some(until))
        .await?;
    if env.json {
        return print_json(&r);
    }
    outln!(
        "Paused {} > {} until {} ({} left)",
        a.stream,
        a.consumer,
        format::time(&r.pause_until),
        format::duration(r.pause_remaining)
    );
    Ok(())
}

fn consumer_config(a: ConsumerAddArgs) -> ConsumerConfig {
    let mut cfg = consumer::pull_config(a.consumer);
    cfg.ack_policy = match a.ack {
        Ack::Explicit => consumer::AckPolicy::Explicit,
        Ack::All => consumer::AckPolicy::All,
        Ack::None => consumer::AckPolicy::None,
    };
    cfg.deliver_policy = match a.deliver {
        Deliver::All => consumer::DeliverPolicy::All,
        Deliver::Last => consumer::DeliverPolicy::Last,
        Deliver::New => consumer::DeliverPolicy::New,
        Deliver::LastPerSubject => consumer::DeliverPolicy::LastPerSubject,
    };
    cfg.replay_policy = match a.replay {
        Replay::Instant => jsproto::api::consumer::ReplayPolicy::Instant,
        Replay::Original => jsproto::api::consumer::ReplayPolicy::Original,
    };
    cfg.filter_subject = a.filter.unwrap_or_default();
    cfg.ack_wait = a.wait.unwrap_or_default();
    cfg.max_deliver = a.max_deliver;
    cfg.max_ack_pending = a.max_pending.unwrap_or(0);
    cfg.max_waiting = a.max_waiting.unwrap_or(0);
    cfg.description = a.description.unwrap_or_default();
    if let Some(target) = a.target {
        cfg.deliver_subject = target;
        cfg.deliver_group = a.deliver_group.unwrap_or_default();
        cfg.idle_heartbeat = a.heartbeat.unwrap_or_default();
        cfg.flow_control = a.flow_control;
    }
    cfg.priority_policy = match a.priority_policy {
        Priority::None => PriorityPolicy::None,
        Priority::Overflow => PriorityPolicy::Overflow,
        Priority::PinnedClient => PriorityPolicy::PinnedClient,
        Priority::Prioritized => PriorityPolicy::Prioritized,
    };
    cfg.priority_groups = a.priority_groups;
    cfg.priority_timeout = a.pinned_ttl.unwrap_or_default();
    cfg
}

/// Fetches the config, changes what was asked, and sends it back with action `update` (so a
/// consumer deleted meanwhile is an error, not re-created).
async fn consumer_edit(
    js: &Context,
    a: ConsumerEditArgs,
) -> Result<ConsumerInfo, jetstream::JetStreamError> {
    let current = js.get_consumer_from_stream(&a.consumer, &a.stream).await?;
    let mut cfg = current.cached_info().config.clone().unwrap_or_default();
    if let Some(n) = a.max_pending {
        cfg.max_ack_pending = n;
    }
    if let Some(w) = a.wait {
        cfg.ack_wait = w;
    }
    if let Some(n) = a.max_deliver {
        cfg.max_deliver = n;
    }
    if let Some(n) = a.max_waiting {
        cfg.max_waiting = n;
    }
    if let Some(d) = a.description {
        cfg.description = d;
    }
    let req = CreateConsumerRequest {
        stream_name: a.stream.clone(),
        config: cfg,
        action: ConsumerAction::Update,
        ..Default::default()
    };
    let body = serde_json::to_vec(&req).expect("json");
    js.request(
        &format!("CONSUMER.CREATE.{}.{}", a.stream, a.consumer),
        Bytes::from(body),
    )
    .await
}

async fn consumer_next(env: &Env, js: &Context, a: ConsumerNextArgs) -> CliResult {
    let mut consumer = js.get_consumer_from_stream(&a.consumer, &a.stream).await?;
    if let Some(group) = &a.group {
        consumer = consumer.with_priority_group(consumer::PriorityPull {
            group: group.clone(),
            min_pending: a.min_pending.unwrap_or(0),
            min_ack_pending: a.min_ack_pending.unwrap_or(0),
            priority: a.priority.unwrap_or(0),
        });
    }
    for _ in 0..a.count.max(1) {
        let Some(msg) = consumer.next(a.wait).await? else {
            return Err(CliError(format!(
                "no message received within {}",
                format::duration(a.wait)
            )));
        };
        show_and_ack(env, &msg, a.raw, a.no_ack, a.nak).await?;
    }
    Ok(())
}

/// `consumer sub`: the push consumer's messages until `count` (or a quiet `wait`).
async fn consumer_sub(env: &Env, js: &Context, a: ConsumerSubArgs) -> CliResult {
    let info = js.get_consumer_from_stream(&a.consumer, &a.stream).await?;
    let acks = info
        .cached_info()
        .config
        .as_ref()
        .is_some_and(|c| c.ack_policy != consumer::AckPolicy::None);
    let mut messages = js.push_messages(&a.stream, &a.consumer).await?;
    let mut n = 0;
    loop {
        let next = match a.wait {
            Some(w) => match tokio::time::timeout(w, messages.next()).await {
                Ok(next) => next,
                Err(_) => {
                    return Err(CliError(format!(
                        "no message received within {}",
                        format::duration(w)
                    )))
                }
            },
            None => messages.next().await,
        };
        let msg = match next {
            None => break,
            Some(Err(consumer::ConsumerError::MissingHeartbeats)) => {
                errln!("jsctl: missed idle heartbeats from the server");
                continue;
            }
            Some(Err(e)) => return Err(CliError(e.to_string())),
            Some(Ok(msg)) => msg,
        };
        show_and_ack(env, &msg, a.raw, a.no_ack || !acks, false).await?;
        n += 1;
        if a.count > 0 && n >= a.count {
            break;
        }
    }
    Ok(())
}

/// Prints one consumer delivery (as `nats consumer next` does) and acknowledges it, NAKs it
/// (`nak`), or leaves it (`no_ack`).
async fn show_and_ack(
    env: &Env,
    msg: &jetstream::Message,
    raw: bool,
    no_ack: bool,
    nak: bool,
) -> CliResult {
    let info = msg
        .info()
        .map_err(|e| CliError(format!("not a JetStream message: {e}")))?;
    if env.json {
        let value = serde_json::json!({
            "subject": msg.subject,
            "stream": info.stream,
            "consumer": info.consumer,
            "stream_seq": info.stream_sequence,
            "consumer_seq": info.consumer_sequence,
            "delivered": info.delivered,
            "pending": info.pending,
            "data": body_text(&msg.payload),
        });
        outln!("{value}");
    } else if raw {
        outln!("{}", body_text(&msg.payload));
    } else {
        outln!(
            "[{}] subj: {} / tries: {} / cons seq: {} / str seq: {} / pending: {}\n",
            clock(),
            msg.subject,
            info.delivered,
            info.consumer_sequence,
            info.stream_sequence,
            format::num(info.pending)
        );
        if let Some(h) = &msg.headers {
            for (k, v) in h.iter() {
                outln!("{k}: {v}");
            }
        }
        outln!("{}", body_text(&msg.payload));
    }
    if no_ack {
        return Ok(());
    }
    if nak {
        msg.nak().await?;
        if !env.json && !raw {
            outln!("\nNAK'd message");
        }
    } else {
        msg.double_ack().await?;
        if !env.json && !raw {
            outln!("\nAcknowledged message");
        }
    }
    if !env.json && !raw {
        outln!();
    }
    Ok(())
}

/// `HH:MM:SS` (UTC) now.
fn clock() -> String {
    let now = jsproto::api::Timestamp::from_unix_nanos(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
    );
    let t = format::time(&now);
    t.get(11..19).unwrap_or(&t).to_owned()
}

/// `consumer info` text: configuration, then the State block.
fn consumer_info_text(info: &ConsumerInfo) -> String {
    let cfg = info.config.clone().unwrap_or_default();
    let mut c = Columns::new(format!(
        "Information for Consumer {} > {} created {}",
        info.stream_name,
        info.name,
        format::time(&info.created)
    ));
    c.section("Configuration");
    let name = if cfg.name.is_empty() {
        &info.name
    } else {
        &cfg.name
    };
    c.row("Name", name);
    c.row_if(
        "Durable Name",
        &cfg.durable_name,
        !cfg.durable_name.is_empty() && cfg.durable_name != *name,
    );
    c.row_if("Description", &cfg.description, !cfg.description.is_empty());
    if cfg.deliver_subject.is_empty() {
        c.row("Pull Mode", true);
    } else {
        c.row("Delivery Subject", &cfg.deliver_subject);
    }
    if !cfg.filter_subject.is_empty() {
        c.row("Filter Subject", &cfg.filter_subject);
    } else if !cfg.filter_subjects.is_empty() {
        c.row("Filter Subjects", cfg.filter_subjects.join(", "));
    }
    let deliver = match cfg.deliver_policy {
        consumer::DeliverPolicy::ByStartSequence => format!("From Sequence {}", cfg.opt_start_seq),
        consumer::DeliverPolicy::ByStartTime => format!(
            "Since {}",
            cfg.opt_start_time
                .as_ref()
                .map(|t| format::time(&t.instant))
                .unwrap_or_default()
        ),
        p => format::title_case(p.as_str()),
    };
    c.row("Deliver Policy", deliver);
    let acks = cfg.ack_policy != consumer::AckPolicy::None;
    c.row("Ack Policy", format::title_case(cfg.ack_policy.as_str()));
    c.row_if("Ack Wait", format::duration(cfg.ack_wait), acks);
    c.row(
        "Replay Policy",
        format::title_case(cfg.replay_policy.as_str()),
    );
    c.row_if(
        "Maximum Deliveries",
        format::num(cfg.max_deliver),
        cfg.max_deliver != -1 && cfg.max_deliver != 0,
    );
    c.row_if(
        "Max Ack Pending",
        format::num(cfg.max_ack_pending),
        cfg.max_ack_pending > 0,
    );
    c.row_if(
        "Max Waiting Pulls",
        format::num(cfg.max_waiting),
        cfg.max_waiting > 0,
    );
    c.row_if(
        "Inactive Threshold",
        format::duration(cfg.inactive_threshold),
        !cfg.inactive_threshold.is_zero() && cfg.deliver_subject.is_empty(),
    );
    c.row_if(
        "Max Pull Expire",
        format::duration(cfg.max_expires),
        !cfg.max_expires.is_zero(),
    );
    c.row_if(
        "Max Pull Batch",
        format::num(cfg.max_batch),
        cfg.max_batch > 0,
    );
    c.row_if(
        "Max Pull MaxBytes",
        format::num(cfg.max_bytes),
        cfg.max_bytes > 0,
    );
    c.row_if(
        "Backoff",
        cfg.backoff
            .iter()
            .map(|d| format::duration(*d))
            .collect::<Vec<_>>()
            .join(", "),
        !cfg.backoff.is_empty(),
    );
    c.row_if("Headers Only", true, cfg.headers_only);
    c.row_if("Memory Storage", true, cfg.mem_storage);
    if cfg.priority_policy != PriorityPolicy::None {
        c.row(
            "Priority Policy",
            format::title_case(cfg.priority_policy.as_str()),
        );
        c.row("Priority Groups", cfg.priority_groups.join(", "));
        c.row_if(
            "Pinned TTL",
            format::duration(cfg.priority_timeout),
            cfg.priority_policy == PriorityPolicy::PinnedClient,
        );
    }

    c.section("State");
    let delivered = format!(
        "Consumer sequence: {} Stream sequence: {}",
        format::num(info.delivered.consumer_seq),
        format::num(info.delivered.stream_seq)
    );
    match &info.delivered.last_active {
        Some(t) => c.row(
            "Last Delivered Message",
            format!(
                "{delivered} Last delivery: {} ago",
                format::duration(format::since(&info.ts, t))
            ),
        ),
        None => c.row("Last Delivered Message", delivered),
    }
    if acks {
        let floor = format!(
            "Consumer sequence: {} Stream sequence: {}",
            format::num(info.ack_floor.consumer_seq),
            format::num(info.ack_floor.stream_seq)
        );
        match &info.ack_floor.last_active {
            Some(t) => c.row(
                "Acknowledgment Floor",
                format!(
                    "{floor} Last Ack: {} ago",
                    format::duration(format::since(&info.ts, t))
                ),
            ),
            None => c.row("Acknowledgment Floor", floor),
        }
        if cfg.max_ack_pending > 0 {
            c.row(
                "Outstanding Acks",
                format!(
                    "{} out of maximum {}",
                    format::num(info.num_ack_pending),
                    format::num(cfg.max_ack_pending)
                ),
            );
        } else {
            c.row("Outstanding Acks", format::num(info.num_ack_pending));
        }
        c.row("Redelivered Messages", format::num(info.num_redelivered));
    }
    c.row("Unprocessed Messages", format::num(info.num_pending));
    if cfg.deliver_subject.is_empty() {
        if cfg.max_waiting > 0 {
            c.row(
                "Waiting Pulls",
                format!(
                    "{} of maximum {}",
                    format::num(info.num_waiting),
                    format::num(cfg.max_waiting)
                ),
            );
        } else {
            c.row(
                "Waiting Pulls",
                format!("{} of unlimited", format::num(info.num_waiting)),
            );
        }
    } else {
        c.row(
            "Active Interest",
            if info.push_bound {
                "Active"
            } else {
                "No interest"
            },
        );
    }
    if info.paused {
        c.row(
            "Paused Until",
            format!(
                "{} ({} remaining)",
                cfg.pause_until
                    .as_ref()
                    .map(|t| format::time(&t.instant))
                    .unwrap_or_default(),
                format::duration(info.pause_remaining)
            ),
        );
    }
    if cfg.priority_policy == PriorityPolicy::PinnedClient {
        for g in &info.priority_groups {
            let pinned = if g.pinned_client_id.is_empty() {
                "no client".to_owned()
            } else {
                format!(
                    "{} since {}",
                    g.pinned_client_id,
                    format::time(&g.pinned_ts)
                )
            };
            c.row(&format!("Pinned ({})", g.group), pinned);
        }
    }
    // Clustered servers only: standalone, nats-server's stream info has `cluster` with just
    // the server's name as leader, which says nothing.
    if let Some(cluster) = info.cluster.as_ref().filter(|c| !c.name.is_empty()) {
        cluster_rows(&mut c, cluster, &info.ts);
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_section_from_recorded_info() {
        // The `cluster` of nats-server 2.15.1's consumer info with n3 stopped
        // (jsproto's tests/fixtures/cluster/consumer_info_offline.json).
        let cluster: ClusterInfo = serde_json::from_str(
            r#"{"name":"C","raft_group":"C-R3F-y4SVlngq","leader":"n2","leader_since":"2026-12-03T10:42:35.980992769Z","system_account":true,"traffic_account":"SYS","replicas":[{"name":"n1","current":true,"active":9268652,"peer":"fjFyEjc1"},{"name":"n3","current":false,"offline":true,"active":0,"lag":6,"peer":"BXScrY9i"}]}"#,
        )
        .unwrap();
        let now: Timestamp = serde_json::from_str(r#""2026-12-03T10:42:37.480992769Z""#).unwrap();
        let mut c = Columns::new("");
        cluster_rows(&mut c, &cluster, &now);
        assert_eq!(
            c.render(),
            "Cluster Information:\n\n\
             \x20       Name: C\n\
             \x20 Raft Group: C-R3F-y4SVlngq\n\
             \x20     Leader: n2 (for 1.50s)\n\
             \x20    Replica: n1, current, seen 0.01s ago\n\
             \x20    Replica: n3, outdated, OFFLINE, not seen, 6 operations behind\n"
        );
        let leaderless = ClusterInfo {
            name: "C".into(),
            ..ClusterInfo::default()
        };
        let mut c = Columns::new("");
        cluster_rows(&mut c, &leaderless, &now);
        assert!(c.render().contains("Leader: none (no leader elected)\n"));
    }

    #[test]
    fn tls_flags_as_the_nats_cli_spells_them() {
        use clap::Parser;
        let cli = Cli::try_parse_from([
            "jsctl",
            "--tlscert",
            "c.pem",
            "--tlskey",
            "k.pem",
            "--tlsca",
            "ca.pem",
            "--tlsfirst",
            "pub",
            "a",
            "b",
        ])
        .unwrap();
        assert_eq!(cli.tls_cert.as_deref(), Some(std::path::Path::new("c.pem")));
        assert_eq!(cli.tls_key.as_deref(), Some(std::path::Path::new("k.pem")));
        assert_eq!(cli.tls_ca.as_deref(), Some(std::path::Path::new("ca.pem")));
        assert!(cli.tls_first);
    }

    #[test]
    fn body_templates_number_messages() {
        assert_eq!(
            render_body(r#"{"order_id":{{Count}}}"#, 7),
            r#"{"order_id":7}"#
        );
        assert_eq!(render_body("n={{.Count}}", 2), "n=2");
        assert_eq!(render_body("plain", 3), "plain");
    }

    #[test]
    fn consumer_info_has_the_state_block() {
        let mut cfg = consumer::pull_config("shipping");
        cfg.max_ack_pending = 1000;
        cfg.max_waiting = 512;
        cfg.ack_wait = std::time::Duration::from_secs(30);
        let info = ConsumerInfo {
            stream_name: "ORDERS".into(),
            name: "shipping".into(),
            config: Some(cfg),
            num_pending: 4,
            num_ack_pending: 1,
            ..Default::default()
        };
        let text = consumer_info_text(&info);
        assert!(
            text.contains(
                "\nState:\n\n  Last Delivered Message: Consumer sequence: 0 Stream sequence: 0\n"
            ),
            "{text}"
        );
        assert!(text.contains("        Outstanding Acks: 1 out of maximum 1,000\n"));
        assert!(text.contains("    Unprocessed Messages: 4\n"));
        assert!(text.contains("           Waiting Pulls: 0 of maximum 512\n"));
        assert!(text.contains("                Ack Wait: 30.00s\n"));
    }
}
