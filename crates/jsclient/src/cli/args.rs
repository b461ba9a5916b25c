//! The command line, as clap types. Names and flags follow the `nats` CLI; nothing prompts:
//! every setting `nats` would ask for is a flag with the server's default.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::{duration_arg, positive_count};

/// The parsed command line (clap derive; the help text is set explicitly below, not from this
/// comment).
#[derive(Debug, Parser)]
#[command(
    name = "jsctl",
    version,
    about = "NATS and JetStream from the command line (a `nats` CLI work-alike).",
    long_about = None,
    max_term_width = 100
)]
pub struct Cli {
    /// Server URLs, comma separated.
    #[arg(
        short = 's',
        long,
        env = "NATS_URL",
        default_value = "nats://127.0.0.1:4222",
        global = true
    )]
    pub server: String,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// User name to authenticate with (`--password` too).
    #[arg(long, env = "NATS_USER", global = true)]
    pub user: Option<String>,
    /// Password for `--user`.
    #[arg(long, env = "NATS_PASSWORD", global = true, hide_env_values = true)]
    pub password: Option<String>,
    /// Token to authenticate with.
    #[arg(long, env = "NATS_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// File holding the user's nkey seed (`SU...`) to authenticate with.
    #[arg(long, env = "NATS_NKEY", global = true, value_name = "FILE")]
    pub nkey: Option<std::path::PathBuf>,
    /// Credentials file (a user JWT and its nkey seed, as `nsc` writes it) to authenticate
    /// with, for servers in operator mode.
    #[arg(
        long,
        env = "NATS_CREDS",
        global = true,
        value_name = "FILE",
        conflicts_with = "nkey"
    )]
    pub creds: Option<std::path::PathBuf>,
    /// Client certificate (PEM) to present over TLS, with `--tlskey`.
    #[arg(
        long = "tlscert",
        env = "NATS_CERT",
        global = true,
        value_name = "FILE"
    )]
    pub tls_cert: Option<std::path::PathBuf>,
    /// Private key (PEM) of `--tlscert`.
    #[arg(long = "tlskey", env = "NATS_KEY", global = true, value_name = "FILE")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Certificate authorities (PEM) to verify the server's certificate with (default: the
    /// system's).
    #[arg(long = "tlsca", env = "NATS_CA", global = true, value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// Start TLS before the server's INFO (servers with `tls { handshake_first: true }`).
    #[arg(long = "tlsfirst", global = true)]
    pub tls_first: bool,
    /// Connection and API timeout.
    #[arg(long, global = true, default_value = "5s", value_parser = duration_arg)]
    pub timeout: Duration,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Publish a message (`{{Count}}` in the body is the message number).
    Pub(PubArgs),
    /// Subscribe and print messages.
    Sub(SubArgs),
    /// Send a request and print the reply.
    #[command(alias = "req")]
    Request(RequestArgs),
    /// Manage streams.
    #[command(subcommand, alias = "s", alias = "str")]
    Stream(StreamCommand),
    /// Manage consumers.
    #[command(subcommand, alias = "c", alias = "con")]
    Consumer(ConsumerCommand),
    /// Servers of the cluster (needs a system account user).
    #[command(subcommand, alias = "srv")]
    Server(ServerCommand),
}

/// `server …`.
#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// List the servers: each one answering `$SYS.REQ.SERVER.PING` (system account only).
    #[command(alias = "ls")]
    List(ServerListArgs),
    /// The JetStream meta group (`nats server raft`).
    #[command(subcommand, alias = "r")]
    Raft(ServerRaftCommand),
}

/// `server raft …`.
#[derive(Debug, Subcommand)]
pub enum ServerRaftCommand {
    /// Make the JetStream meta leader step down, wait for the next one and print it (system
    /// account only).
    #[command(
        name = "step-down",
        alias = "stepdown",
        alias = "sd",
        alias = "elect",
        alias = "down",
        alias = "d"
    )]
    StepDown(ServerRaftStepDownArgs),
}

