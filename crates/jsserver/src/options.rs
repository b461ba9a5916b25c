//! The server's merged options: defaults, then the config file, then flags.
//!
//! Keys, flag meanings and defaults follow nats-server's `server/opts.go`
//! and `server/const.go`, except where noted on a field (notably: the
//! default host is `127.0.0.1`).
//!
//! The config schema is strict, as nats-server's: a key that its block does
//! not have is an error (`server.conf:2:3: unknown field "tsl"`). Keys that
//! nats-server has and jsserver does not act on are in [`UNSUPPORTED`], each
//! ignored (with a warning) or refused. Fail closed: settings for access
//! control, encryption, replication or resource limits that the server does
//! not enforce yet are refused; giving one (config key or flag) makes
//! [`ServerOptions::load`] fail with [`OptionsError::Refused`] (see
//! `docs/security.md`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::auth::config::{self as auth_config, AuthOptions, Secret};
use crate::cli::Cli;
use crate::conf::{self, ConfError, ConfErrors, Item, Map, Value};
use crate::tls::TlsOptions;

/// Default client listen host. nats-server's is `0.0.0.0`; jsserver listens
/// on loopback unless told otherwise.
pub const DEFAULT_HOST: &str = "127.0.0.1";
/// Default client port, as nats-server.
pub const DEFAULT_PORT: u16 = 4222;
/// Default maximum payload: 1 MiB, as nats-server's `MAX_PAYLOAD_SIZE`.
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;
/// Largest accepted `max_payload`: 64 MiB (nats-server only warns; see
/// [`MAX_PAYLOAD_WARN`]). Larger is an error.
pub const MAX_PAYLOAD_LIMIT: usize = 64 << 20;
/// A `max_payload` above 8 MiB gives a warning, as nats-server's
/// `MAX_PAYLOAD_MAX_SIZE`.
pub const MAX_PAYLOAD_WARN: usize = 8 << 20;
/// Default maximum control line (protocol line) length in bytes, as
/// nats-server's `MAX_CONTROL_LINE_SIZE`.
pub const DEFAULT_MAX_CONTROL_LINE: usize = 4096;
/// Default interval between server PINGs, as nats-server.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(120);
/// Default number of unanswered PINGs before a client is disconnected.
pub const DEFAULT_PING_MAX: u32 = 2;
/// Default write (flush) deadline, as nats-server's `DEFAULT_FLUSH_DEADLINE`.
pub const DEFAULT_WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// Default maximum pending outbound bytes per client: 64 MiB, as
/// nats-server's `MAX_PENDING_SIZE`.
pub const DEFAULT_MAX_PENDING: usize = 64 << 20;
/// Default `max_connections` (nats-server's `DEFAULT_MAX_CONNECTIONS`, 64K).
pub const DEFAULT_MAX_CONNECTIONS: usize = 64 * 1024;
/// Default `lame_duck_duration`: 2 minutes, as nats-server's
/// `DEFAULT_LAME_DUCK_DURATION`.
pub const DEFAULT_LAME_DUCK_DURATION: Duration = Duration::from_secs(120);
/// Smallest `lame_duck_duration` nats-server accepts: 30 s.
pub const MIN_LAME_DUCK_DURATION: Duration = Duration::from_secs(30);
/// Default `lame_duck_grace_period`: 10 s, as nats-server's
/// `DEFAULT_LAME_DUCK_GRACE_PERIOD`.
pub const DEFAULT_LAME_DUCK_GRACE_PERIOD: Duration = Duration::from_secs(10);
/// Default JetStream file store sync interval: 2 minutes, as nats-server's
/// `defaultSyncInterval`.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(120);

/// Which top-level keys [`ServerOptions::apply_config`] has met so far.
#[derive(Debug, Default)]
struct Seen {
    /// `http: host:port` gave the monitoring host.
    http_host: bool,
    /// `store_dir` was given (at the top or in `jetstream { }`).
    store_dir: bool,
}

/// When the file store fsyncs (`jetstream { sync_interval: ... }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Sync every this often (default [`DEFAULT_SYNC_INTERVAL`]).
    Interval(Duration),
    /// Sync after every write (`sync_interval: always`).
    Always,
}

impl Default for SyncPolicy {
    fn default() -> Self {
        SyncPolicy::Interval(DEFAULT_SYNC_INTERVAL)
    }
}

/// All server options after merging defaults, the config file and flags.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerOptions {
    /// Client listen host (`-a`, `host`/`net`, `listen`). Default
    /// [`DEFAULT_HOST`].
    pub host: String,
    /// Client listen port (`-p`, `port`, `listen`); `0` means "pick a free
    /// port" (given as `-1`). Default [`DEFAULT_PORT`]; a given `0` also means
    /// the default, as nats-server.
    pub port: u16,
    /// Server name (`-n`, `server_name`); no spaces. `None`: the server picks
    /// one (nats-server uses its generated id).
    pub server_name: Option<String>,
    /// `server_tags`: this server's placement tags (a string or an array of strings), as
    /// nats-server 2.15.1 keeps them (jwt's `TagList`): each trimmed and lower-cased, empty
    /// ones dropped, each once, in the order given. Streams whose `placement.tags` all appear
    /// here may be placed on this server (`docs/cluster.md`); shown in `/varz` `tags` and the
    /// system account's `server` block. Default none.
    pub server_tags: Vec<String>,
    /// Monitoring (HTTP) host (`http: host:port`). Default: [`Self::host`].
    pub http_host: String,
    /// Monitoring port (`-m`, `http_port`/`monitor_port`, `http`). `None` =
    /// no monitoring (the default, also given as `0`); `Some(0)` = pick a
    /// free port (given as `-1`).
    pub http_port: Option<u16>,
    /// HTTPS monitoring port (`-ms`, `https_port`, `https: host:port`), with the `tls` block's
    /// certificate and no client certificates, as nats-server's; same values as
    /// [`Self::http_port`]. Needs `tls`, and excludes `http_port`.
    pub https_port: Option<u16>,
    /// Maximum message payload in bytes (`max_payload`, `--max_payload`).
    /// Default [`DEFAULT_MAX_PAYLOAD`]; at most [`MAX_PAYLOAD_LIMIT`] and at
    /// most [`Self::max_pending`].
    pub max_payload: usize,
    /// Maximum protocol control line in bytes (`max_control_line`), counted as nats-server
    /// counts it: the arguments after the op name and its blanks. Default
    /// [`DEFAULT_MAX_CONTROL_LINE`].
    pub max_control_line: usize,
    /// Interval between server PINGs (`ping_interval`). Default
    /// [`DEFAULT_PING_INTERVAL`].
    pub ping_interval: Duration,
    /// Unanswered PINGs before disconnecting (`ping_max`). Default
    /// [`DEFAULT_PING_MAX`].
    pub ping_max: u32,
    /// Deadline for a write to a client (`write_deadline`). Default
    /// [`DEFAULT_WRITE_DEADLINE`].
    pub write_deadline: Duration,
    /// Maximum pending outbound bytes per client (`max_pending`). Default
    /// [`DEFAULT_MAX_PENDING`].
    pub max_pending: usize,
    /// Maximum subscriptions of one client connection (`max_subscriptions`,
    /// `max_subs`); `0` (the default, also for a negative value): no limit.
    /// As nats-server, the lower of this and the client's account's
    /// `limits { max_subscriptions }` applies; a SUB past it gets `-ERR
    /// 'maximum subscriptions exceeded'` and the connection stays open.
    pub max_subscriptions: usize,
    /// Maximum tokens of a subscription's subject (`max_sub_tokens`,
    /// `max_subscription_tokens`), 1 to 255; `0` (the default): no limit. A
    /// SUB with more gets `-ERR 'Permissions Violation for Subscription to
    /// "SUBJECT", too many tokens'` and the connection stays open, as
    /// nats-server.
    pub max_sub_tokens: u8,
    /// Maximum client connections (`max_connections`); one more gets
    /// `-ERR 'maximum connections exceeded'` and is closed. Default
    /// [`DEFAULT_MAX_CONNECTIONS`] (nats-server's 64K).
    pub max_connections: usize,
    /// JetStream enabled. Default false, as nats-server: `-js`/`--jetstream`,
    /// `jetstream: enabled` (also `true`) or a `jetstream { ... }` block
    /// turns it on; `--js=false` or `jetstream: disabled` (also `false`, or
    /// `enabled: false` in the block) keeps it off. Without JetStream,
    /// `$JS.API.>` requests get no responders, as from nats-server.
    pub jetstream: bool,
    /// JetStream storage directory (`-sd`, `store_dir`, `jetstream {
    /// store_dir }`). Files go under [`Self::jetstream_dir`]. Default
    /// [`default_store_dir`].
    pub store_dir: PathBuf,
    /// JetStream memory storage limit in bytes (`max_memory_store`,
    /// `max_mem_store`, `max_mem`). `None` = no explicit limit (also for a
    /// negative value, as nats-server's `-1`).
    pub max_memory_store: Option<u64>,
    /// JetStream file storage limit in bytes (`max_file_store`, `max_file`).
    /// `None` = no explicit limit.
    pub max_file_store: Option<u64>,
    /// File store sync policy (`sync_interval`/`sync`). Default every 2 min.
    pub sync_interval: SyncPolicy,
    /// `$JS.API` requests waiting for an account's API thread at most (`jetstream {
    /// request_queue_limit }`); more are dropped. Default 10,000, as nats-server's.
    pub jetstream_request_queue_limit: usize,
    /// Log debug lines (`-D`, `-DV`, `debug`). Default false.
    pub debug: bool,
    /// Log trace lines (`-V`, `-DV`, `trace`, `trace_verbose`). Default false.
    pub trace: bool,
    /// Timestamp log lines (`-T`, `logtime`). Default true.
    pub logtime: bool,
    /// Log to this file, appending (`-l`, `log_file`/`logfile`). Default
    /// stderr.
    pub log_file: Option<PathBuf>,
    /// Write the process id here (`-P`, `pid_file`/`pidfile`); see
    /// [`write_pid_file`].
    pub pid_file: Option<PathBuf>,
    /// Write `<exe>_<pid>.ports` here (`--ports_file_dir`, `ports_file_dir`);
    /// see [`write_ports_file`].
    pub ports_file_dir: Option<PathBuf>,
    /// The config file the options were read from (`-c`), if any.
    pub config_file: Option<PathBuf>,
    /// Lame-duck mode (SIGUSR2): how long closing the clients is spread over,
    /// grace period included (`lame_duck_duration`, at least
    /// [`MIN_LAME_DUCK_DURATION`]). Default [`DEFAULT_LAME_DUCK_DURATION`].
    pub lame_duck_duration: Duration,
    /// Lame-duck mode: how long after the `ldm` INFO the first client is
    /// closed (`lame_duck_grace_period`; 0 means the default); must be
    /// shorter than [`Self::lame_duck_duration`]. Default
    /// [`DEFAULT_LAME_DUCK_GRACE_PERIOD`].
    pub lame_duck_grace_period: Duration,
    /// Authentication and permissions: the `authorization` block, `no_auth_user`, and the
    /// `--user`/`--pass`/`--auth` flags. Default: none (every client may do everything).
    pub auth: AuthOptions,
    /// TLS for client connections: the `tls` block (and top-level `allow_non_tls`), or the
    /// `--tls`, `--tlscert`, `--tlskey`, `--tlscacert`, `--tlsverify` flags, which replace the
    /// block's files and `verify` (`--tls=false` turns TLS off). Its files are loaded by
    /// [`ServerOptions::load`]. Default: none (plain text).
    pub tls: Option<TlsOptions>,
    /// Accept plain-text clients on a TLS listener too (`allow_non_tls`); see
    /// [`TlsOptions::allow_non_tls`]. Default false.
    pub allow_non_tls: bool,
    /// The WebSocket listener (`websocket { }`, also `ws`), when it has a port. Default: none.
    pub websocket: Option<crate::websocket::WebsocketOptions>,
    /// The cluster (`cluster { }` with a port, or `--cluster URL`): routes to the other
    /// servers. Default: none (a standalone server).
    pub cluster: Option<crate::cluster::config::ClusterOptions>,
}

impl Default for ServerOptions {
    /// The documented defaults; no config file, no flags.
    fn default() -> Self {
        ServerOptions {
            host: DEFAULT_HOST.to_string(),
            port: DEFAULT_PORT,
            server_name: None,
            server_tags: Vec::new(),
            http_host: DEFAULT_HOST.to_string(),
            http_port: None,
            https_port: None,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_control_line: DEFAULT_MAX_CONTROL_LINE,
            ping_interval: DEFAULT_PING_INTERVAL,
            ping_max: DEFAULT_PING_MAX,
            write_deadline: DEFAULT_WRITE_DEADLINE,
            max_pending: DEFAULT_MAX_PENDING,
            max_subscriptions: 0,
            max_sub_tokens: 0,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            jetstream: false,
            store_dir: default_store_dir(),
            max_memory_store: None,
            max_file_store: None,
            sync_interval: SyncPolicy::default(),
            jetstream_request_queue_limit: crate::jetstream::api_queue::MAX_REQUESTS,
            debug: false,
            trace: false,
            logtime: true,
            log_file: None,
            pid_file: None,
            ports_file_dir: None,
            config_file: None,
            lame_duck_duration: DEFAULT_LAME_DUCK_DURATION,
            lame_duck_grace_period: DEFAULT_LAME_DUCK_GRACE_PERIOD,
            auth: AuthOptions::default(),
            tls: None,
            allow_non_tls: false,
            websocket: None,
            cluster: None,
        }
    }
}

/// Why options could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// The config file cannot be read, is malformed, has unknown keys, or
    /// values in it are invalid; each error names the file, line and column.
    #[error(transparent)]
    Config(#[from] ConfErrors),
    /// An invalid flag value or combination of options, e.g.
    /// `max_payload (2000) cannot be higher than max_pending (1000)`.
    #[error("{0}")]
    Invalid(String),
    /// Refused settings of [`UNSUPPORTED`] were given: the server must not start
    /// (fail closed). Each refusal displays on a line of its own; `main`
    /// logs each as an `[FTL]` line (see [`crate::logging::fatal`]).
    #[error("{0}")]
    Refused(Refusals),
}

impl From<ConfError> for OptionsError {
    fn from(e: ConfError) -> Self {
        OptionsError::Config(e.into())
    }
}

/// The default JetStream store directory: `$XDG_DATA_HOME/jsserver`, else
/// `$HOME/.local/share/jsserver`, else `<temp dir>/jsserver`.
/// (nats-server uses `<temp dir>/nats`.)
pub fn default_store_dir() -> PathBuf {
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(xdg) = env_dir("XDG_DATA_HOME") {
        return xdg.join("jsserver");
    }
    if let Some(home) = env_dir("HOME") {
        return home.join(".local/share/jsserver");
    }
    std::env::temp_dir().join("jsserver")
}

/// A port number as nats-server takes it: `-1` = pick a free one (0 here),
/// `0` = `default`, else 1..=65535.
pub(crate) fn port_from(n: i64, default: u16) -> Option<u16> {
    match n {
        -1 => Some(0),
        0 => Some(default),
        1..=65535 => u16::try_from(n).ok(),
        _ => None,
    }
}

/// A monitoring port: `-1` = pick a free one, `0` = disabled.
fn http_port_from(n: i64) -> Option<Option<u16>> {
    match n {
        -1 => Some(Some(0)),
        0 => Some(None),
        1..=65535 => u16::try_from(n).ok().map(Some),
        _ => None,
    }
}

