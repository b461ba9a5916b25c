//! The server's merged options: defaults, then the config file, then flags.
//!
//! Keys, flag meanings and defaults follow nats-server's `server/opts.go`
//! and `server/const.go`, except where noted on a field (notably: the
//! default host is `127.0.0.1`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::Cli;
use crate::conf::{self, ConfError, Item, Map, Value};

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
/// Default JetStream file store sync interval: 2 minutes, as nats-server's
/// `defaultSyncInterval`.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(120);

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
    /// Monitoring (HTTP) host (`http: host:port`). Default: [`Self::host`].
    pub http_host: String,
    /// Monitoring port (`-m`, `http_port`/`monitor_port`, `http`). `None` =
    /// no monitoring (the default, also given as `0`); `Some(0)` = pick a
    /// free port (given as `-1`).
    pub http_port: Option<u16>,
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
}

impl Default for ServerOptions {
    /// The documented defaults; no config file, no flags.
    fn default() -> Self {
        ServerOptions {
            host: DEFAULT_HOST.to_string(),
            port: DEFAULT_PORT,
            server_name: None,
            http_host: DEFAULT_HOST.to_string(),
            http_port: None,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_control_line: DEFAULT_MAX_CONTROL_LINE,
            ping_interval: DEFAULT_PING_INTERVAL,
            ping_max: DEFAULT_PING_MAX,
            write_deadline: DEFAULT_WRITE_DEADLINE,
            max_pending: DEFAULT_MAX_PENDING,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            jetstream: false,
            store_dir: default_store_dir(),
            max_memory_store: None,
            max_file_store: None,
            sync_interval: SyncPolicy::default(),
            debug: false,
            trace: false,
            logtime: true,
            log_file: None,
            pid_file: None,
            ports_file_dir: None,
            config_file: None,
        }
    }
}