/// `server raft step-down`.
#[derive(Debug, Args)]
pub struct ServerRaftStepDownArgs {
    /// Ask for this server (by name) as the new leader.
    #[arg(long)]
    pub preferred: Option<String>,
    /// Ask for a new leader in this cluster.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Ask for a new leader having these placement tags (all of them; comma separated or
    /// repeated).
    #[arg(long, value_delimiter = ',')]
    pub tags: Vec<String>,
}

/// `server list`.
#[derive(Debug, Args)]
pub struct ServerListArgs {
    /// Stop waiting once this many servers answered (default: when none answered for 500ms
    /// after the last answer, or after --timeout).
    pub expect: Option<usize>,
}

/// `pub`.
#[derive(Debug, Args)]
pub struct PubArgs {
    /// Subject to publish to.
    pub subject: String,
    /// Message body; `{{Count}}` is replaced by the message number (1, 2, …).
    #[arg(default_value = "")]
    pub body: String,
    /// Publish to JetStream and wait for the stream's acknowledgement.
    #[arg(short = 'J', long)]
    pub jetstream: bool,
    /// Publish this many messages.
    #[arg(long, default_value_t = 1)]
    pub count: u64,
    /// Header `Key:Value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
}

/// `sub`.
#[derive(Debug, Args)]
pub struct SubArgs {
    /// Subject (wildcards allowed).
    pub subject: String,
    /// Join this queue group.
    #[arg(long)]
    pub queue: Option<String>,
    /// Exit after this many messages (0: never).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
}

/// `request`.
#[derive(Debug, Args)]
pub struct RequestArgs {
    /// Subject to send the request to.
    pub subject: String,
    /// Request body.
    #[arg(default_value = "")]
    pub body: String,
    /// Header `Key:Value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
}

/// `stream …`.
#[derive(Debug, Subcommand)]
pub enum StreamCommand {
    /// Create a stream.
    #[command(alias = "create", alias = "new")]
    Add(StreamAddArgs),
    /// Show a stream's configuration and state.
    #[command(alias = "show")]
    Info(StreamName),
    /// List streams.
    #[command(alias = "list")]
    Ls(ListArgs),
    /// Delete a stream and all its messages and consumers.
    #[command(alias = "delete", alias = "del")]
    Rm(StreamForce),
    /// Remove all messages of a stream.
    Purge(StreamForce),
    /// Show one message by sequence.
    Get(StreamGetArgs),
    /// Show the stream's messages.
    View(StreamViewArgs),
    /// The stream's Raft group in a cluster.
    #[command(subcommand)]
    Cluster(StreamClusterCommand),
}

/// `stream cluster …`.
#[derive(Debug, Subcommand)]
pub enum StreamClusterCommand {
    /// Make the stream's leader step down, wait for the next one and print it.
    #[command(name = "step-down", alias = "stepdown")]
    StepDown(StreamStepDownArgs),
}

/// `stream cluster step-down`.
#[derive(Debug, Args)]
pub struct StreamStepDownArgs {
    /// Stream name.
    pub stream: String,
    /// Ask for this server (by name) as the new leader.
    #[arg(long)]
    pub preferred: Option<String>,
}

/// A stream name.
#[derive(Debug, Args)]
pub struct StreamName {
    /// Stream name.
    pub stream: String,
}

/// A stream name and `--force`.
#[derive(Debug, Args)]
pub struct StreamForce {
    /// Stream name.
    pub stream: String,
    /// Do not ask for confirmation (jsctl never asks; accepted for `nats` compatibility).
    #[arg(short = 'f', long)]
    pub force: bool,
}

/// `ls` flags.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only print the names.
    #[arg(short = 'n', long)]
    pub names: bool,
}