/// Splits `host:port` / `[v6]:port` like Go's `net.SplitHostPort`.
pub(crate) fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, port) = rest.split_once("]:")?;
        return Some((host, port));
    }
    let (host, port) = s.rsplit_once(':')?;
    if host.contains(':') {
        return None;
    }
    Some((host, port))
}

/// A `listen`-style value: a port, or `host:port` (as nats-server's
/// `parseListen`). Returns the host (if non-empty) and the port number as
/// written.
pub(crate) fn parse_listen(key: &str, item: &Item) -> Result<(Option<String>, i64), ConfError> {
    let bad = |what: String| ConfError::at(item, format!("{key}: {what}"));
    match &item.value {
        Value::Integer(n) => Ok((None, *n)),
        Value::String(s) => {
            let (host, port) = split_host_port(s)
                .ok_or_else(|| bad(format!("could not parse address string {s:?}")))?;
            let n: i64 = port
                .parse()
                .map_err(|_| bad(format!("could not parse port {port:?}")))?;
            Ok(((!host.is_empty()).then(|| host.to_string()), n))
        }
        other => Err(bad(format!(
            "expected port or host:port, got {}",
            other.type_name()
        ))),
    }
}

/// `server_tags`: a string (one tag) or an array of strings, each trimmed and lower-cased,
/// empty ones dropped and each kept once (nats-server's `TagList.Add`). Anything else is an
/// error, as nats-server's `error parsing tags: unsupported type`.
fn parse_tags(key: &str, item: &Item) -> Result<Vec<String>, ConfError> {
    let items: Vec<&Item> = match &item.value {
        Value::Array(list) => list.iter().collect(),
        _ => vec![item],
    };
    let mut tags: Vec<String> = Vec::new();
    for t in items {
        let Some(text) = t.as_str() else {
            return Err(ConfError::at(
                t,
                format!(
                    "{key}: error parsing tags: unsupported type {}, a string is expected",
                    t.value.type_name()
                ),
            ));
        };
        let tag = text.trim().to_lowercase();
        if !tag.is_empty() && !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    Ok(tags)
}

pub(crate) fn expect_int(key: &str, item: &Item) -> Result<i64, ConfError> {
    item.as_int().ok_or_else(|| {
        ConfError::at(
            item,
            format!("{key}: expected an integer, got {}", item.value.type_name()),
        )
    })
}

pub(crate) fn expect_str<'a>(key: &str, item: &'a Item) -> Result<&'a str, ConfError> {
    item.as_str().ok_or_else(|| {
        ConfError::at(
            item,
            format!("{key}: expected a string, got {}", item.value.type_name()),
        )
    })
}

pub(crate) fn expect_bool(key: &str, item: &Item) -> Result<bool, ConfError> {
    item.as_bool().ok_or_else(|| {
        ConfError::at(
            item,
            format!("{key}: expected a boolean, got {}", item.value.type_name()),
        )
    })
}

/// A non-negative byte count; `0` means `default`.
fn expect_bytes(key: &str, item: &Item, default: usize) -> Result<usize, ConfError> {
    let n = expect_int(key, item)?;
    match n {
        0 => Ok(default),
        n if n < 0 => Err(ConfError::at(
            item,
            format!("{key}: must not be negative, got {n}"),
        )),
        n => usize::try_from(n)
            .map_err(|_| ConfError::at(item, format!("{key}: value {n} is too big"))),
    }
}

/// A duration as nats-server's `parseDuration`: a Go duration string, or
/// (deprecated, with a warning) an integer number of seconds. A bare token
/// such as `2m` (which the lexer reads as the integer 2000000) is taken as
/// the duration it spells. `0` means `default`.
pub(crate) fn expect_duration(
    key: &str,
    item: &Item,
    default: Duration,
    warnings: &mut Vec<String>,
) -> Result<Duration, ConfError> {
    let d = match &item.value {
        Value::String(s) => conf::parse_duration(s)
            .ok_or_else(|| ConfError::at(item, format!("{key}: invalid duration {s:?}")))?,
        Value::Integer(n) => {
            let spelled = item
                .raw
                .as_deref()
                .filter(|r| !r.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
                .and_then(conf::parse_duration);
            match spelled {
                Some(d) => d,
                None if *n < 0 => {
                    return Err(ConfError::at(item, format!("{key}: must not be negative")))
                }
                None => {
                    warnings.push(
                        ConfError::at(
                            item,
                            format!(
                                "{key} should be converted to a duration (taking {n} as seconds)"
                            ),
                        )
                        .to_string(),
                    );
                    Duration::from_secs(n.unsigned_abs())
                }
            }
        }
        other => {
            return Err(ConfError::at(
                item,
                format!(
                    "{key}: expected a duration such as \"2m\", got {}",
                    other.type_name()
                ),
            ))
        }
    };
    Ok(if d.is_zero() { default } else { d })
}

/// A JetStream storage size: an integer (size suffixes as the lexer), or a
/// string as nats-server's `getStorageSize` (`"1G"` = 1 GiB, `K/M/G/T`
/// powers of 1024), also accepting the lexer's suffixes (`"64MB"`).
/// Negative = no limit (`None`).
fn expect_storage_size(key: &str, item: &Item) -> Result<Option<u64>, ConfError> {
    let n = match &item.value {
        Value::Integer(n) => *n,
        Value::String(s) if s.is_empty() => 0,
        Value::String(s) => {
            // nats-server's getStorageSize: one of K, M, G, T, powers of 1024.
            let binary = s.char_indices().last().and_then(|(i, c)| {
                let shift = match c {
                    'K' => 10,
                    'M' => 20,
                    'G' => 30,
                    'T' => 40,
                    _ => return None,
                };
                s[..i].parse::<i64>().ok()?.checked_mul(1i64 << shift)
            });
            binary.or_else(|| conf::parse_size(s)).ok_or_else(|| {
                ConfError::at(
                    item,
                    format!("{key}: invalid size {s:?} (use e.g. 1G, 512MB)"),
                )
            })?
        }
        other => {
            return Err(ConfError::at(
                item,
                format!("{key}: expected a size, got {}", other.type_name()),
            ))
        }
    };
    Ok(u64::try_from(n).ok())
}

/// What a refused setting is for (see [`UNSUPPORTED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Who may connect and what they may do: users, passwords, tokens,
    /// accounts, JWT trust, where messages go (subject mappings).
    AccessControl,
    /// TLS on a listener, or encryption at rest of the JetStream store.
    Encryption,
    /// Connections to other servers: clusters, gateways, leaf nodes.
    Replication,
    /// Limits on what clients may create (JetStream's server-wide limits).
    ResourceLimits,
}

impl Purpose {
    /// `access control`, `encryption`, `replication` or `resource limits`.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::AccessControl => "access control",
            Purpose::Encryption => "encryption",
            Purpose::Replication => "replication",
            Purpose::ResourceLimits => "resource limits",
        }
    }
}

impl std::fmt::Display for Purpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in the config file a key of [`UNSUPPORTED`] sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    /// At the top level of the file.
    Top,
    /// Inside the `jetstream { ... }` block.
    JetStream,
    /// Inside the `authorization { ... }` block.
    Authorization,
    /// Inside one account of the `accounts { NAME: { ... } }` block.
    Account,
    /// Inside the top-level `tls { ... }` block (and the `websocket` block's `tls`).
    Tls,
    /// Inside the `websocket { ... }` block.
    Websocket,
    /// Inside the `cluster { ... }` block.
    Cluster,
}

impl Section {
    /// How a key of the section is shown: `tls.` before `verify`; nothing at the top.
    pub fn prefix(self) -> &'static str {
        match self {
            Section::Top => "",
            Section::JetStream => "jetstream.",
            Section::Authorization => "authorization.",
            Section::Account => "accounts.NAME.",
            Section::Tls => "tls.",
            Section::Websocket => "websocket.",
            Section::Cluster => "cluster.",
        }
    }
}

/// A command-line flag of a refused setting, as nats-server's
/// `ConfigureOptions` defines it (written with one or two dashes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedFlag {
    /// The flag's name without dashes, e.g. `tlscert`.
    pub name: &'static str,
    /// A Go boolean flag (`-tls`, `-tls=true`), which takes no separate
    /// value; the others take the next argument (`-user NAME`, `-user=NAME`).
    pub boolean: bool,
}

/// What jsserver does with a setting of [`UNSUPPORTED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// The setting is for access control, encryption, replication or
    /// resource limits: giving it stops the server at start-up rather than
    /// running without it (fail closed).
    Refused(Purpose),
    /// Running without the setting is harmless: it is accepted, has no
    /// effect, and gives a warning saying so. The text says what the server
    /// does instead.
    Ignored(&'static str),
}

/// A setting that nats-server accepts (a config key, maybe flags) and
/// jsserver does not act on. See [`UNSUPPORTED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported {
    /// The config keys of the setting, lowercase, with nats-server's
    /// aliases (keys match case-insensitively, as in nats-server).
    pub keys: &'static [&'static str],
    /// Where the keys sit in the config file.
    pub section: Section,
    /// Refused or ignored, and why.
    pub treatment: Treatment,
    /// What the setting does, for the fatal message or the warning.
    pub what: &'static str,
    /// The command-line flags of the same setting (refused ones only).
    pub flags: &'static [RefusedFlag],
}

impl Unsupported {
    /// The purpose of a refused setting; `None` for an ignored one.
    pub fn purpose(&self) -> Option<Purpose> {
        match self.treatment {
            Treatment::Refused(p) => Some(p),
            Treatment::Ignored(_) => None,
        }
    }
}

const fn bool_flag(name: &'static str) -> RefusedFlag {
    RefusedFlag {
        name,
        boolean: true,
    }
}

const fn ignored(
    keys: &'static [&'static str],
    section: Section,
    what: &'static str,
    instead: &'static str,
) -> Unsupported {
    Unsupported {
        keys,
        section,
        treatment: Treatment::Ignored(instead),
        what,
        flags: &[],
    }
}