/// Why options could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// The config file cannot be read, is malformed, or a value in it is
    /// invalid; the error names the file and line.
    #[error(transparent)]
    Config(#[from] ConfError),
    /// An invalid flag value or combination of options, e.g.
    /// `max_payload (2000) cannot be higher than max_pending (1000)`.
    #[error("{0}")]
    Invalid(String),
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
fn port_from(n: i64, default: u16) -> Option<u16> {
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
fn split_host_port(s: &str) -> Option<(&str, &str)> {
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
fn parse_listen(key: &str, item: &Item) -> Result<(Option<String>, i64), ConfError> {
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

fn expect_int(key: &str, item: &Item) -> Result<i64, ConfError> {
    item.as_int().ok_or_else(|| {
        ConfError::at(
            item,
            format!("{key}: expected an integer, got {}", item.value.type_name()),
        )
    })
}

fn expect_str<'a>(key: &str, item: &'a Item) -> Result<&'a str, ConfError> {
    item.as_str().ok_or_else(|| {
        ConfError::at(
            item,
            format!("{key}: expected a string, got {}", item.value.type_name()),
        )
    })
}

fn expect_bool(key: &str, item: &Item) -> Result<bool, ConfError> {
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
fn expect_duration(
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

fn unknown(key: &str, item: &Item, section: &str, warnings: &mut Vec<String>) {
    if !item.used_as_variable {
        warnings.push(
            ConfError::at(
                item,
                format!("unknown or unsupported field {section}{key:?} (ignored)"),
            )
            .to_string(),
        );
    }
}

impl ServerOptions {
    /// Loads the options: defaults, overridden by the config file named by
    /// `cli.config` (if any), overridden by the other flags in `cli`.
    ///
    /// Returns the options and warnings for the caller to log (unknown
    /// config keys, deprecated forms, a large `max_payload`).
    ///
    /// Errors: the config file cannot be read or parsed, a value has the
    /// wrong type or range (these name the file and line), or the merged
    /// options are invalid (`max_payload` above [`MAX_PAYLOAD_LIMIT`] or
    /// above `max_pending`, a server name with spaces).
    pub fn load(cli: &Cli) -> Result<(ServerOptions, Vec<String>), OptionsError> {
        let mut opts = ServerOptions::default();
        let mut warnings = Vec::new();
        let mut http_host_set = false;
        if let Some(path) = &cli.config {
            let map = conf::parse_file(path)?;
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
        Ok((opts, warnings))
    }

    /// Where JetStream keeps its files: `<store_dir>/jetstream`, as
    /// nats-server.
    pub fn jetstream_dir(&self) -> PathBuf {
        self.store_dir.join("jetstream")
    }

    /// Applies the keys of a parsed config file (as nats-server's
    /// `processConfigFileLine`; keys are case-insensitive). Unknown keys add
    /// a warning. Returns whether the monitoring host was set (`http:
    /// host:port`).
    pub fn apply_config(
        &mut self,
        map: &Map,
        warnings: &mut Vec<String>,
    ) -> Result<bool, ConfError> {
        let mut http_host_set = false;
        let mut store_dir_set = false;
        for (key, item) in map.iter() {
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
                        return Err(ConfError::at(item, "server name cannot contain spaces"));
                    }
                    self.server_name = Some(name.to_string());
                }
                "http" => {
                    let (host, n) = parse_listen(k, item)?;
                    if let Some(h) = host {
                        self.http_host = h;
                        http_host_set = true;
                    }
                    self.http_port = http_port_from(n)
                        .ok_or_else(|| ConfError::at(item, format!("{k}: invalid port {n}")))?;
                }
                "http_port" | "monitor_port" => {
                    let n = expect_int(k, item)?;
                    self.http_port = http_port_from(n)
                        .ok_or_else(|| ConfError::at(item, format!("{k}: invalid port {n}")))?;
                }
                "max_payload" => {
                    let n = expect_bytes(k, item, DEFAULT_MAX_PAYLOAD)?;
                    if n > MAX_PAYLOAD_LIMIT {
                        return Err(ConfError::at(
                            item,
                            format!("max_payload ({n}) cannot be higher than {MAX_PAYLOAD_LIMIT} (64 MiB)"),
                        ));
                    }
                    self.max_payload = n;
                }
                "max_control_line" => {
                    let n = expect_bytes(k, item, DEFAULT_MAX_CONTROL_LINE)?;
                    if n > i32::MAX as usize {
                        return Err(ConfError::at(item, "max_control_line value is too big"));
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
                        n => u32::try_from(n).map_err(|_| {
                            ConfError::at(item, format!("ping_max: invalid value {n}"))
                        })?,
                    };
                }
                "write_deadline" => {
                    self.write_deadline =
                        expect_duration(k, item, DEFAULT_WRITE_DEADLINE, warnings)?;
                }
                "jetstream" => self.apply_jetstream(item, &mut store_dir_set, warnings)?,
                "store_dir" | "storedir" => {
                    if store_dir_set {
                        return Err(ConfError::at(item, "duplicate 'store_dir' configuration"));
                    }
                    store_dir_set = true;
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
                _ => unknown(key, item, "", warnings),
            }
        }
        Ok(http_host_set)
    }

    /// `jetstream: enabled|disabled|true|false` or `jetstream { ... }`, as
    /// nats-server's `parseJetStream`.
    fn apply_jetstream(
        &mut self,
        item: &Item,
        store_dir_set: &mut bool,
        warnings: &mut Vec<String>,
    ) -> Result<(), ConfError> {
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
                        ))
                    }
                }
            }
            Value::Map(m) => {
                let mut enable = true;
                for (key, v) in m.iter() {
                    let lower = key.to_ascii_lowercase();
                    let k = lower.as_str();
                    match k {
                        "store" | "store_dir" | "storedir" => {
                            if *store_dir_set {
                                return Err(ConfError::at(
                                    v,
                                    "duplicate 'store_dir' configuration",
                                ));
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
                        "enable" | "enabled" => enable = expect_bool(k, v)?,
                        _ => unknown(key, v, "jetstream.", warnings),
                    }
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
                ))
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
        Ok(())
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
            w[0].contains("line 1") && w[0].contains("should be converted"),
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
                .contains("line 2: ping_interval: invalid duration"),
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

    #[test]
    fn unknown_keys_are_warnings() {
        let (o, w) = load_ok(
            "port: 1234\ncluster { port: 6222 }\nfoo: bar\nVAR: 5\nmax_subs: $VAR\njetstream { domain: x }",
            &[],
        );
        assert_eq!(o.port, 1234);
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(
            w[0].contains("line 2") && w[0].contains("\"cluster\""),
            "{w:?}"
        );
        assert!(w[1].contains("line 3") && w[1].contains("\"foo\""), "{w:?}");
        // VAR was used as a variable: no warning for it.
        assert!(w[2].contains("\"max_subs\""), "{w:?}");
        assert!(w[3].contains("jetstream.\"domain\""), "{w:?}");
        let (_, w) = load_ok("# nothing\n", &[]);
        assert!(w[0].contains("empty"), "{w:?}");
    }

    #[test]
    fn max_payload_limits() {
        let e = load("a: 1\n\nmax_payload: 65MB\n", &[]).unwrap_err();
        assert!(matches!(e, OptionsError::Config(_)));
        assert!(e.to_string().contains("line 3: max_payload"), "{e}");
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
                "line 2: port: expected an integer, got string",
            ),
            ("port: 70000", "line 1: port: invalid port 70000"),
            ("port: -2", "invalid port -2"),
            ("listen: \"nohostport\"", "could not parse address"),
            ("listen: \"h:abc\"", "could not parse port"),
            ("debug: 1", "debug: expected a boolean, got integer"),
            ("server_name: \"a b\"", "cannot contain spaces"),
            ("jetstream: maybe", "expected 'enabled' or 'disabled'"),
            ("jetstream: 5", "expected a map, boolean or string"),
            (
                "store_dir: /a\njetstream { store_dir: /b }",
                "line 2: duplicate 'store_dir'",
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
                s.starts_with("config file ") && s.contains(needle),
                "{conf:?}: {s}"
            );
        }
        // Syntax errors too.
        let e = load("port: 1\nhost: [\n", &[]).unwrap_err();
        assert!(e.to_string().contains("server.conf line 2:"), "{e}");
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