/// `stream get`.
#[derive(Debug, Args)]
pub struct StreamGetArgs {
    /// Stream name.
    pub stream: String,
    /// Message sequence.
    pub seq: u64,
}

/// `stream view`.
#[derive(Debug, Args)]
pub struct StreamViewArgs {
    /// Stream name.
    pub stream: String,
    /// Show at most this many messages (0: all).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
}

/// Retention policies, as `nats stream add --retention` spells them.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Retention {
    /// Keep messages until a limit removes them.
    Limits,
    /// Keep messages while a consumer has not acknowledged them.
    Interest,
    /// Remove a message once one consumer acknowledged it.
    #[value(alias = "workq", alias = "workqueue")]
    Work,
}

/// Storage types.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Storage {
    /// File storage.
    File,
    /// Memory storage.
    #[value(alias = "mem")]
    Memory,
}

/// Discard policies.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Discard {
    /// Drop old messages at a limit.
    Old,
    /// Refuse new messages at a limit.
    New,
}

/// `stream add`.
#[derive(Debug, Args)]
pub struct StreamAddArgs {
    /// Stream name.
    pub stream: String,
    /// Subjects the stream captures, comma separated (default: the stream name).
    #[arg(long, value_delimiter = ',')]
    pub subjects: Vec<String>,
    /// Retention policy.
    #[arg(long, value_enum, default_value = "limits")]
    pub retention: Retention,
    /// Storage type.
    #[arg(long, value_enum, default_value = "file")]
    pub storage: Storage,
    /// Discard policy.
    #[arg(long, value_enum, default_value = "old")]
    pub discard: Discard,
    /// Maximum messages (-1: unlimited).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub max_msgs: i64,
    /// Maximum messages per subject (-1: unlimited).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub max_msgs_per_subject: i64,
    /// Maximum bytes (-1: unlimited).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub max_bytes: i64,
    /// Maximum message age (0: unlimited).
    #[arg(long, value_parser = duration_arg)]
    pub max_age: Option<Duration>,
    /// Maximum message size (-1: unlimited).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub max_msg_size: i32,
    /// Duplicate detection window (default 2m).
    #[arg(long, value_parser = duration_arg)]
    pub dupe_window: Option<Duration>,
    /// Number of replicas.
    #[arg(long, default_value_t = 1)]
    pub replicas: i64,
    /// Description.
    #[arg(long)]
    pub description: Option<String>,
    /// Accept defaults for everything not given (jsctl never prompts; accepted for `nats`
    /// compatibility).
    #[arg(long)]
    pub defaults: bool,
}

/// `consumer …`.
#[derive(Debug, Subcommand)]
pub enum ConsumerCommand {
    /// Create a durable pull consumer.
    #[command(alias = "create", alias = "new")]
    Add(ConsumerAddArgs),
    /// Show a consumer's configuration and state.
    #[command(alias = "state")]
    Info(ConsumerName),
    /// List a stream's consumers.
    #[command(alias = "list")]
    Ls(ConsumerLsArgs),
    /// Delete a consumer.
    #[command(alias = "delete", alias = "del")]
    Rm(ConsumerForce),
    /// Change a consumer's settings.
    #[command(alias = "update")]
    Edit(ConsumerEditArgs),
    /// Pull messages from a pull consumer and acknowledge them.
    Next(ConsumerNextArgs),
    /// Subscribe to a push consumer and print (and acknowledge) what it delivers.
    Sub(ConsumerSubArgs),
    /// Pause a consumer until a time or for a while: it delivers nothing meanwhile.
    Pause(ConsumerPauseArgs),
    /// Resume a paused consumer.
    #[command(alias = "unpause")]
    Resume(ConsumerName),
    /// Release the pin of a priority group on a pinned_client consumer.
    Unpin(ConsumerUnpinArgs),
    /// List a consumer's unacknowledged messages and who holds each (jsserver only).
    Pending(ConsumerName),
}