/// Every setting nats-server accepts and jsserver does not act on: config
/// keys of nats-server's `processConfigFileLine`, `parseJetStream`,
/// `parseCluster` (and of the blocks it reads with `parseAuthorization`,
/// `parseAccounts`, `parseTLS`, `parseWebsocket`) in `server/opts.go`, and
/// flags of its `ConfigureOptions`. Each is either
///
/// * [`Treatment::Refused`]: for access control, encryption, replication or
///   resource limits. Starting open (no authentication, no TLS, no replicas,
///   no limits) while the config asks for them would be worse than not
///   starting, so [`ServerOptions::load`] (and `-t`) refuses them with
///   [`OptionsError::Refused`], naming the key's file and line or the flag;
/// * [`Treatment::Ignored`]: harmless to run without; accepted with a
///   warning.
///
/// Any other key is an error (`unknown field "..."`, as nats-server), so a
/// misspelt block (`authorisation`, `tsl`) never starts a server open.
///
/// THIS IS THE ONE LIST. The work that implements one of these settings
/// takes its entry off this list in the same commit as the code and tests
/// that act on it, and updates `docs/security.md`. Unit tests fail if the
/// parser handles a listed key, or if a key nats-server accepts at the top
/// level, in `jetstream { }` or in `cluster { }` is neither handled nor
/// listed.
pub const UNSUPPORTED: &[Unsupported] = &[
    // Access control.
    Unsupported {
        keys: &["auth_callout", "auth_hook"],
        section: Section::Authorization,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "an external service deciding logins (auth callout)",
        flags: &[],
    },
    Unsupported {
        keys: &["nkey"],
        section: Section::Account,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "an account's own public nkey",
        flags: &[],
    },
    Unsupported {
        keys: &["mappings", "maps"],
        section: Section::Account,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "an account's subject mappings",
        flags: &[],
    },
    Unsupported {
        keys: &["msg_trace", "trace_dest"],
        section: Section::Account,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "an account's message tracing destination",
        flags: &[],
    },
    Unsupported {
        keys: &[
            "operator",
            "operators",
            "roots",
            "root",
            "root_operators",
            "root_operator",
        ],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "trusted operators for JWT authentication",
        flags: &[],
    },
    Unsupported {
        keys: &["trusted", "trusted_keys"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "trusted operator keys for JWT authentication",
        flags: &[],
    },
    Unsupported {
        keys: &["resolver", "account_resolver", "accounts_resolver"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "the account resolver for JWT authentication",
        flags: &[],
    },
    Unsupported {
        keys: &["resolver_preload"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "account JWTs preloaded into the resolver",
        flags: &[],
    },
    Unsupported {
        keys: &["resolver_pinned_accounts"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "the only accounts the resolver may load",
        flags: &[],
    },
    Unsupported {
        keys: &["default_sentinel"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "the sentinel user JWT for clients without credentials",
        flags: &[],
    },
    Unsupported {
        keys: &["proxies"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "the keys of trusted proxies",
        flags: &[],
    },
    Unsupported {
        keys: &["mqtt"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "an MQTT listener with its own authorization, users and TLS",
        flags: &[],
    },
    // Encryption.
    Unsupported {
        keys: &[
            "insecure",
            "cipher_suites",
            "curve_preferences",
            "allow_insecure_cipher_suites",
            "min_version",
        ],
        section: Section::Tls,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "a choice of TLS versions, cipher suites or curves",
        flags: &[],
    },
    Unsupported {
        keys: &[
            "pinned_certs",
            "verify_cert_and_check_known_urls",
            "ocsp_peer",
        ],
        section: Section::Tls,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "extra checks of client certificates (pinning, known URLs, OCSP)",
        flags: &[],
    },
    Unsupported {
        keys: &[
            "certs",
            "certificates",
            "cert_store",
            "cert_match_by",
            "cert_match",
            "ca_certs_match",
            "cert_match_skip_invalid",
        ],
        section: Section::Tls,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "server certificates from a list or an OS certificate store",
        flags: &[],
    },
    Unsupported {
        keys: &["connection_rate_limit"],
        section: Section::Tls,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "a limit on new TLS connections per second",
        flags: &[],
    },
    Unsupported {
        keys: &["ocsp"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "OCSP stapling of the TLS certificate",
        flags: &[],
    },
    Unsupported {
        keys: &["ocsp_cache"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "the OCSP response cache for TLS peers",
        flags: &[],
    },
    Unsupported {
        keys: &["resolver_tls"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "TLS to the account resolver",
        flags: &[],
    },
    Unsupported {
        keys: &["authorization", "authentication", "no_auth_user"],
        section: Section::Websocket,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "WebSocket clients' own users, token or no_auth_user instead of the server's",
        flags: &[],
    },
    Unsupported {
        keys: &["jwt_cookie", "user_cookie", "pass_cookie", "token_cookie"],
        section: Section::Websocket,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "credentials of WebSocket clients taken from HTTP cookies",
        flags: &[],
    },
    Unsupported {
        keys: &["advertise"],
        section: Section::Websocket,
        treatment: Treatment::Refused(Purpose::Replication),
        what: "the WebSocket address advertised to a cluster's clients",
        flags: &[],
    },
    Unsupported {
        keys: &["key", "ek", "encryption_key"],
        section: Section::JetStream,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "the key for encryption at rest of the JetStream store",
        flags: &[],
    },
    Unsupported {
        keys: &["prev_key", "prev_ek", "prev_encryption_key"],
        section: Section::JetStream,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "the previous key for encryption at rest of the JetStream store",
        flags: &[],
    },
    Unsupported {
        keys: &["cipher"],
        section: Section::JetStream,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "the cipher for encryption at rest of the JetStream store",
        flags: &[],
    },
    Unsupported {
        keys: &["tpm"],
        section: Section::JetStream,
        treatment: Treatment::Refused(Purpose::Encryption),
        what: "a TPM-held key for encryption at rest of the JetStream store",
        flags: &[],
    },
    Unsupported {
        keys: &["permissions"],
        section: Section::Cluster,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "the subjects routes may import and export",
        flags: &[],
    },
    Unsupported {
        keys: &["no_advertise"],
        section: Section::Cluster,
        treatment: Treatment::Refused(Purpose::Replication),
        what: "not telling clients the other servers' addresses",
        flags: &[bool_flag("no_advertise")],
    },
    Unsupported {
        keys: &["pool_size", "accounts"],
        section: Section::Cluster,
        treatment: Treatment::Refused(Purpose::Replication),
        what: "pools of route connections and routes dedicated to accounts",
        flags: &[],
    },
    Unsupported {
        keys: &["compression"],
        section: Section::Cluster,
        treatment: Treatment::Refused(Purpose::Replication),
        what: "compression of route connections",
        flags: &[],
    },
    Unsupported {
        keys: &["gateway"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::Replication),
        what: "gateways between clusters (superclusters)",
        flags: &[],
    },
    Unsupported {
        keys: &["leafnodes", "leaf"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::Replication),
        what: "leaf node connections to and from other servers",
        flags: &[],
    },
    Unsupported {
        keys: &["mappings", "maps"],
        section: Section::Top,
        treatment: Treatment::Refused(Purpose::AccessControl),
        what: "subject mappings of the global account (where messages go)",
        flags: &[],
    },
    Unsupported {
        keys: &["limits"],
        section: Section::JetStream,
        treatment: Treatment::Refused(Purpose::ResourceLimits),
        what: "server-wide limits on what streams and consumers may ask for",
        flags: &[],
    },
    // Ignored: harmless to run without.
    ignored(
        &["client_advertise"],
        Section::Top,
        "the client address advertised to a cluster's clients",
        "clients learn the addresses the servers listen on",
    ),
    ignored(
        &["trace_headers"],
        Section::Top,
        "tracing of message headers",
        "tracing is as `trace` sets it",
    ),
    ignored(
        &["disable_sublist_cache", "no_sublist_cache"],
        Section::Top,
        "turning off nats-server's subject match cache",
        "there is no such cache to turn off",
    ),
    ignored(
        &["http_base_path"],
        Section::Top,
        "a path prefix for the monitoring endpoints",
        "they are served at the root (`/varz`)",
    ),
    ignored(
        &["logfile_size_limit", "log_size_limit"],
        Section::Top,
        "rotating the log file at a size",
        "the log file is not rotated (SIGUSR1 reopens it)",
    ),
    ignored(
        &["logfile_max_num", "log_max_num"],
        Section::Top,
        "how many rotated log files are kept",
        "no log file is rotated or removed",
    ),
    ignored(
        &["syslog", "remote_syslog"],
        Section::Top,
        "logging to syslog",
        "log lines go to stderr or the log file",
    ),
    ignored(
        &["prof_port", "prof_block_rate"],
        Section::Top,
        "the Go profiling port",
        "no profiling port is opened",
    ),
    ignored(
        &["proxy_protocol"],
        Section::Top,
        "PROXY protocol headers from a load balancer",
        "a connection starting with one is closed as a protocol error",
    ),
    ignored(
        &["max_traced_msg_len"],
        Section::Top,
        "how much of a message trace lines show",
        "trace lines are as without it",
    ),
    ignored(
        &["write_timeout"],
        Section::Top,
        "what to do with a client past `write_deadline`",
        "it is closed (nats-server's default)",
    ),
    ignored(
        &["no_system_account", "no_system", "no_sys_acc"],
        Section::Top,
        "running without a system account",
        "there is a system account only when `system_account` names one",
    ),
    ignored(
        &["no_header_support"],
        Section::Top,
        "turning off message headers",
        "headers stay supported",
    ),
    ignored(
        &["connect_error_reports", "reconnect_error_reports"],
        Section::Top,
        "how often failed connects to other servers are logged",
        "each failure is logged",
    ),
    ignored(
        &["server_metadata"],
        Section::Top,
        "metadata shown by the monitoring endpoints",
        "none is shown",
    ),
    ignored(
        &["feature_flags"],
        Section::Top,
        "nats-server's opt-in features",
        "jsserver's behaviour does not change",
    ),
    ignored(
        &["default_js_domain"],
        Section::Top,
        "JetStream domains of accounts",
        "there are no domains (leaf nodes are refused)",
    ),
    ignored(
        &["no_fast_producer_stall"],
        Section::Top,
        "not holding back publishers to slow consumers",
        "publishers are held back, as by default",
    ),
    ignored(
        &["max_closed_clients"],
        Section::Top,
        "how many closed connections /connz remembers",
        "/connz shows open connections only",
    ),
    ignored(
        &["strict"],
        Section::JetStream,
        "the JetStream API's strict checking of requests",
        "requests are checked as always",
    ),
    ignored(
        &["domain"],
        Section::JetStream,
        "the server's JetStream domain",
        "there are no domains (leaf nodes are refused)",
    ),
    ignored(
        &["extension_hint"],
        Section::JetStream,
        "a hint for nats-server extensions",
        "nothing reads it",
    ),
    // Refused, not ignored: without it the replicas of a stream could all land in one
    // failure domain (one zone, one rack) the operator meant to spread them over.
    Unsupported {
        keys: &["unique_tag"],
        section: Section::JetStream,
        treatment: Treatment::Refused(Purpose::Replication),
        what: "placing a stream's replicas on servers with different values of a tag",
        flags: &[],
    },
    ignored(
        &[
            "max_outstanding_catchup",
            "max_buffered_size",
            "max_buffered_msgs",
            "info_queue_limit",
            "meta_compact",
            "meta_compact_size",
            "meta_compact_sync",
            "max_concurrent_io",
        ],
        Section::JetStream,
        "tuning of nats-server's JetStream internals",
        "jsserver's own sizes apply",
    ),
    ignored(
        &["connect_backoff"],
        Section::Cluster,
        "a growing delay between route connect attempts",
        "routes are dialed again after about a second",
    ),
    ignored(
        &["ping_interval", "ping_max"],
        Section::Cluster,
        "route keepalive",
        "routes use the top-level `ping_interval` and `ping_max`",
    ),
    ignored(
        &["write_deadline", "write_timeout"],
        Section::Cluster,
        "the write deadline of route connections",
        "routes use the top-level `write_deadline`",
    ),
];

/// The [`UNSUPPORTED`] entry for config key `key` (any case) in `section`.
pub fn unsupported_key(section: Section, key: &str) -> Option<&'static Unsupported> {
    UNSUPPORTED
        .iter()
        .find(|r| r.section == section && r.keys.iter().any(|k| k.eq_ignore_ascii_case(key)))
}

/// The refused [`UNSUPPORTED`] entry for config key `key` (any case) in `section`.
pub fn refused_key(section: Section, key: &str) -> Option<&'static Unsupported> {
    unsupported_key(section, key).filter(|r| r.purpose().is_some())
}

/// The [`UNSUPPORTED`] entry with the flag `name` (without dashes), and the flag.
pub fn refused_flag(name: &str) -> Option<(&'static Unsupported, RefusedFlag)> {
    UNSUPPORTED
        .iter()
        .find_map(|r| r.flags.iter().find(|f| f.name == name).map(|f| (r, *f)))
}

/// What a block's parser does with a key it does not handle: nothing, with a
/// warning, if [`UNSUPPORTED`] says it is ignored; an error if it is refused
/// (normally reported earlier, by [`refusals_in`]) or unknown (`unknown field
/// "..."`, as nats-server). A key used only as a `$VARIABLE` is accepted
/// quietly, as by nats-server.
pub(crate) fn not_handled(
    section: Section,
    key: &str,
    item: &Item,
    warnings: &mut Vec<String>,
) -> Result<(), ConfError> {
    if item.used_as_variable {
        return Ok(());
    }
    let Some(setting) = unsupported_key(section, key) else {
        return Err(conf::unknown_field(key, item).unwrap_or_else(|| ConfError::at(item, "")));
    };
    let shown = format!("{}{key}", section.prefix());
    match setting.treatment {
        Treatment::Refused(purpose) => Err(ConfError::at(
            item,
            format!("{shown:?} {}", refused_tail(purpose, setting.what)),
        )),
        Treatment::Ignored(instead) => {
            warnings.push(
                ConfError::at(
                    item,
                    format!(
                        "{shown:?} ({}) is not supported and is ignored: {instead}",
                        setting.what
                    ),
                )
                .to_string(),
            );
            Ok(())
        }
    }
}

/// `is not supported yet (PURPOSE: WHAT); refusing to start without it (see
/// docs/security.md)`, after the key or flag.
fn refused_tail(purpose: Purpose, what: &str) -> String {
    format!(
        "is not supported yet ({purpose}: {what}); refusing to start without it \
         (see docs/security.md)"
    )
}

/// One refused setting found in the config file or on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A refused config key.
    Config {
        /// Its [`UNSUPPORTED`] entry.
        setting: &'static Unsupported,
        /// The key as written, with its block: `tls`, `jetstream.cipher`.
        key: String,
        /// The file the key is in (the config file or an include).
        file: String,
        /// The key's 1-based line.
        line: usize,
        /// The key's 1-based column (see [`Item::column`]).
        column: usize,
    },
    /// A refused command-line flag.
    Flag {
        /// Its [`UNSUPPORTED`] entry.
        setting: &'static Unsupported,
        /// The flag, as `--name`.
        flag: String,
    },
}

impl Refusal {
    /// The setting's [`UNSUPPORTED`] entry (a refused one).
    pub fn setting(&self) -> &'static Unsupported {
        match self {
            Refusal::Config { setting, .. } | Refusal::Flag { setting, .. } => setting,
        }
    }
}

impl std::fmt::Display for Refusal {
    /// `FILE:LINE:COLUMN: "KEY" is not supported yet (PURPOSE: WHAT);
    /// refusing to start without it (see docs/security.md)`, or the same
    /// with `flag --NAME` for a flag.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.setting();
        let purpose = r.purpose().unwrap_or(Purpose::AccessControl);
        match self {
            Refusal::Config {
                key,
                file,
                line,
                column,
                ..
            } => {
                let err = ConfError {
                    file: file.clone(),
                    line: Some(*line),
                    column: Some(*column),
                    message: format!("{key:?} {}", refused_tail(purpose, r.what)),
                };
                write!(f, "{err}")
            }
            Refusal::Flag { flag, .. } => {
                write!(f, "flag {flag} {}", refused_tail(purpose, r.what))
            }
        }
    }
}

/// The refused settings given at start-up, with where the log would have
/// gone (so that the fatal lines reach the harness's log file too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusals {
    /// Flags first (in command-line order), then config keys (in file order).
    pub refusals: Vec<Refusal>,
    /// The log file named by `-l` or the config file, if any.
    pub log_file: Option<PathBuf>,
    /// Whether log lines carry a timestamp (`-T`, `logtime`).
    pub logtime: bool,
}

impl std::fmt::Display for Refusals {
    /// One refusal per line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, r) in self.refusals.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// The refused keys of a parsed config file (see [`UNSUPPORTED`]), in any
/// case: top-level keys, and keys of the blocks with refused keys.
pub fn refusals_in(map: &Map) -> Vec<Refusal> {
    let mut found = Vec::new();
    let refusal = |setting, key: String, item: &Item| Refusal::Config {
        setting,
        key,
        file: item.origin.to_string(),
        line: item.line,
        column: item.column,
    };
    for (key, item) in map.iter() {
        if let Some(setting) = refused_key(Section::Top, key) {
            found.push(refusal(setting, key.to_string(), item));
        }
        if key.eq_ignore_ascii_case("accounts") {
            if let Value::Map(accounts) = &item.value {
                for (name, account) in accounts.iter() {
                    let Value::Map(block) = &account.value else {
                        continue;
                    };
                    for (inner, v) in block.iter() {
                        if let Some(setting) = refused_key(Section::Account, inner) {
                            found.push(refusal(setting, format!("{key}.{name}.{inner}"), v));
                        }
                    }
                }
            }
            continue;
        }
        if key.eq_ignore_ascii_case("websocket") || key.eq_ignore_ascii_case("ws") {
            if let Value::Map(block) = &item.value {
                for (inner, v) in block.iter() {
                    if let Some(setting) = refused_key(Section::Websocket, inner) {
                        found.push(refusal(setting, format!("{key}.{inner}"), v));
                    }
                    if !inner.eq_ignore_ascii_case("tls") {
                        continue;
                    }
                    for (tls_key, t) in v.as_map().into_iter().flat_map(|m| m.iter()) {
                        if let Some(setting) = refused_key(Section::Tls, tls_key) {
                            found.push(refusal(setting, format!("{key}.{inner}.{tls_key}"), t));
                        }
                    }
                }
            }
            continue;
        }
        let section = if key.eq_ignore_ascii_case("jetstream") {
            Section::JetStream
        } else if key.eq_ignore_ascii_case("cluster") {
            Section::Cluster
        } else if key.eq_ignore_ascii_case("authorization") {
            Section::Authorization
        } else if key.eq_ignore_ascii_case("tls") {
            Section::Tls
        } else {
            continue;
        };
        if let Value::Map(block) = &item.value {
            for (inner, v) in block.iter() {
                if let Some(setting) = refused_key(section, inner) {
                    found.push(refusal(setting, format!("{key}.{inner}"), v));
                }
            }
        }
    }
    found
}

/// Where the log goes and whether its lines carry a time, as far as `cli` and the config file
/// `map` (parsed, or `None`; parsed here from `cli.config` when `None` and it parses) say,
/// whatever else in them is wrong: for the `[FTL]` line of a config that cannot be used. The
/// top-level `log_file` (`logfile`) and `logtime` keys are read on their own, so an error
/// elsewhere in the file does not hide them; flags win, as always.
pub fn log_target(cli: &Cli, map: Option<&Map>) -> (Option<PathBuf>, bool) {
    let parsed;
    let map = match (map, &cli.config) {
        (Some(map), _) => Some(map),
        (None, Some(path)) => {
            parsed = conf::parse_file(path).ok();
            parsed.as_ref()
        }
        (None, None) => None,
    };
    let mut log_file = None;
    let mut logtime = true;
    for (key, item) in map.iter().flat_map(|m| m.iter()) {
        let key = key.to_ascii_lowercase();
        match key.as_str() {
            "log_file" | "logfile" => log_file = item.as_str().map(PathBuf::from),
            "logtime" => logtime = item.as_bool().unwrap_or(logtime),
            _ => {}
        }
    }
    (
        cli.log_file.clone().or(log_file),
        cli.logtime.unwrap_or(logtime),
    )
}

impl ServerOptions {
    /// Loads the options: defaults, overridden by the config file named by
    /// `cli.config` (if any), overridden by the other flags in `cli`.
    ///
    /// Returns the options and warnings for the caller to log (ignored keys
    /// of [`UNSUPPORTED`], deprecated forms, a large `max_payload`).
    ///
    /// Errors: a refused setting of [`UNSUPPORTED`] is given as a flag or
    /// config key ([`OptionsError::Refused`], checked first, once the file is
    /// parsed); the config file cannot be read or parsed, has unknown keys,
    /// or values of the wrong type or range (these name the file, line and
    /// column; [`OptionsError::Config`] lists them all), or the merged
    /// options are invalid (`max_payload` above [`MAX_PAYLOAD_LIMIT`] or
    /// above `max_pending`, a server name with spaces).
    pub fn load(cli: &Cli) -> Result<(ServerOptions, Vec<String>), OptionsError> {
        let mut opts = ServerOptions::default();
        let mut warnings = Vec::new();
        let mut http_host_set = false;
        let mut refusals: Vec<Refusal> = cli
            .refused
            .iter()
            .filter_map(|name| {
                refused_flag(name).map(|(setting, _)| Refusal::Flag {
                    setting,
                    flag: format!("--{name}"),
                })
            })
            .collect();
        let map = match &cli.config {
            Some(path) => Some(conf::parse_file(path)?),
            None => None,
        };
        if let Some(map) = &map {
            refusals.extend(refusals_in(map));
        }
        if !refusals.is_empty() {
            let (log_file, logtime) = log_target(cli, map.as_ref());
            return Err(OptionsError::Refused(Refusals {
                refusals,
                log_file,
                logtime,
            }));
        }
        let auth_timeout_given = map.as_ref().is_some_and(|m| {
            m.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case("authorization")
                    && v.as_map()
                        .is_some_and(|b| b.iter().any(|(k, _)| k.eq_ignore_ascii_case("timeout")))
            })
        });
        if let (Some(path), Some(map)) = (&cli.config, map) {
            if map.is_empty() {
                warnings.push(format!(
                    "config file {}: config has no values or is empty",
                    path.display()
                ));
            }
            http_host_set = opts.apply_config(&map, &mut warnings)?;
            opts.config_file = Some(path.clone());
        }
        opts.apply_flags(cli)?;
        if !http_host_set {
            opts.http_host = opts.host.clone();
        }
        opts.validate(&mut warnings)?;
        opts.load_tls(auth_timeout_given)?;
        Ok((opts, warnings))
    }

    /// Where JetStream keeps its files: `<store_dir>/jetstream`, as
    /// nats-server.
    pub fn jetstream_dir(&self) -> PathBuf {
        self.store_dir.join("jetstream")
    }

    /// Applies the keys of a parsed config file (as nats-server's
    /// `processConfigFileLine`; keys are case-insensitive). Returns whether
    /// the monitoring host was set (`http: host:port`).
    ///
    /// Errors: every key with an error, in file order (as nats-server lists
    /// them): a key of no block (`unknown field "..."`), a value of the wrong
    /// type or range. A key of [`UNSUPPORTED`] is ignored with a warning or
    /// refused; [`ServerOptions::load`] checks [`refusals_in`] first, so
    /// that refusals are reported as such.
    pub fn apply_config(
        &mut self,
        map: &Map,
        warnings: &mut Vec<String>,
    ) -> Result<bool, ConfErrors> {
        let mut seen = Seen::default();
        let mut errors = Vec::new();
        for (key, item) in map.iter() {
            if let Err(e) = self.apply_key(key, item, &mut seen, warnings) {
                errors.extend(e.0);
            }
        }
        if errors.is_empty() {
            Ok(seen.http_host)
        } else {
            Err(ConfErrors(errors))
        }
    }

    /// Applies one top-level key of the config file (see [`Self::apply_config`]).
    fn apply_key(
        &mut self,
        key: &str,
        item: &Item,
        seen: &mut Seen,
        warnings: &mut Vec<String>,
    ) -> Result<(), ConfErrors> {
        let lower = key.to_ascii_lowercase();
        let k = lower.as_str();
        match k {
            "listen" => {
                let (host, n) = parse_listen(k, item)?;
                if let Some(h) = host {
                    self.host = h;
                }
                self.port = port_from(n, DEFAULT_PORT)
                    .ok_or_else(|| ConfError::at(item, format!("{k}: invalid port {n}")))?;
            }
            "port" => {
                let n = expect_int(k, item)?;
                self.port = port_from(n, DEFAULT_PORT)
                    .ok_or_else(|| ConfError::at(item, format!("port: invalid port {n}")))?;
            }
            "host" | "net" => self.host = expect_str(k, item)?.to_string(),
            "server_name" => {
                let name = expect_str(k, item)?;
                if name.contains(' ') {
                    return Err(ConfError::at(item, "server name cannot contain spaces").into());
                }
                self.server_name = Some(name.to_string());
            }
            "server_tags" => self.server_tags = parse_tags(k, item)?,
            // The monitoring ports: `http`/`https` as `host:port` or a port, `*_port` a port.
            "http" | "https" | "http_port" | "monitor_port" | "https_port" => {
                let n = if k == "http" || k == "https" {
                    let (host, n) = parse_listen(k, item)?;
                    if let Some(h) = host {
                        self.http_host = h;
                        seen.http_host = true;
                    }
                    n
                } else {
                    expect_int(k, item)?
                };
                let port = http_port_from(n)
                    .ok_or_else(|| ConfError::at(item, format!("{k}: invalid port {n}")))?;
                if k.starts_with("https") {
                    self.https_port = port;
                } else {
                    self.http_port = port;
                }
            }
            "max_payload" => {
                let n = expect_bytes(k, item, DEFAULT_MAX_PAYLOAD)?;
                if n > MAX_PAYLOAD_LIMIT {
                    return Err(ConfError::at(
                        item,
                        format!(
                            "max_payload ({n}) cannot be higher than {MAX_PAYLOAD_LIMIT} (64 MiB)"
                        ),
                    )
                    .into());
                }
                self.max_payload = n;
            }
            "max_control_line" => {
                let n = expect_bytes(k, item, DEFAULT_MAX_CONTROL_LINE)?;
                if n > i32::MAX as usize {
                    return Err(ConfError::at(item, "max_control_line value is too big").into());
                }
                self.max_control_line = n;
            }
            "max_pending" => self.max_pending = expect_bytes(k, item, DEFAULT_MAX_PENDING)?,
            "max_connections" | "max_conn" => {
                let n = expect_int(k, item)?;
                self.max_connections = if n <= 0 {
                    DEFAULT_MAX_CONNECTIONS
                } else {
                    n as usize
                };
            }
            "ping_interval" => {
                self.ping_interval = expect_duration(k, item, DEFAULT_PING_INTERVAL, warnings)?;
            }
            "ping_max" => {
                let n = expect_int(k, item)?;
                self.ping_max = match n {
                    0 => DEFAULT_PING_MAX,
                    n => u32::try_from(n)
                        .map_err(|_| ConfError::at(item, format!("ping_max: invalid value {n}")))?,
                };
            }
            "write_deadline" => {
                self.write_deadline = expect_duration(k, item, DEFAULT_WRITE_DEADLINE, warnings)?;
            }
            "jetstream" => self.apply_jetstream(item, &mut seen.store_dir, warnings)?,
            "store_dir" | "storedir" => {
                if seen.store_dir {
                    return Err(ConfError::at(item, "duplicate 'store_dir' configuration").into());
                }
                seen.store_dir = true;
                self.store_dir = PathBuf::from(expect_str(k, item)?);
            }
            "debug" => self.debug = expect_bool(k, item)?,
            "trace" | "trace_verbose" => self.trace = expect_bool(k, item)?,
            "logtime" => self.logtime = expect_bool(k, item)?,
            // Log times are always UTC here; accept the key quietly.
            "logtime_utc" => {
                expect_bool(k, item)?;
            }
            "log_file" | "logfile" => self.log_file = Some(expect_str(k, item)?.into()),
            "pid_file" | "pidfile" => self.pid_file = Some(expect_str(k, item)?.into()),
            "ports_file_dir" => self.ports_file_dir = Some(expect_str(k, item)?.into()),
            "lame_duck_duration" => {
                let d = expect_duration(k, item, Duration::ZERO, warnings)?;
                if d < MIN_LAME_DUCK_DURATION {
                    return Err(ConfError::at(
                        item,
                        format!(
                            "invalid lame_duck_duration of {}, minimum is 30 seconds",
                            jsproto::duration::format_go_duration(d)
                        ),
                    )
                    .into());
                }
                self.lame_duck_duration = d;
            }
            "lame_duck_grace_period" => {
                let d = expect_duration(k, item, Duration::ZERO, warnings)?;
                self.lame_duck_grace_period = if d.is_zero() {
                    DEFAULT_LAME_DUCK_GRACE_PERIOD
                } else {
                    d
                };
            }
            "authorization" => {
                let block = auth_config::parse_authorization(item, warnings)?;
                self.auth.user = block.user;
                self.auth.password = block.password;
                self.auth.token = block.token;
                self.auth.users = block.users;
                self.auth.nkeys = block.nkeys;
                self.auth.proxy_required = block.proxy_required;
                if let Some(t) = block.timeout {
                    self.auth.timeout = t;
                }
            }
            "no_auth_user" => self.auth.no_auth_user = expect_str(k, item)?.to_string(),
            "accounts" => {
                self.auth.accounts = crate::auth::accounts::parse_accounts(item)?;
                // nats-server warns for any user's, accounts' users included.
                let plain = self.auth.accounts.iter().flat_map(|a| &a.users).any(|u| {
                    let p = u.password.expose();
                    !p.is_empty() && !crate::auth::is_bcrypt(p)
                });
                let warning = "Plaintext passwords detected, use nkeys or bcrypt";
                if plain && !warnings.iter().any(|w| w == warning) {
                    warnings.push(warning.into());
                }
            }
            "system_account" | "system" => {
                self.auth.system_account = expect_str(k, item)?.to_string();
            }
            "tls" => {
                let tls = self.tls.get_or_insert_with(TlsOptions::default);
                crate::tls::config::parse_tls(item, tls)?;
            }
            "allow_non_tls" => self.allow_non_tls = expect_bool(k, item)?,
            "websocket" | "ws" => {
                self.websocket = crate::websocket::parse_websocket(item, warnings)?;
            }
            "cluster" => {
                self.cluster = crate::cluster::config::parse_cluster(item, warnings)?;
            }
            "max_subscriptions" | "max_subs" => {
                let n = expect_int(k, item)?;
                self.max_subscriptions = usize::try_from(n).unwrap_or(0);
            }
            "max_sub_tokens" | "max_subscription_tokens" => {
                let n = expect_int(k, item)?;
                // nats-server's words, with the key as written.
                self.max_sub_tokens = match n {
                    n if n > i64::from(u8::MAX) => {
                        return Err(ConfError::at(item, format!("{key} value is too big")).into())
                    }
                    n if n <= 0 => {
                        return Err(
                            ConfError::at(item, format!("{key} value can not be negative")).into(),
                        )
                    }
                    n => n as u8,
                };
            }
            _ => not_handled(Section::Top, key, item, warnings)?,
        }
        Ok(())
    }

    /// `jetstream: enabled|disabled|true|false` or `jetstream { ... }`, as
    /// nats-server's `parseJetStream`.
    ///
    /// Errors: the first wrong value, or every key the block does not have.
    fn apply_jetstream(
        &mut self,
        item: &Item,
        store_dir_set: &mut bool,
        warnings: &mut Vec<String>,
    ) -> Result<(), ConfErrors> {
        match &item.value {
            Value::Bool(b) => self.jetstream = *b,
            Value::String(s) => {
                self.jetstream = match s.to_ascii_lowercase().as_str() {
                    "enabled" | "enable" => true,
                    "disabled" | "disable" => false,
                    _ => {
                        return Err(ConfError::at(
                            item,
                            format!("jetstream: expected 'enabled' or 'disabled', got {s:?}"),
                        )
                        .into())
                    }
                }
            }
            Value::Map(m) => {
                let mut enable = true;
                let mut unknown = Vec::new();
                for (key, v) in m.iter() {
                    let lower = key.to_ascii_lowercase();
                    let k = lower.as_str();
                    match k {
                        "store" | "store_dir" | "storedir" => {
                            if *store_dir_set {
                                return Err(ConfError::at(
                                    v,
                                    "duplicate 'store_dir' configuration",
                                )
                                .into());
                            }
                            *store_dir_set = true;
                            self.store_dir = PathBuf::from(expect_str(k, v)?);
                        }
                        "sync" | "sync_interval" => {
                            self.sync_interval = match v.as_str() {
                                Some(s) if s.eq_ignore_ascii_case("always") => SyncPolicy::Always,
                                _ => SyncPolicy::Interval(expect_duration(
                                    k,
                                    v,
                                    DEFAULT_SYNC_INTERVAL,
                                    warnings,
                                )?),
                            };
                        }
                        "max_memory_store" | "max_mem_store" | "max_mem" => {
                            self.max_memory_store = expect_storage_size(k, v)?;
                        }
                        "max_file_store" | "max_file" => {
                            self.max_file_store = expect_storage_size(k, v)?;
                        }
                        "request_queue_limit" => {
                            // As nats-server: 0 or less is the default.
                            let n = expect_int(k, v)?;
                            self.jetstream_request_queue_limit = usize::try_from(n)
                                .ok()
                                .filter(|&n| n > 0)
                                .unwrap_or(crate::jetstream::api_queue::MAX_REQUESTS);
                        }
                        "enable" | "enabled" => enable = expect_bool(k, v)?,
                        _ => {
                            if let Err(e) = not_handled(Section::JetStream, key, v, warnings) {
                                unknown.push(e);
                            }
                        }
                    }
                }
                if !unknown.is_empty() {
                    return Err(ConfErrors(unknown));
                }
                self.jetstream = enable;
            }
            other => {
                return Err(ConfError::at(
                    item,
                    format!(
                        "jetstream: expected a map, boolean or string, got {}",
                        other.type_name()
                    ),
                )
                .into())
            }
        }
        Ok(())
    }

    /// Applies the flags given on the command line (flags win).
    fn apply_flags(&mut self, cli: &Cli) -> Result<(), OptionsError> {
        if let Some(h) = &cli.addr {
            self.host = h.clone();
        }
        if let Some(p) = cli.port {
            self.port = port_from(i64::from(p), DEFAULT_PORT)
                .ok_or_else(|| OptionsError::Invalid(format!("invalid port {p}")))?;
        }
        if let Some(n) = &cli.server_name {
            self.server_name = Some(n.clone());
        }
        if let Some(p) = cli.http_port {
            self.http_port = http_port_from(i64::from(p))
                .ok_or_else(|| OptionsError::Invalid(format!("invalid monitoring port {p}")))?;
        }
        if let Some(p) = cli.https_port {
            self.https_port = http_port_from(i64::from(p)).ok_or_else(|| {
                OptionsError::Invalid(format!("invalid HTTPS monitoring port {p}"))
            })?;
        }
        if let Some(js) = cli.jetstream {
            self.jetstream = js;
        }
        if let Some(d) = &cli.store_dir {
            self.store_dir = d.clone();
        }
        if let Some(n) = cli.max_payload {
            self.max_payload = match n {
                0 => DEFAULT_MAX_PAYLOAD,
                n => usize::try_from(n)
                    .map_err(|_| OptionsError::Invalid(format!("invalid max_payload {n}")))?,
            };
        }
        if let Some(b) = cli.debug {
            self.debug = b;
        }
        if let Some(b) = cli.trace {
            self.trace = b;
        }
        if let Some(b) = cli.debug_and_trace {
            self.debug = b;
            self.trace = b;
        }
        if let Some(b) = cli.logtime {
            self.logtime = b;
        }
        if let Some(f) = &cli.log_file {
            self.log_file = Some(f.clone());
        }
        if let Some(f) = &cli.pid_file {
            self.pid_file = Some(f.clone());
        }
        if let Some(d) = &cli.ports_file_dir {
            self.ports_file_dir = Some(d.clone());
        }
        // As nats-server: an empty flag value leaves the config file's setting.
        if let Some(u) = cli.user.as_ref().filter(|u| !u.is_empty()) {
            self.auth.user = u.clone();
        }
        if let Some(p) = cli.pass.as_ref().filter(|p| !p.is_empty()) {
            self.auth.password = Secret::new(p.clone());
        }
        if let Some(t) = cli.auth.as_ref().filter(|t| !t.is_empty()) {
            self.auth.token = Secret::new(t.clone());
        }
        self.apply_cluster_flags(cli)?;
        self.apply_tls_flags(cli)
    }

    /// `--cluster`/`--cluster_listen`, `--routes`, `--cluster_name`, `--connect_retries`,
    /// `--cluster_advertise`, as
    /// nats-server's `ConfigureOptions`: they replace the `cluster` block's settings, and
    /// `--cluster` alone makes a cluster of a server whose config file has none.
    fn apply_cluster_flags(&mut self, cli: &Cli) -> Result<(), OptionsError> {
        use crate::cluster::config::{
            parse_cluster_listen, parse_route_url_with_credentials, ClusterOptions,
        };
        if let Some(url) = cli.cluster.as_ref().filter(|u| !u.is_empty()) {
            let (host, port, credentials) =
                parse_cluster_listen(url).map_err(OptionsError::Invalid)?;
            let c = self.cluster.get_or_insert_with(ClusterOptions::default);
            c.host = host;
            c.port = port;
            // `nats://user:pass@host:port`: the route authorization, as nats-server.
            if let Some(credentials) = credentials {
                c.authorization = Some(crate::cluster::config::RouteAuth {
                    credentials,
                    timeout: crate::cluster::config::DEFAULT_ROUTE_AUTH_TIMEOUT,
                });
            }
        }
        if let Some(routes) = cli.routes.as_ref().filter(|r| !r.trim().is_empty()) {
            let routes = routes
                .split(',')
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(parse_route_url_with_credentials)
                .collect::<Result<Vec<_>, _>>()
                .map_err(OptionsError::Invalid)?;
            let Some(c) = self.cluster.as_mut() else {
                return Err(OptionsError::Invalid(
                    "solicited routes require cluster capabilities, e.g. --cluster".into(),
                ));
            };
            c.routes.clear();
            c.route_credentials.clear();
            for (hp, credentials) in routes {
                if let Some(credentials) = credentials {
                    c.route_credentials.insert(hp.clone(), credentials);
                }
                c.routes.push(hp);
            }
        }
        if let Some(name) = cli.cluster_name.as_ref().filter(|n| !n.is_empty()) {
            if name.contains(' ') {
                return Err(OptionsError::Invalid(
                    "cluster name cannot contain spaces".into(),
                ));
            }
            if let Some(c) = self.cluster.as_mut() {
                c.name = Some(name.clone());
            }
        }
        if let Some(n) = cli.connect_retries {
            if let Some(c) = self.cluster.as_mut() {
                c.connect_retries = n;
            }
        }
        if let Some(adv) = cli.cluster_advertise.as_ref().filter(|a| !a.is_empty()) {
            crate::cluster::config::parse_advertise(adv).map_err(OptionsError::Invalid)?;
            if let Some(c) = self.cluster.as_mut() {
                c.advertise = Some(adv.trim().to_string());
            }
        }
        Ok(())
    }

    /// The `-tls*` flags, as nats-server's `overrideTLS`: `-tls=false` turns TLS off (and
    /// the other `-tls*` flags are then ignored); otherwise any of them replaces the
    /// certificate, key, CA and `verify` of the config file's block (keeping its `timeout`,
    /// `verify_and_map` and `handshake_first`), and needs `-tlscert` and `-tlskey`.
    fn apply_tls_flags(&mut self, cli: &Cli) -> Result<(), OptionsError> {
        if cli.tls == Some(false) {
            self.tls = None;
            return Ok(());
        }
        let given = cli.tls.is_some()
            || cli.tls_verify.is_some()
            || cli.tls_cert.is_some()
            || cli.tls_key.is_some()
            || cli.tls_ca_cert.is_some();
        if !given {
            return Ok(());
        }
        let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        let cert = nonempty(&cli.tls_cert).ok_or_else(|| {
            OptionsError::Invalid("TLS Server certificate must be present and valid".into())
        })?;
        let key = nonempty(&cli.tls_key).ok_or_else(|| {
            OptionsError::Invalid("TLS Server private key must be present and valid".into())
        })?;
        let tls = self.tls.get_or_insert_with(TlsOptions::default);
        tls.cert_file = cert;
        tls.key_file = key;
        tls.ca_file = nonempty(&cli.tls_ca_cert);
        tls.verify = cli.tls_verify.unwrap_or(false);
        Ok(())
    }

    /// Cross-field checks on the merged options (as nats-server's
    /// `validateOptions`, plus the 64 MiB payload limit).
    fn validate(&self, warnings: &mut Vec<String>) -> Result<(), OptionsError> {
        if self.max_payload > MAX_PAYLOAD_LIMIT {
            return Err(OptionsError::Invalid(format!(
                "max_payload ({}) cannot be higher than {MAX_PAYLOAD_LIMIT} (64 MiB)",
                self.max_payload
            )));
        }
        if self.max_payload > self.max_pending {
            return Err(OptionsError::Invalid(format!(
                "max_payload ({}) cannot be higher than max_pending ({})",
                self.max_payload, self.max_pending
            )));
        }
        if self.max_payload > MAX_PAYLOAD_WARN {
            warnings.push(
                "maximum payloads over 8 MiB are generally discouraged and could lead to poor performance"
                    .to_string(),
            );
        }
        if self.server_name.as_deref().is_some_and(|n| n.contains(' ')) {
            return Err(OptionsError::Invalid(
                "server name cannot contain spaces".into(),
            ));
        }
        if self.host.is_empty() {
            return Err(OptionsError::Invalid("the listen host is empty".into()));
        }
        if self.cluster.is_some() && self.jetstream && self.server_name.is_none() {
            // A clustered JetStream names its Raft members by server name: it must not
            // change across restarts (as nats-server requires).
            return Err(OptionsError::Invalid(
                "jetstream cluster requires `server_name` to be set".into(),
            ));
        }
        if self.lame_duck_grace_period >= self.lame_duck_duration {
            return Err(OptionsError::Invalid(format!(
                "lame duck grace period ({}) should be strictly lower than lame duck duration ({})",
                jsproto::duration::format_go_duration(self.lame_duck_grace_period),
                jsproto::duration::format_go_duration(self.lame_duck_duration),
            )));
        }
        self.auth.validate().map_err(OptionsError::Invalid)?;
        if let Some(ws) = &self.websocket {
            // nats-server's words (validateWebsocketOptions).
            if ws.tls.is_none() && !ws.no_tls {
                return Err(OptionsError::Invalid(
                    "websocket requires TLS configuration".into(),
                ));
            }
        }
        Ok(())
    }

    /// Loads the TLS files (errors in nats-server's words) and, unless the `authorization`
    /// block gives its own `timeout`, makes the auth timeout one second longer than the TLS
    /// handshake's, as nats-server's default.
    fn load_tls(&mut self, auth_timeout_given: bool) -> Result<(), OptionsError> {
        if let (Some(http), Some(https)) = (self.http_port, self.https_port) {
            // As given: -1 for "pick a free port".
            let given = |p: u16| if p == 0 { -1 } else { i32::from(p) };
            return Err(OptionsError::Invalid(format!(
                "can't specify both HTTP ({}) and HTTPs ({}) ports",
                given(http),
                given(https)
            )));
        }
        if let Some(tls) = self.websocket.as_mut().and_then(|ws| ws.tls.as_mut()) {
            tls.build()
                .map_err(|e| OptionsError::Invalid(format!("websocket: {e}")))?;
        }
        if let Some(tls) = self.cluster.as_mut().and_then(|c| c.tls.as_mut()) {
            tls.build_route()
                .map_err(|e| OptionsError::Invalid(format!("cluster: {e}")))?;
        }
        let Some(tls) = &mut self.tls else {
            if self.https_port.is_some() {
                return Err(OptionsError::Invalid(
                    "TLS cert and key required for HTTPS".into(),
                ));
            }
            return Ok(());
        };
        tls.allow_non_tls = self.allow_non_tls;
        tls.build().map_err(OptionsError::Invalid)?;
        if !auth_timeout_given {
            self.auth.timeout = tls.timeout + std::time::Duration::from_secs(1);
        }
        Ok(())
    }
}

/// `-t` (nats-server's "test configuration and exit"): loads the options as
/// [`ServerOptions::load`] does for a start (the config file named by `-c`
/// with the other flags; refused settings, unknown keys, values, TLS files),
/// and says what nats-server would: `Ok` with the lines to print (the
/// warnings, then `configuration file FILE is valid (sha256:...)`, see
/// [`conf::digest`]), or the error (without `-c`: `must specify [-c,
/// --config] option to check configuration file syntax`).
pub fn check_config(cli: &Cli) -> Result<Vec<String>, OptionsError> {
    let Some(path) = &cli.config else {
        return Err(OptionsError::Invalid(
            "must specify [-c, --config] option to check configuration file syntax".into(),
        ));
    };
    let (_, mut lines) = ServerOptions::load(cli)?;
    let digest = conf::digest(&conf::parse_file(path)?);
    lines.push(format!(
        "configuration file {} is valid ({digest})",
        path.display()
    ));
    Ok(lines)
}

/// Runs [`check_config`] for the binary: prints its lines, or the error, to
/// stderr after `jsserver: ` (as nats-server prints them after
/// `nats-server: `), and returns the exit status, 0 or 1.
pub fn run_check_config(cli: &Cli) -> i32 {
    match check_config(cli) {
        Ok(lines) => {
            for line in lines {
                eprintln!("jsserver: {line}");
            }
            0
        }
        Err(err) => {
            eprintln!("jsserver: {err}");
            1
        }
    }
}

/// Writes the current process id (decimal, no newline) to `path`, as
/// nats-server's `-P`.
pub fn write_pid_file(path: &Path) -> std::io::Result<()> {
    std::fs::write(path, std::process::id().to_string())
}

/// The ports file path nats-server uses: `<dir>/<exe>_<pid>.ports`, where
/// `<exe>` is the file name of `argv[0]` (e.g. `jsserver_1234.ports`).
pub fn ports_file_path(dir: &Path) -> PathBuf {
    let exe = std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "jsserver".to_string());
    dir.join(format!("{exe}_{}.ports", std::process::id()))
}

#[derive(serde::Serialize)]
struct Ports {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    nats: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    monitoring: Vec<String>,
}

/// A listener address as a URL host:port; an unspecified address
/// (`0.0.0.0`, `::`) is reported as loopback. (nats-server lists every
/// interface address instead.)
fn url(scheme: &str, addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("{scheme}://{}", SocketAddr::new(ip, addr.port()))
}

/// Writes the ports file into `dir` (at [`ports_file_path`]) once the
/// listeners are bound, as nats-server's `-ports_file_dir`:
/// `{"nats":["nats://127.0.0.1:4222"],"monitoring":["http://127.0.0.1:8222"]}`
/// (`monitoring` omitted without a monitoring listener). Returns the path.
pub fn write_ports_file(
    dir: &Path,
    client_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
) -> std::io::Result<PathBuf> {
    let ports = Ports {
        nats: vec![url("nats", client_addr)],
        monitoring: http_addr.map(|a| url("http", a)).into_iter().collect(),
    };
    let path = ports_file_path(dir);
    std::fs::write(&path, serde_json::to_vec(&ports)?)?;
    Ok(path)
}

/// Removes the ports file from `dir` (at shutdown, as nats-server).
pub fn remove_ports_file(dir: &Path) -> std::io::Result<()> {
    std::fs::remove_file(ports_file_path(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn temp_dir() -> PathBuf {
        static N: AtomicU32 = AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "jsserver-opts-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn cli(args: &[&str]) -> Cli {
        let mut v = vec!["jsserver"];
        v.extend_from_slice(args);
        crate::cli::parse_args(v).unwrap()
    }

    /// Loads `conf` (written to a temp file) with the extra `args`.
    fn load(conf: &str, args: &[&str]) -> Result<(ServerOptions, Vec<String>), OptionsError> {
        let dir = temp_dir();
        let path = dir.join("server.conf");
        std::fs::write(&path, conf).unwrap();
        let p = path.to_str().unwrap().to_string();
        let mut all = vec!["-c", p.as_str()];
        all.extend_from_slice(args);
        let r = ServerOptions::load(&cli(&all));
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    fn load_ok(conf: &str, args: &[&str]) -> (ServerOptions, Vec<String>) {
        load(conf, args).unwrap_or_else(|e| panic!("{conf:?}: {e}"))
    }

    #[test]
    fn defaults() {
        let (o, w) = ServerOptions::load(&Cli::default()).unwrap();
        assert!(w.is_empty(), "{w:?}");
        let d = ServerOptions::default();
        assert_eq!(
            o,
            ServerOptions {
                http_host: o.host.clone(),
                ..d
            }
        );
        assert_eq!(o.host, "127.0.0.1");
        assert_eq!(o.port, 4222);
        assert_eq!(o.http_port, None);
        assert_eq!(o.max_payload, 1 << 20);
        assert_eq!(o.max_control_line, 4096);
        assert_eq!(o.ping_interval, Duration::from_secs(120));
        assert_eq!(o.ping_max, 2);
        assert_eq!(o.write_deadline, Duration::from_secs(10));
        assert_eq!(o.max_pending, 64 << 20);
        assert!(
            !o.jetstream,
            "JetStream is off unless enabled, as nats-server"
        );
        assert!(
            o.store_dir.ends_with("jsserver"),
            "{}",
            o.store_dir.display()
        );
        assert_eq!(o.jetstream_dir(), o.store_dir.join("jetstream"));
        assert_eq!(
            o.sync_interval,
            SyncPolicy::Interval(Duration::from_secs(120))
        );
        assert!(!o.debug && !o.trace && o.logtime);
        assert_eq!(o.config_file, None);
    }

    #[test]
    fn jetstream_is_off_unless_enabled() {
        assert!(!ServerOptions::load(&Cli::default()).unwrap().0.jetstream);
        for args in [&["-js"][..], &["--jetstream"], &["-js=true"]] {
            assert!(
                ServerOptions::load(&cli(args)).unwrap().0.jetstream,
                "{args:?}"
            );
        }
        assert!(
            !ServerOptions::load(&cli(&["--js=false"]))
                .unwrap()
                .0
                .jetstream
        );
        for on in [
            "jetstream: enabled",
            "jetstream: true",
            "jetstream {}",
            "jetstream { store_dir: /x }",
        ] {
            assert!(load_ok(on, &[]).0.jetstream, "{on}");
        }
        // A store directory alone does not enable it (nats-server neither).
        for off in ["store_dir: /x", "port: 4333"] {
            assert!(!load_ok(off, &[]).0.jetstream, "{off}");
        }
        // A flag wins over the file either way.
        assert!(!load_ok("jetstream: enabled", &["--js=false"]).0.jetstream);
        assert!(load_ok("jetstream: disabled", &["-js"]).0.jetstream);
    }

    #[test]
    fn flags_only() {
        let (o, _) = ServerOptions::load(&cli(&[
            "-p",
            "-1",
            "-a",
            "0.0.0.0",
            "-m",
            "-1",
            "-sd",
            "/tmp/sd",
            "-DV",
            "-T=false",
            "-n",
            "srv",
            "-l",
            "/tmp/l.log",
            "-P",
            "/tmp/p.pid",
            "--ports_file_dir",
            "/tmp",
        ]))
        .unwrap();
        assert_eq!(o.port, 0);
        assert_eq!(o.host, "0.0.0.0");
        assert_eq!(o.http_host, "0.0.0.0");
        assert_eq!(o.http_port, Some(0));
        assert_eq!(o.store_dir, PathBuf::from("/tmp/sd"));
        assert!(o.debug && o.trace && !o.logtime);
        assert_eq!(o.server_name.as_deref(), Some("srv"));
        assert_eq!(o.log_file, Some(PathBuf::from("/tmp/l.log")));
        assert_eq!(o.pid_file, Some(PathBuf::from("/tmp/p.pid")));
        assert_eq!(o.ports_file_dir, Some(PathBuf::from("/tmp")));
        // -p 0 and -m 0 mean "default" and "no monitoring", as nats-server.
        let (o, _) = ServerOptions::load(&cli(&["-p", "0", "-m", "0"])).unwrap();
        assert_eq!((o.port, o.http_port), (4222, None));
        let (o, _) = ServerOptions::load(&cli(&["-m", "8222", "--js=false"])).unwrap();
        assert_eq!(o.http_port, Some(8222));
        assert!(!o.jetstream);
    }

    #[test]
    fn config_file_keys() {
        let conf = r#"
            # a typical test config
            listen: 127.0.0.2:4333
            server_name: "js-1"
            http: "127.0.0.3:8333"
            max_payload: 2MB
            max_control_line: 8KB
            ping_interval: "30s"
            ping_max: 5
            write_deadline: "2s"
            max_pending: 32MB
            jetstream {
                store_dir: "/var/tmp/js"
                max_memory_store: 1GB
                max_file_store: "10G"
                sync_interval: always
            }
            debug: true
            trace: false
            logtime: false
            log_file: "/tmp/js.log"
            pid_file: /tmp/js.pid
            ports_file_dir: /tmp
        "#;
        let (o, w) = load_ok(conf, &[]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.host, "127.0.0.2");
        assert_eq!(o.port, 4333);
        assert_eq!(o.server_name.as_deref(), Some("js-1"));
        assert_eq!(o.http_host, "127.0.0.3");
        assert_eq!(o.http_port, Some(8333));
        assert_eq!(o.max_payload, 2 << 20);
        assert_eq!(o.max_control_line, 8192);
        assert_eq!(o.ping_interval, Duration::from_secs(30));
        assert_eq!(o.ping_max, 5);
        assert_eq!(o.write_deadline, Duration::from_secs(2));
        assert_eq!(o.max_pending, 32 << 20);
        assert!(o.jetstream);
        assert_eq!(o.store_dir, PathBuf::from("/var/tmp/js"));
        assert_eq!(o.max_memory_store, Some(1 << 30));
        assert_eq!(o.max_file_store, Some(10 << 30));
        assert_eq!(o.sync_interval, SyncPolicy::Always);
        assert!(o.debug && !o.trace && !o.logtime);
        assert_eq!(o.log_file, Some(PathBuf::from("/tmp/js.log")));
        assert_eq!(o.pid_file, Some(PathBuf::from("/tmp/js.pid")));
        assert_eq!(o.ports_file_dir, Some(PathBuf::from("/tmp")));
        assert!(o.config_file.is_some());
    }

    #[test]
    fn key_variants() {
        let (o, _) = load_ok("host: 10.0.0.1\nport: 5000\nmonitor_port: 8000", &[]);
        assert_eq!(
            (o.host.as_str(), o.port, o.http_port),
            ("10.0.0.1", 5000, Some(8000))
        );
        assert_eq!(o.http_host, "10.0.0.1");
        let (o, _) = load_ok("net: localhost\nlisten: 4999\nhttp_port: -1", &[]);
        assert_eq!(
            (o.host.as_str(), o.port, o.http_port),
            ("localhost", 4999, Some(0))
        );
        let (o, _) = load_ok("listen: \"[::1]:-1\"\nhttp: 8222", &[]);
        assert_eq!(
            (o.host.as_str(), o.port, o.http_port),
            ("::1", 0, Some(8222))
        );
        let (o, _) = load_ok("listen: localhost:4223\nPORT: 4224", &[]);
        assert_eq!((o.host.as_str(), o.port), ("localhost", 4224));
        let (o, _) = load_ok("store_dir: /a\njetstream: enabled", &[]);
        assert_eq!(o.store_dir, PathBuf::from("/a"));
        assert!(o.jetstream);
        for off in [
            "jetstream: disabled",
            "jetstream: false",
            "jetstream: off",
            "jetstream { enabled: false }",
        ] {
            assert!(!load_ok(off, &[]).0.jetstream, "{off}");
        }
        let (o, _) = load_ok(
            "jetstream { sync: \"10s\", max_mem: -1, max_file: 512MB }",
            &[],
        );
        assert_eq!(
            o.sync_interval,
            SyncPolicy::Interval(Duration::from_secs(10))
        );
        assert_eq!(o.max_memory_store, None);
        assert_eq!(o.max_file_store, Some(512 << 20));
        let (o, _) = load_ok("trace_verbose: true\nlogfile: x.log\npidfile: x.pid", &[]);
        assert!(o.trace);
        assert_eq!(o.log_file, Some(PathBuf::from("x.log")));
        assert_eq!(o.pid_file, Some(PathBuf::from("x.pid")));
    }

    #[test]
    fn durations_in_config() {
        let (o, w) = load_ok("ping_interval: 120\nwrite_deadline: \"100ms\"", &[]);
        assert_eq!(o.ping_interval, Duration::from_secs(120));
        assert_eq!(o.write_deadline, Duration::from_millis(100));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("server.conf:1:1: ") && w[0].contains("should be converted"),
            "{w:?}"
        );
        // Unquoted tokens: `2m` is two minutes (not 2000000 s), `1h30m` a string.
        let (o, w) = load_ok("ping_interval: 2m\nwrite_deadline: 1h30m", &[]);
        assert_eq!(o.ping_interval, Duration::from_secs(120));
        assert_eq!(o.write_deadline, Duration::from_secs(5400));
        assert!(w.is_empty(), "{w:?}");
        let e = load("x: 1\nping_interval: \"soon\"", &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("server.conf:2:1: ping_interval: invalid duration"),
            "{e}"
        );
        let e = load("jetstream { sync_interval: sometimes }", &[]).unwrap_err();
        assert!(e.to_string().contains("invalid duration"), "{e}");
    }

    #[test]
    fn flags_beat_file_beats_defaults() {
        let conf = "port: 5000\nhost: 10.1.1.1\nserver_name: file\ndebug: true\nlogtime: false\n\
                    max_payload: 2MB\njetstream: disabled\nstore_dir: /from/file\nhttp_port: 8000";
        let (o, _) = load_ok(conf, &[]);
        assert_eq!(o.port, 5000);
        assert_eq!(o.host, "10.1.1.1");
        assert_eq!(o.server_name.as_deref(), Some("file"));
        assert!(o.debug && !o.logtime && !o.jetstream);
        assert_eq!(o.max_payload, 2 << 20);
        assert_eq!(o.store_dir, PathBuf::from("/from/file"));
        // Untouched by the file: default.
        assert_eq!(o.ping_max, DEFAULT_PING_MAX);

        let (o, _) = load_ok(
            conf,
            &[
                "-p",
                "6000",
                "-a",
                "127.0.0.1",
                "-n",
                "flag",
                "-D=false",
                "-T",
                "--max_payload",
                "3MB",
                "-js",
                "-sd",
                "/from/flag",
                "-m",
                "9000",
            ],
        );
        assert_eq!(o.port, 6000);
        assert_eq!(o.host, "127.0.0.1");
        assert_eq!(o.http_host, "127.0.0.1");
        assert_eq!(o.server_name.as_deref(), Some("flag"));
        assert!(!o.debug && o.logtime && o.jetstream);
        assert_eq!(o.max_payload, 3 << 20);
        assert_eq!(o.store_dir, PathBuf::from("/from/flag"));
        assert_eq!(o.http_port, Some(9000));
    }

    /// The config errors of loading `conf`, one string each; panics unless it fails with
    /// [`OptionsError::Config`].
    fn config_errors(conf: &str) -> Vec<String> {
        match load(conf, &[]) {
            Err(OptionsError::Config(e)) => e.0.iter().map(ToString::to_string).collect(),
            other => panic!("{conf:?}: {other:?}"),
        }
    }

    #[test]
    fn unknown_keys_are_errors_with_file_line_and_column() {
        // The misspelt blocks that used to start a server open, each with nats-server's
        // error; every unknown key of the file is reported, in file order.
        let conf = "port: 1234\nauthorisation {\n  token: abc\n}\n  tsl { verify: true }\n\
                    acounts { }\njetstream {\n  store_dir: /x\n    max_memroy: 1G\n\t\"Bogus\": 1\n}\n\
                    cluster { port: -1\n  authorisation { user: a, password: b } }\n\
                    VAR: srv\nserver_name: $VAR\n";
        let errors = config_errors(conf);
        let want = [
            "server.conf:2:1: unknown field \"authorisation\"",
            "server.conf:5:3: unknown field \"tsl\"",
            "server.conf:6:1: unknown field \"acounts\"",
            "server.conf:9:5: unknown field \"max_memroy\"",
            "server.conf:10:3: unknown field \"Bogus\"",
            "server.conf:13:3: unknown field \"authorisation\"",
        ];
        assert_eq!(errors.len(), want.len(), "{errors:#?}");
        for (got, want) in errors.iter().zip(want) {
            assert!(got.ends_with(want), "{got} vs {want}");
        }
        // A key used only as a variable is no setting (nats-server skips it too).
        let (o, w) = load_ok("VAR: 5\nmax_subs: $VAR\n", &[]);
        assert_eq!(o.max_subscriptions, 5);
        assert!(w.is_empty(), "{w:?}");
        let (_, w) = load_ok("# nothing\n", &[]);
        assert!(w[0].contains("empty"), "{w:?}");
        // The error is in nats-server's words in the other blocks too.
        for (conf, want) in [
            (
                "authorization {\n  tokne: x\n}\n",
                "server.conf:2:3: unknown field \"tokne\"",
            ),
            (
                "authorization { users: [\n {user: a, pasword: b} ] }\n",
                "server.conf:2:12: unknown field \"pasword\"",
            ),
            (
                "accounts {\n  A: { users: [ {user: a, password: b} ]\n    limit: {} }\n}\n",
                "server.conf:3:5: unknown field \"limit\"",
            ),
            (
                "cluster { port: -1, authorization {\n  usr: a } }\n",
                "server.conf:2:3: unknown field \"usr\"",
            ),
            (
                "tls {\n  cert_file: a\n  verfy: true\n}\n",
                "server.conf:3:3: error parsing tls config, unknown field \"verfy\"",
            ),
            (
                "websocket {\n  port: -1\n  no_tsl: true\n}\n",
                "server.conf:3:3: unknown field \"no_tsl\"",
            ),
        ] {
            let errors = config_errors(conf);
            assert!(errors[0].ends_with(want), "{conf:?}: {errors:?}");
        }
    }

    #[test]
    fn ignored_keys_warn_with_their_reason() {
        let conf = "port: 4333\nserver_name: s1\n\
                    http_base_path: /x\nclient_advertise: \"h:1\"\n\
                    proxy_protocol: false\nno_system_account: true\nsyslog: false\n\
                    jetstream { domain: hub, store_dir: /x }\n\
                    cluster { port: -1, connect_backoff: true }\n";
        let (o, w) = load_ok(conf, &[]);
        assert_eq!(o.port, 4333);
        assert!(o.jetstream && o.cluster.is_some());
        assert_eq!(w.len(), 7, "{w:?}");
        assert!(
            w.iter()
                .all(|w| w.contains("is not supported and is ignored")),
            "{w:?}"
        );
        assert!(
            w[0].contains("server.conf:3:1: \"http_base_path\" (a path prefix"),
            "{w:?}"
        );
        assert!(w[5].contains("\"jetstream.domain\""), "{w:?}");
        assert!(w[6].contains("\"cluster.connect_backoff\""), "{w:?}");
    }

    /// The refusals of loading `conf` with `args`; panics if it loads.
    fn refused(conf: &str, args: &[&str]) -> Refusals {
        match load(conf, args) {
            Err(OptionsError::Refused(r)) => r,
            Err(e) => panic!("{conf:?} {args:?}: not refused but {e}"),
            Ok((_, w)) => panic!("{conf:?} {args:?}: loaded (warnings {w:?})"),
        }
    }

    /// A config holding `key: 1` on line 3 (column 1 at the top, else 3), in `section`.
    fn conf_with(section: Section, key: &str) -> String {
        match section {
            Section::Top => format!("# line 1\nport: 4333\n{key}: 1\n"),
            Section::JetStream => format!("port: 4333\njetstream {{\n  {key}: 1\n}}\n"),
            Section::Authorization => {
                format!("port: 4333\nauthorization {{\n  {key}: 1\n}}\n")
            }
            Section::Account => format!("port: 4333\naccounts {{ A: {{\n  {key}: 1\n}} }}\n"),
            Section::Tls => format!("port: 4333\ntls {{\n  {key}: 1\n}}\n"),
            Section::Websocket => {
                format!("port: 4333\nwebsocket {{ port: -1, no_tls: true\n  {key}: 1\n}}\n")
            }
            Section::Cluster => format!("port: 4333\ncluster {{ port: -1\n  {key}: 1\n}}\n"),
        }
    }

    /// The refused entries of [`UNSUPPORTED`].
    fn refused_settings() -> impl Iterator<Item = &'static Unsupported> {
        UNSUPPORTED.iter().filter(|s| s.purpose().is_some())
    }

    #[test]
    fn every_refused_key_stops_loading_in_any_case() {
        for setting in refused_settings() {
            for key in setting.keys {
                for spelled in [key.to_string(), key.to_ascii_uppercase()] {
                    let r = refused(&conf_with(setting.section, &spelled), &[]);
                    assert_eq!(r.refusals.len(), 1, "{spelled}: {r}");
                    let Refusal::Config {
                        setting: got,
                        key: written,
                        line,
                        column,
                        ..
                    } = &r.refusals[0]
                    else {
                        panic!("{spelled}: {r}");
                    };
                    assert_eq!(*got, setting, "{spelled}");
                    let want_column = if setting.section == Section::Top {
                        1
                    } else {
                        3
                    };
                    assert_eq!((*line, *column), (3, want_column), "{spelled}: {r}");
                    let text = r.to_string();
                    let shown = match setting.section {
                        Section::Top => format!("{spelled:?}"),
                        Section::JetStream => format!("\"jetstream.{spelled}\""),
                        Section::Authorization => format!("\"authorization.{spelled}\""),
                        Section::Account => format!("\"accounts.A.{spelled}\""),
                        Section::Tls => format!("\"tls.{spelled}\""),
                        Section::Websocket => format!("\"websocket.{spelled}\""),
                        Section::Cluster => format!("\"cluster.{spelled}\""),
                    };
                    assert_eq!(written.to_string(), shown.trim_matches('"'), "{text}");
                    let purpose = setting.purpose().unwrap();
                    assert!(
                        text.contains(&format!("server.conf:3:{want_column}: {shown}"))
                            && text.contains("is not supported yet")
                            && text.contains(purpose.as_str()),
                        "{text}"
                    );
                }
            }
        }
    }

    /// What the block parsers do with `key: 1` in `section` (refusals not checked first):
    /// `Handled` by a parser, or reaching the table's `Ignored` or `Refused` treatment, or
    /// `Unknown`.
    #[derive(Debug, PartialEq, Eq)]
    enum Probe {
        Handled,
        Ignored,
        Refused,
        Unknown,
    }

    fn probe(section: Section, key: &str) -> Probe {
        let map = conf::parse_str(&conf_with(section, key)).unwrap();
        let mut warnings = Vec::new();
        let applied = ServerOptions::default().apply_config(&map, &mut warnings);
        let quoted = format!("{key:?}");
        let shown = format!("\"{}{key}\"", section.prefix());
        match applied {
            Err(e) => {
                let text = e.to_string();
                if text.contains(&format!("unknown field {quoted}")) {
                    Probe::Unknown
                } else if text.contains(&format!("{shown} is not supported yet")) {
                    Probe::Refused
                } else {
                    Probe::Handled
                }
            }
            Ok(_) if warnings.iter().any(|w| w.contains(&format!("{shown} ("))) => Probe::Ignored,
            Ok(_) => Probe::Handled,
        }
    }

    #[test]
    fn listed_keys_are_not_keys_a_parser_handles() {
        // When a setting is implemented, its entry must leave UNSUPPORTED: this fails as soon
        // as a parser handles one of its keys (it would no longer reach the table).
        for setting in UNSUPPORTED {
            for key in setting.keys {
                let got = probe(setting.section, key);
                let want = match (setting.section, setting.treatment) {
                    // These blocks' parsers do not read the table: nats-server refuses
                    // unknown keys in them, and so do they (refusals_in catches the listed
                    // keys before they run).
                    (
                        Section::Authorization
                        | Section::Account
                        | Section::Tls
                        | Section::Websocket,
                        Treatment::Refused(_),
                    ) => Probe::Unknown,
                    (_, Treatment::Refused(_)) => Probe::Refused,
                    (_, Treatment::Ignored(_)) => Probe::Ignored,
                };
                assert_eq!(
                    got,
                    want,
                    "{}{key}: a parser handles it, or it is listed wrongly",
                    setting.section.prefix()
                );
            }
        }
    }

    /// nats-server 2.15.1's keys: `processConfigFileLine`, `parseJetStream` (map form) and
    /// `parseCluster` in `server/opts.go`.
    const NATS_TOP_KEYS: &[&str] = &[
        "listen",
        "client_advertise",
        "port",
        "server_name",
        "host",
        "net",
        "debug",
        "trace",
        "trace_verbose",
        "trace_headers",
        "logtime",
        "logtime_utc",
        "mappings",
        "maps",
        "disable_sublist_cache",
        "no_sublist_cache",
        "accounts",
        "default_sentinel",
        "authorization",
        "http",
        "https",
        "http_port",
        "monitor_port",
        "https_port",
        "http_base_path",
        "cluster",
        "gateway",
        "leaf",
        "leafnodes",
        "store_dir",
        "storedir",
        "jetstream",
        "logfile",
        "log_file",
        "logfile_size_limit",
        "log_size_limit",
        "logfile_max_num",
        "log_max_num",
        "syslog",
        "remote_syslog",
        "pidfile",
        "pid_file",
        "ports_file_dir",
        "prof_port",
        "prof_block_rate",
        "max_control_line",
        "max_payload",
        "max_pending",
        "proxy_protocol",
        "max_connections",
        "max_conn",
        "max_traced_msg_len",
        "max_subscriptions",
        "max_subs",
        "max_sub_tokens",
        "max_subscription_tokens",
        "ping_interval",
        "ping_max",
        "tls",
        "ocsp",
        "allow_non_tls",
        "write_deadline",
        "write_timeout",
        "lame_duck_duration",
        "lame_duck_grace_period",
        "operator",
        "operators",
        "roots",
        "root",
        "root_operators",
        "root_operator",
        "resolver",
        "account_resolver",
        "accounts_resolver",
        "resolver_tls",
        "resolver_preload",
        "resolver_pinned_accounts",
        "no_auth_user",
        "system_account",
        "system",
        "no_system_account",
        "no_system",
        "no_sys_acc",
        "no_header_support",
        "trusted",
        "trusted_keys",
        "connect_error_reports",
        "reconnect_error_reports",
        "websocket",
        "ws",
        "mqtt",
        "server_tags",
        "server_metadata",
        "feature_flags",
        "default_js_domain",
        "ocsp_cache",
        "no_fast_producer_stall",
        "max_closed_clients",
        "proxies",
    ];
    const NATS_JETSTREAM_KEYS: &[&str] = &[
        "strict",
        "store",
        "store_dir",
        "storedir",
        "sync",
        "sync_interval",
        "max_memory_store",
        "max_mem_store",
        "max_mem",
        "max_file_store",
        "max_file",
        "domain",
        "enable",
        "enabled",
        "key",
        "ek",
        "encryption_key",
        "prev_key",
        "prev_ek",
        "prev_encryption_key",
        "cipher",
        "extension_hint",
        "limits",
        "tpm",
        "unique_tag",
        "max_outstanding_catchup",
        "max_buffered_size",
        "max_buffered_msgs",
        "request_queue_limit",
        "info_queue_limit",
        "meta_compact",
        "meta_compact_size",
        "meta_compact_sync",
        "max_concurrent_io",
    ];
    const NATS_CLUSTER_KEYS: &[&str] = &[
        "name",
        "listen",
        "port",
        "host",
        "net",
        "authorization",
        "routes",
        "tls",
        "cluster_advertise",
        "advertise",
        "no_advertise",
        "connect_retries",
        "connect_backoff",
        "permissions",
        "pool_size",
        "accounts",
        "compression",
        "ping_interval",
        "ping_max",
        "write_deadline",
        "write_timeout",
    ];

    #[test]
    fn every_nats_server_key_is_handled_or_listed() {
        for (section, keys) in [
            (Section::Top, NATS_TOP_KEYS),
            (Section::JetStream, NATS_JETSTREAM_KEYS),
            (Section::Cluster, NATS_CLUSTER_KEYS),
        ] {
            for key in keys {
                assert_ne!(
                    probe(section, key),
                    Probe::Unknown,
                    "nats-server's {}{key} is neither handled nor in UNSUPPORTED",
                    section.prefix()
                );
            }
            // And the table lists only keys nats-server has (others are unknown fields).
            for setting in UNSUPPORTED.iter().filter(|s| s.section == section) {
                for key in setting.keys {
                    assert!(
                        keys.contains(key),
                        "{}{key} is no nats-server key",
                        section.prefix()
                    );
                }
            }
        }
    }

    #[test]
    fn unsupported_table_is_consistent() {
        let mut seen = std::collections::HashSet::new();
        let mut flags = std::collections::HashSet::new();
        for setting in UNSUPPORTED {
            assert!(!setting.keys.is_empty() && !setting.what.is_empty());
            if let Treatment::Ignored(instead) = setting.treatment {
                assert!(!instead.is_empty() && setting.flags.is_empty());
            }
            for key in setting.keys {
                assert_eq!(*key, key.to_ascii_lowercase(), "keys are lowercase");
                assert!(seen.insert((setting.section, *key)), "{key} listed twice");
                assert_eq!(unsupported_key(setting.section, key), Some(setting));
            }
            for flag in setting.flags {
                assert!(flags.insert(flag.name), "flag {} listed twice", flag.name);
                assert_eq!(refused_flag(flag.name).map(|(r, _)| r), Some(setting));
            }
        }
        assert!(refused_key(Section::Top, "cipher").is_none());
        assert!(refused_key(Section::JetStream, "tls").is_none());
        // Ignored keys are no refusals.
        assert!(refused_key(Section::Top, "http_base_path").is_none());
        assert!(unsupported_key(Section::Top, "HTTP_Base_Path").is_some());
    }

    #[test]
    fn realistic_refused_configs() {
        let r = refused(
            "port: 4333\nauthorization {\n  token: \"s3cret\"\n  Auth_Callout { issuer: x }\n}\n",
            &[],
        );
        assert_eq!(r.refusals.len(), 1, "{r}");
        let text = r.to_string();
        assert!(
            text.contains(
                "server.conf:4:3: \"authorization.Auth_Callout\" is not supported yet (access control"
            ),
            "{text}"
        );
        let r = refused(
            "TLS {\n  cert_file: \"a.pem\"\n  Pinned_Certs: []\n}\nCluster { name: c, listen: 6222, Pool_Size: 3 }\n\
             jetstream { store_dir: /x, Key: \"abc\" }\nleafnodes { remotes: [] }\n\
             mappings { \"a.>\": \"b.>\" }\njetstream { limits { max_ha_assets: 1 } }\n",
            &[],
        );
        let keys: Vec<String> = r
            .refusals
            .iter()
            .map(|x| match x {
                Refusal::Config {
                    key, line, column, ..
                } => format!("{key}@{line}:{column}"),
                Refusal::Flag { flag, .. } => flag.clone(),
            })
            .collect();
        // The second `jetstream` block replaces the first (last wins, as nats-server).
        assert_eq!(
            keys,
            [
                "TLS.Pinned_Certs@3:3",
                "Cluster.Pool_Size@5:34",
                "jetstream.limits@9:13",
                "leafnodes@7:1",
                "mappings@8:1",
            ]
        );
        assert_eq!(r.to_string().lines().count(), 5, "{r}");
        let purposes: Vec<Purpose> = r
            .refusals
            .iter()
            .filter_map(|x| x.setting().purpose())
            .collect();
        assert_eq!(
            purposes,
            [
                Purpose::Encryption,
                Purpose::Replication,
                Purpose::ResourceLimits,
                Purpose::Replication,
                Purpose::AccessControl,
            ]
        );
    }

    #[test]
    fn refusals_come_before_value_errors() {
        let r = refused(
            "port: \"x\"\nmax_payload: 1TB\ngateway: 8443\nbogus: 1\n",
            &[],
        );
        assert_eq!(r.refusals.len(), 1, "{r}");
        assert!(
            r.to_string().contains("server.conf:3:1: \"gateway\""),
            "{r}"
        );
    }

    #[test]
    fn authorization_keys_at_the_top_are_unknown_fields_unless_variables() {
        // nats-server has no such top-level keys: unknown fields, fatal.
        let e = config_errors("users: [ {user: a, password: b} ]\n");
        assert!(
            e[0].ends_with("server.conf:1:1: unknown field \"users\""),
            "{e:?}"
        );
        let e = config_errors("port: 1\nToken: abc\n");
        assert!(
            e[0].ends_with("server.conf:2:1: unknown field \"Token\""),
            "{e:?}"
        );
        // Used only as a variable: not a setting (nats-server skips it too).
        let (o, w) = load_ok("user: srv1\nserver_name: $user\n", &[]);
        assert_eq!(o.server_name.as_deref(), Some("srv1"));
        assert!(w.is_empty(), "{w:?}");
        // A real key stays refused even when also used as a variable.
        let r = refused("trusted: X\nserver_name: $trusted\n", &[]);
        assert_eq!(r.refusals.len(), 1, "{r}");
    }

    #[test]
    fn refused_keys_in_an_included_file_name_that_file() {
        let dir = temp_dir();
        std::fs::write(dir.join("auth.conf"), "# auth\n\ntrusted: X\n").unwrap();
        let main = dir.join("main.conf");
        std::fs::write(&main, "port: 4333\ninclude ./auth.conf\n").unwrap();
        let r = match ServerOptions::load(&cli(&["-c", main.to_str().unwrap()])) {
            Err(OptionsError::Refused(r)) => r,
            other => panic!("{other:?}"),
        };
        let text = r.to_string();
        assert!(text.contains("auth.conf:3:1: \"trusted\""), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn max_subscriptions_and_max_sub_tokens() {
        let (o, w) = load_ok("max_subscriptions: 10\nmax_sub_tokens: 4\n", &[]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!((o.max_subscriptions, o.max_sub_tokens), (10, 4));
        let (o, _) = load_ok("max_subs: 3\nmax_subscription_tokens: 255\n", &[]);
        assert_eq!((o.max_subscriptions, o.max_sub_tokens), (3, 255));
        // 0 and -1: no limit.
        for conf in ["max_subs: 0", "max_subs: -1", "port: 1"] {
            let (o, _) = load_ok(conf, &[]);
            assert_eq!((o.max_subscriptions, o.max_sub_tokens), (0, 0), "{conf}");
        }
        // nats-server's errors, with the key as written.
        let e = config_errors("port: 1\nmax_sub_tokens: 256\n");
        assert!(
            e[0].ends_with(":2:1: max_sub_tokens value is too big"),
            "{e:?}"
        );
        let e = config_errors("max_subscription_tokens: 0\n");
        assert!(
            e[0].ends_with(":1:1: max_subscription_tokens value can not be negative"),
            "{e:?}"
        );
        let e = config_errors("max_subs: \"ten\"\n");
        assert!(e[0].contains("max_subs: expected an integer"), "{e:?}");
    }

    #[test]
    fn fuzz_seeds_parse_and_apply_without_panic() {
        // The config fuzzer's seeds (fuzz/seeds/parse_config): real configs, every form of the
        // grammar, and inputs that would overflow the stack or memory of an unbounded parser.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/parse_config");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("the seeds") {
            let path = entry.unwrap().path();
            seen += 1;
            let Ok(map) = conf::parse_file(&path) else {
                continue;
            };
            assert!(conf::digest(&map).starts_with("sha256:"));
            let _ = refusals_in(&map);
            let _ = ServerOptions::default().apply_config(&map, &mut Vec::new());
        }
        assert!(seen >= 10, "{seen} seeds in {}", dir.display());
        for (seed, want) in [
            ("deep_arrays.conf", "nested more than 64 deep"),
            ("deep_maps.conf", "nested more than 64 deep"),
            ("deep_variables.conf", "through '$V'"),
            ("variable_copies.conf", "values in one config"),
        ] {
            let e = conf::parse_file(&dir.join(seed)).unwrap_err();
            assert!(e.to_string().contains(want), "{seed}: {e}");
        }
    }

    #[test]
    fn check_config_as_nats_server() {
        let dir = temp_dir();
        let good = dir.join("good.conf");
        std::fs::write(&good, "port: 4333\n").unwrap();
        let lines = check_config(&cli(&["-t", "-c", good.to_str().unwrap()])).unwrap();
        // nats-server prints the same digest for this file.
        assert_eq!(
            lines,
            [format!(
                "configuration file {} is valid \
                 (sha256:5942f6739f1572892ba80b954eee212713f172258629e16936dfeeae8e2eb80d)",
                good.display()
            )]
        );
        // Warnings come first.
        std::fs::write(&good, "port: 4333\nhttp_base_path: /x\n").unwrap();
        let lines = check_config(&cli(&["-t", "-c", good.to_str().unwrap()])).unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("\"http_base_path\""), "{lines:?}");
        let bad = dir.join("bad.conf");
        std::fs::write(&bad, "port: 4333\n  tsl { verify: true }\nleafnodes {}\n").unwrap();
        let e = check_config(&cli(&["-t", "-c", bad.to_str().unwrap()])).unwrap_err();
        assert!(matches!(e, OptionsError::Refused(_)), "{e}");
        std::fs::write(&bad, "port: 4333\n  tsl { verify: true }\n").unwrap();
        let e = check_config(&cli(&["-t", "-c", bad.to_str().unwrap()])).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}:2:3: unknown field \"tsl\"", bad.display())
        );
        let e = check_config(&cli(&["-t"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "must specify [-c, --config] option to check configuration file syntax"
        );
        // Flags count, as at start-up.
        let e = check_config(&cli(&[
            "-t",
            "-c",
            good.to_str().unwrap(),
            "--no_advertise",
        ]))
        .unwrap_err();
        assert!(matches!(e, OptionsError::Refused(_)), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn refused_flags_stop_loading_first_and_keep_the_log_file() {
        let r = match ServerOptions::load(&cli(&["-no_advertise", "-l", "/tmp/x.log", "-T=false"]))
        {
            Err(OptionsError::Refused(r)) => r,
            other => panic!("{other:?}"),
        };
        let text = r.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(
            lines[0].starts_with("flag --no_advertise is not supported yet (replication"),
            "{text}"
        );
        assert_eq!(r.log_file, Some(PathBuf::from("/tmp/x.log")));
        assert!(!r.logtime);
        // Flags first, then the file; the file's log_file is used when no -l is given.
        let r = refused(
            "log_file: /tmp/y.log\ncluster {\n  listen: 6222\n  pool_size: 3\n}\n",
            &["--no_advertise=true"],
        );
        let text = r.to_string();
        assert!(
            text.starts_with("flag --no_advertise is not supported yet (replication"),
            "{text}"
        );
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .contains("server.conf:4:3: \"cluster.pool_size\""),
            "{text}"
        );
        assert_eq!(r.log_file, Some(PathBuf::from("/tmp/y.log")));
        assert!(r.logtime);
        for conf in [
            "cluster { port: 1, pool_size: 3 }",
            "cluster { port: 1, compression: s2_auto }",
            "cluster { port: 1, permissions: { import: a } }",
            "gateway { port: 1 }",
            "leafnodes { port: 1 }",
        ] {
            refused(conf, &[]);
        }
    }

    #[test]
    fn cluster_block_and_flags() {
        let (o, _) = load_ok(
            "server_name: n1\ncluster {\n  name: C\n  listen: 127.0.0.1:6333\n  \
             routes: [ nats-route://127.0.0.1:6334, nats://127.0.0.1:6335 ]\n  \
             connect_retries: 2\n  advertise: 10.0.0.5:7222\n}\n",
            &[],
        );
        let c = o.cluster.expect("cluster");
        assert_eq!(
            (c.name(), c.host.as_str(), c.port, c.connect_retries),
            ("C", "127.0.0.1", 6333, 2)
        );
        assert_eq!(c.advertise.as_deref(), Some("10.0.0.5:7222"));
        assert_eq!(c.routes, ["127.0.0.1:6334", "127.0.0.1:6335"]);
        // Flags win, and make a cluster by themselves.
        let o = ServerOptions::load(&cli(&[
            "--cluster",
            "nats://127.0.0.1:-1",
            "--routes",
            "nats://127.0.0.1:7001, nats-route://127.0.0.1:7002",
            "--cluster_name",
            "D",
            "--connect_retries",
            "5",
            "--cluster_advertise",
            "proxy.example",
        ]))
        .unwrap()
        .0;
        let c = o.cluster.expect("cluster");
        assert_eq!((c.name(), c.port, c.connect_retries), ("D", 0, 5));
        assert_eq!(c.advertise.as_deref(), Some("proxy.example"));
        assert_eq!(c.routes, ["127.0.0.1:7001", "127.0.0.1:7002"]);
        // Without a name: the fixed default.
        let o = ServerOptions::load(&cli(&["-cluster_listen", "nats://127.0.0.1:7000"]))
            .unwrap()
            .0;
        assert_eq!(o.cluster.unwrap().name(), "jsserver");
        // A block without a port is no cluster, as on nats-server.
        assert!(load_ok("cluster { name: C }\n", &[]).0.cluster.is_none());
        for bad in [
            &["--routes", "nats://127.0.0.1:7001"][..],
            &["--cluster", "nats://u@127.0.0.1:7000"],
            &[
                "--cluster",
                "nats://127.0.0.1:7000",
                "--routes",
                "nats://u@h:1",
            ],
            &["--cluster", "nats://127.0.0.1:7000", "-js"],
        ] {
            let e = ServerOptions::load(&cli(bad)).unwrap_err();
            assert!(matches!(e, OptionsError::Invalid(_)), "{bad:?}: {e}");
        }
        // A user and password in `--cluster` are the route authorization; in `--routes`, what
        // is sent to that route (nats-server's flags).
        let (o, _) = load_ok(
            "",
            &[
                "--cluster",
                "nats://ruser:rpass@127.0.0.1:7000",
                "--routes",
                "nats://a:b@127.0.0.1:7001,nats://127.0.0.1:7002",
            ],
        );
        let c = o.cluster.expect("cluster");
        let auth = c.authorization.clone().expect("route authorization");
        assert_eq!(
            (
                auth.credentials.user.as_str(),
                auth.credentials.password.as_str()
            ),
            ("ruser", "rpass")
        );
        assert_eq!(c.routes, ["127.0.0.1:7001", "127.0.0.1:7002"]);
        assert_eq!(c.credentials_for("127.0.0.1:7001").unwrap().user, "a");
        assert_eq!(c.credentials_for("127.0.0.1:7002").unwrap().user, "ruser");
        let e = ServerOptions::load(&cli(&["--cluster", "nats://127.0.0.1:7000", "-js"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("jetstream cluster requires `server_name` to be set"),
            "{e}"
        );
        let (o, _) = ServerOptions::load(&cli(&[
            "--cluster",
            "nats://127.0.0.1:7000",
            "-js",
            "--server_name",
            "n1",
        ]))
        .unwrap();
        assert!(o.jetstream && o.cluster.is_some());
    }

    #[test]
    fn authorization_block_no_auth_user_and_flags() {
        let (o, w) = load_ok(
            "authorization {\n  users: [ {user: a, password: b}, {user: c, password: d} ]\n  \
             timeout: 5\n}\nno_auth_user: c\n",
            &[],
        );
        assert_eq!(o.auth.users.len(), 2);
        assert_eq!(o.auth.timeout, Duration::from_secs(5));
        assert_eq!(o.auth.no_auth_user, "c");
        assert!(o.auth.required());
        assert!(w.iter().any(|w| w.contains("Plaintext passwords")), "{w:?}");
        // Accounts' users too, as nats-server; said once.
        for users in [
            "{user: a, password: b}",
            "{user: a, password: b}, {user: c, password: d}",
        ] {
            let (_, w) = load_ok(
                &format!("authorization {{ users: [ {users} ] }}\naccounts {{ A {{ users: [ {{user: x, password: y}} ] }} }}\n"),
                &[],
            );
            let n = w
                .iter()
                .filter(|w| w.contains("Plaintext passwords"))
                .count();
            assert_eq!(n, 1, "{w:?}");
            let (_, w) = load_ok(
                &format!("accounts {{ A {{ users: [ {{user: x, password: y}} ] }} }}\nauthorization {{ users: [ {users} ] }}\n"),
                &[],
            );
            let n = w
                .iter()
                .filter(|w| w.contains("Plaintext passwords"))
                .count();
            assert_eq!(n, 1, "{w:?}");
        }
        let (_, w) = load_ok(
            "accounts { A { users: [ {user: x, password: y} ] } }\n",
            &[],
        );
        assert!(w.iter().any(|w| w.contains("Plaintext passwords")), "{w:?}");
        let hashed = "$2a$11$PWIFAL8RsWyGI3jVZtO9Nu8.6jOxzxfZo7c/W0eLk017hjgUKWrhy";
        let (_, w) = load_ok(
            &format!("accounts {{ A {{ users: [ {{user: x, password: \"{hashed}\"}} ] }} }}\n"),
            &[],
        );
        assert!(
            !w.iter().any(|w| w.contains("Plaintext passwords")),
            "{w:?}"
        );
        // Flags win over the file; an empty flag leaves it.
        let (o, _) = load_ok(
            "authorization { user: a, password: b }\n",
            &["--user", "x", "-pass=y", "--auth", ""],
        );
        assert_eq!((o.auth.user.as_str(), o.auth.password.expose()), ("x", "y"));
        assert!(o.auth.token.is_empty());
        let (o, _) = load_ok("", &["-auth", "t0k"]);
        assert_eq!(o.auth.token.expose(), "t0k");
        assert_eq!(o.auth.timeout, auth_config::DEFAULT_AUTH_TIMEOUT);
        // Secrets stay out of Debug output.
        let (o, _) = load_ok("authorization { token: s3cret }\n", &[]);
        assert!(!format!("{o:?}").contains("s3cret"));
        let e = load("no_auth_user: ghost\n", &[]).unwrap_err();
        assert!(e.to_string().contains("users/nkeys are not defined"), "{e}");
        let e = load("system_account: NOPE\naccounts { A: {} }\n", &[]).unwrap_err();
        assert!(e.to_string().contains("is not an account"), "{e}");
        let (o, _) = load_ok("system: A\naccounts { A: {} }\n", &[]);
        assert_eq!(o.auth.system_account, "A");
        let e = load("", &["--pass", "p"]).unwrap_err();
        assert!(e.to_string().contains("without a user"), "{e}");
        let e = load("authorization {\n  token: t\n  user: u\n}\n", &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("server.conf:1:1: Cannot have a user/pass and token"),
            "{e}"
        );
    }

    #[test]
    fn server_tags_as_nats_server_keeps_them() {
        let (o, w) = load_ok(
            "server_tags: [\"az:1\", \" Disk:SSD \", \"AZ:1\", \"\"]\n",
            &[],
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.server_tags, ["az:1", "disk:ssd"]);
        let (o, _) = load_ok("server_tags: \"Edge\"\n", &[]);
        assert_eq!(o.server_tags, ["edge"]);
        let (o, _) = load_ok("port: 1\n", &[]);
        assert!(o.server_tags.is_empty());
        let e = load("server_tags: [a, 5]\n", &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("server_tags: error parsing tags: unsupported type integer"),
            "{e}"
        );
    }

    #[test]
    fn lame_duck_settings() {
        let (o, w) = load_ok("port: 1\n", &[]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.lame_duck_duration, DEFAULT_LAME_DUCK_DURATION);
        assert_eq!(o.lame_duck_grace_period, DEFAULT_LAME_DUCK_GRACE_PERIOD);
        let (o, w) = load_ok(
            "lame_duck_duration: \"45s\"\nlame_duck_grace_period: \"1s\"\n",
            &[],
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.lame_duck_duration, Duration::from_secs(45));
        assert_eq!(o.lame_duck_grace_period, Duration::from_secs(1));
        // 0 is the default grace period, as nats-server.
        let (o, _) = load_ok("lame_duck_grace_period: \"0s\"\n", &[]);
        assert_eq!(o.lame_duck_grace_period, DEFAULT_LAME_DUCK_GRACE_PERIOD);
        let e = load("a: 1\nlame_duck_duration: \"5s\"\n", &[]).unwrap_err();
        assert!(
            e.to_string().contains(
                "server.conf:2:1: invalid lame_duck_duration of 5s, minimum is 30 seconds"
            ),
            "{e}"
        );
        let e = load(
            "lame_duck_duration: \"30s\"\nlame_duck_grace_period: \"30s\"\n",
            &[],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "lame duck grace period (30s) should be strictly lower than lame duck duration (30s)"
        );
    }

    #[test]
    fn max_payload_limits() {
        let e = load("a: 1\n\nmax_payload: 65MB\n", &[]).unwrap_err();
        assert!(matches!(e, OptionsError::Config(_)));
        assert!(
            e.to_string().contains("server.conf:3:1: max_payload"),
            "{e}"
        );
        assert!(load_ok("max_payload: 64MB", &[]).0.max_payload == 64 << 20);
        let e = ServerOptions::load(&cli(&["--max_payload", "100MB"])).unwrap_err();
        assert!(matches!(e, OptionsError::Invalid(_)), "{e}");
        let e = load("max_payload: 2MB\nmax_pending: 1MB", &[]).unwrap_err();
        assert!(
            e.to_string().contains("cannot be higher than max_pending"),
            "{e}"
        );
        let (_, w) = load_ok("max_payload: 9MB", &[]);
        assert!(w.iter().any(|w| w.contains("discouraged")), "{w:?}");
        let (o, _) = load_ok("max_payload: 0", &[]);
        assert_eq!(o.max_payload, DEFAULT_MAX_PAYLOAD);
    }

    #[test]
    fn value_errors_name_file_and_line() {
        let cases: &[(&str, &str)] = &[
            (
                "\nport: \"x\"",
                "server.conf:2:1: port: expected an integer, got string",
            ),
            ("port: 70000", "server.conf:1:1: port: invalid port 70000"),
            ("port: -2", "invalid port -2"),
            ("listen: \"nohostport\"", "could not parse address"),
            ("listen: \"h:abc\"", "could not parse port"),
            ("debug: 1", "debug: expected a boolean, got integer"),
            ("server_name: \"a b\"", "cannot contain spaces"),
            ("jetstream: maybe", "expected 'enabled' or 'disabled'"),
            ("jetstream: 5", "expected a map, boolean or string"),
            (
                "store_dir: /a\njetstream { store_dir: /b }",
                "server.conf:2:13: duplicate 'store_dir'",
            ),
            ("jetstream { max_mem: \"lots\" }", "invalid size"),
            ("max_pending: -1", "must not be negative"),
            ("ping_max: -1", "invalid value"),
            ("write_deadline: -5", "must not be negative"),
            ("ping_interval: true", "expected a duration"),
        ];
        for (conf, needle) in cases {
            let e = load(conf, &[]).expect_err(conf);
            let s = e.to_string();
            assert!(
                s.contains("server.conf:") && s.contains(needle),
                "{conf:?}: {s}"
            );
        }
        // Syntax errors too.
        let e = load("port: 1\nhost: [\n", &[]).unwrap_err();
        assert!(e.to_string().contains("server.conf:2:7:"), "{e}");
        let e = ServerOptions::load(&cli(&["-c", "/nonexistent/jsserver.conf"])).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }

    #[test]
    fn flag_value_errors() {
        let e = ServerOptions::load(&cli(&["-n", "a b"])).unwrap_err();
        assert!(matches!(e, OptionsError::Invalid(_)), "{e}");
        let e = ServerOptions::load(&cli(&["-a", ""])).unwrap_err();
        assert!(matches!(e, OptionsError::Invalid(_)), "{e}");
    }

    #[test]
    fn pid_and_ports_files() {
        let dir = temp_dir();
        let pid = dir.join("s.pid");
        write_pid_file(&pid).unwrap();
        assert_eq!(
            std::fs::read_to_string(&pid).unwrap(),
            std::process::id().to_string()
        );

        let client: SocketAddr = "127.0.0.1:4222".parse().unwrap();
        let http: SocketAddr = "0.0.0.0:8222".parse().unwrap();
        let path = write_ports_file(&dir, client, Some(http)).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.ends_with(&format!("_{}.ports", std::process::id())),
            "{name}"
        );
        assert_eq!(path, ports_file_path(&dir));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r#"{"nats":["nats://127.0.0.1:4222"],"monitoring":["http://127.0.0.1:8222"]}"#
        );
        let v6: SocketAddr = "[::1]:4333".parse().unwrap();
        write_ports_file(&dir, v6, None).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r#"{"nats":["nats://[::1]:4333"]}"#
        );
        remove_ports_file(&dir).unwrap();
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn split_host_port_like_go() {
        assert_eq!(split_host_port("a:1"), Some(("a", "1")));
        assert_eq!(split_host_port(":1"), Some(("", "1")));
        assert_eq!(split_host_port("[::1]:1"), Some(("::1", "1")));
        assert_eq!(split_host_port("::1:1"), None);
        assert_eq!(split_host_port("a"), None);
    }
}