/// `consumer sub`.
#[derive(Debug, Args)]
pub struct ConsumerSubArgs {
    /// Stream name.
    pub stream: String,
    /// Consumer name (a push consumer).
    pub consumer: String,
    /// Stop after this many messages (0: until interrupted).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
    /// Do not acknowledge.
    #[arg(long)]
    pub no_ack: bool,
    /// Give up when nothing arrives for this long (default: wait forever).
    #[arg(long, value_parser = duration_arg)]
    pub wait: Option<Duration>,
    /// Print only the bodies.
    #[arg(long)]
    pub raw: bool,
}

/// `consumer pause`.
#[derive(Debug, Args)]
pub struct ConsumerPauseArgs {
    /// Stream name.
    pub stream: String,
    /// Consumer name.
    pub consumer: String,
    /// Until when: a duration from now (`10m`, `1h30m`) or an RFC 3339 time.
    pub until: String,
}

/// `consumer unpin`.
#[derive(Debug, Args)]
pub struct ConsumerUnpinArgs {
    /// Stream name.
    pub stream: String,
    /// Consumer name.
    pub consumer: String,
    /// Priority group.
    pub group: String,
}

/// `--priority-policy`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Priority {
    /// No priority groups.
    None,
    /// Standby pulls (`min_pending`, `min_ack_pending`) served only when a backlog builds.
    Overflow,
    /// One client at a time gets everything until it stops pulling.
    #[value(name = "pinned_client", alias = "pinned")]
    PinnedClient,
    /// Pulls served by their priority (0 first).
    Prioritized,
}

/// Stream and consumer names.
#[derive(Debug, Args)]
pub struct ConsumerName {
    /// Stream name.
    pub stream: String,
    /// Consumer name.
    pub consumer: String,
}

/// `consumer rm`.
#[derive(Debug, Args)]
pub struct ConsumerForce {
    /// Stream name.
    pub stream: String,
    /// Consumer name.
    pub consumer: String,
    /// Do not ask for confirmation (jsctl never asks).
    #[arg(short = 'f', long)]
    pub force: bool,
}

/// `consumer ls`.
#[derive(Debug, Args)]
pub struct ConsumerLsArgs {
    /// Stream name.
    pub stream: String,
    /// Only print the names.
    #[arg(short = 'n', long)]
    pub names: bool,
}

/// Ack policies.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Ack {
    /// Every message is acknowledged on its own.
    Explicit,
    /// Acknowledging a message acknowledges all before it.
    All,
    /// No acknowledgements.
    None,
}

/// Deliver policies.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Deliver {
    /// From the first message.
    All,
    /// From the last message.
    Last,
    /// Only messages published after creation.
    New,
    /// The last message of each subject.
    #[value(name = "last_per_subject", alias = "subject")]
    LastPerSubject,
}

/// Replay policies.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Replay {
    /// As fast as possible.
    Instant,
    /// At the rate they were published.
    Original,
}

/// `consumer add`.
#[derive(Debug, Args)]
pub struct ConsumerAddArgs {
    /// Stream name.
    pub stream: String,
    /// Consumer (durable) name.
    pub consumer: String,
    /// Pull mode (the default; accepted for `nats` compatibility).
    #[arg(long, conflicts_with = "target")]
    pub pull: bool,
    /// Push mode: deliver to this subject (`deliver_subject`).
    #[arg(long)]
    pub target: Option<String>,
    /// Push mode: subscribers share the consumer in this queue group (`deliver_group`).
    #[arg(long, requires = "target")]
    pub deliver_group: Option<String>,
    /// Push mode: idle heartbeat interval.
    #[arg(long, requires = "target", value_parser = duration_arg)]
    pub heartbeat: Option<Duration>,
    /// Push mode: flow control (needs --heartbeat).
    #[arg(long, requires = "heartbeat")]
    pub flow_control: bool,
    /// Acknowledgement policy.
    #[arg(long, value_enum, default_value = "explicit")]
    pub ack: Ack,
    /// Where to start.
    #[arg(long, value_enum, default_value = "all")]
    pub deliver: Deliver,
    /// Replay policy.
    #[arg(long, value_enum, default_value = "instant")]
    pub replay: Replay,
    /// Only deliver messages on subjects matching this filter.
    #[arg(long)]
    pub filter: Option<String>,
    /// Acknowledgement wait before redelivery (default 30s).
    #[arg(long, value_parser = duration_arg)]
    pub wait: Option<Duration>,
    /// Maximum deliveries of one message (-1: unlimited).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub max_deliver: i64,
    /// Maximum unacknowledged messages (default 1000).
    #[arg(long)]
    pub max_pending: Option<i64>,
    /// Maximum waiting pulls (default 512).
    #[arg(long)]
    pub max_waiting: Option<i64>,
    /// Description.
    #[arg(long)]
    pub description: Option<String>,
    /// Priority policy (needs --priority-groups).
    #[arg(long, value_enum, default_value = "none")]
    pub priority_policy: Priority,
    /// Priority group names (comma separated or repeated).
    #[arg(long, value_delimiter = ',')]
    pub priority_groups: Vec<String>,
    /// How long a pin lasts without a pull from its client (pinned_client; default 2m).
    #[arg(long, value_parser = duration_arg)]
    pub pinned_ttl: Option<Duration>,
    /// Accept defaults for everything not given (jsctl never prompts).
    #[arg(long)]
    pub defaults: bool,
}

/// `consumer edit`.
#[derive(Debug, Args)]
pub struct ConsumerEditArgs {
    /// Stream name.
    pub stream: String,
    /// Consumer name.
    pub consumer: String,
    /// New maximum of unacknowledged messages.
    #[arg(long)]
    pub max_pending: Option<i64>,
    /// New acknowledgement wait.
    #[arg(long, value_parser = duration_arg)]
    pub wait: Option<Duration>,
    /// New maximum deliveries (-1: unlimited).
    #[arg(long, allow_negative_numbers = true)]
    pub max_deliver: Option<i64>,
    /// New maximum of waiting pulls.
    #[arg(long)]
    pub max_waiting: Option<i64>,
    /// New description.
    #[arg(long)]
    pub description: Option<String>,
}

/// `consumer next`.
#[derive(Debug, Args)]
pub struct ConsumerNextArgs {
    /// Stream name.
    pub stream: String,
    /// Consumer name.
    pub consumer: String,
    /// Number of messages to pull (at least 1).
    #[arg(long, default_value_t = 1, value_parser = positive_count)]
    pub count: u64,
    /// Acknowledge each message (the default).
    #[arg(long, conflicts_with_all = ["no_ack", "nak"])]
    pub ack: bool,
    /// Do not acknowledge: the message is redelivered after the ack wait.
    #[arg(long)]
    pub no_ack: bool,
    /// Answer `-NAK` instead of acknowledging.
    #[arg(long, conflicts_with = "no_ack")]
    pub nak: bool,
    /// How long to wait for each message.
    #[arg(long, default_value = "5s", value_parser = duration_arg)]
    pub wait: Duration,
    /// Print only the bodies.
    #[arg(long)]
    pub raw: bool,
    /// Pull in this priority group (consumers with a priority policy).
    #[arg(long)]
    pub group: Option<String>,
    /// Overflow: only be served while at least this many messages are pending.
    #[arg(long, requires = "group")]
    pub min_pending: Option<u64>,
    /// Overflow: only be served while at least this many acks are outstanding.
    #[arg(long, requires = "group")]
    pub min_ack_pending: Option<u64>,
    /// Prioritized: this pull's priority, 0 (first) to 9.
    #[arg(long, requires = "group", value_parser = clap::value_parser!(u8).range(0..=9))]
    pub priority: Option<u8>,
}
