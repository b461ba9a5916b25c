//! Logging in nats-server's line format, through `tracing`.
//!
//! Lines look like nats-server's (`logger/log.go`: Go's `log` package with
//! a `[PID] ` prefix and `LstdFlags|Lmicroseconds`):
//!
//! ```text
//! [4711] 2026/11/29 09:20:42.123456 [INF] Server is ready
//! [4711] 2026/11/29 09:20:42.123501 [ERR] accept failed error=Too many open files
//! [4711] [DBG] no timestamp with -T=false
//! ```
//!
//! Labels: `[ERR]`, `[WRN]`, `[INF]`, `[DBG]`, `[TRC]`, and `[FTL]` for the
//! fatal start-up errors written by [`fatal`] (tracing has no level above
//! ERROR; nats-server's `Fatalf` logs `[FTL]` and exits). An event's fields
//! (`error = %e`) follow the message as `key=value`, then the fields of the
//! spans it is in. Timestamps are UTC (nats-server uses local time unless
//! `logtime_utc`; the project's machines run in UTC).
//!
//! Levels as nats-server: INFO and above always; DEBUG with `-D`, TRACE with
//! `-V` (each independently: `-V` alone shows `[TRC]` lines but not
//! `[DBG]`). DEBUG and TRACE lines are shown for the project's own crates
//! (`jsserver`, `jsproto`) only, so dependencies do not flood a `-DV` log.
//! Setting `JSSERVER_LOG` to an `EnvFilter` directive (e.g.
//! `jsserver=trace,hyper=debug`) replaces this filter.

use std::fmt;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer, Registry};

use crate::options::ServerOptions;
use crate::os_error::go_error;

/// Environment variable whose value, if set, is used as a
/// `tracing_subscriber::EnvFilter` directive instead of the `-D`/`-V` levels.
pub const LOG_FILTER_ENV: &str = "JSSERVER_LOG";

/// Keeps logging set up; hold it until the process exits.
///
/// Lines are written synchronously (nothing is buffered), so dropping it
/// loses nothing. With a log file, [`LogGuard::reopen`] moves logging to a
/// freshly opened file of the same name (SIGUSR1, for log rotation), and
/// [`LogGuard::apply`] takes a reloaded config's `debug`, `trace`, `logtime`
/// and `log_file` (SIGHUP).
#[must_use = "hold the guard until the process exits"]
#[derive(Debug, Clone)]
pub struct LogGuard {
    settings: Arc<Settings>,
}

/// What the installed subscriber reads on every line: the levels, the timestamp switch and
/// where lines go. Changed in place by a reload ([`LogGuard::apply`]).
#[derive(Debug)]
struct Settings {
    debug: AtomicBool,
    trace: AtomicBool,
    logtime: AtomicBool,
    target: RwLock<Target>,
}

/// Where lines go.
#[derive(Debug, Clone)]
enum Target {
    Stderr,
    /// A file, appended to; the path is kept for [`LogGuard::reopen`].
    File {
        path: std::path::PathBuf,
        file: Arc<std::fs::File>,
    },
}

impl Settings {
    fn new(opts: &ServerOptions, target: Target) -> Arc<Settings> {
        Arc::new(Settings {
            debug: AtomicBool::new(opts.debug),
            trace: AtomicBool::new(opts.trace),
            logtime: AtomicBool::new(opts.logtime),
            target: RwLock::new(target),
        })
    }

    /// The most verbose level shown.
    fn max_level(&self) -> LevelFilter {
        if self.trace.load(Ordering::Relaxed) {
            LevelFilter::TRACE
        } else if self.debug.load(Ordering::Relaxed) {
            LevelFilter::DEBUG
        } else {
            LevelFilter::INFO
        }
    }
}

impl LogGuard {
    /// Reopens the log file (nats-server's `ReOpenLogFile`): a rotated-away file is
    /// let go and lines go to a new file at the configured path, which is created if
    /// missing, and which gets `File log re-opened`. Without a log file this only logs
    /// `File log re-open ignored, not a file logger`. If the file cannot be opened,
    /// logging stays on the old one and the error is logged there.
    pub fn reopen(&self) {
        let path = match &*self
            .settings
            .target
            .read()
            .expect("log target lock poisoned")
        {
            Target::Stderr => None,
            Target::File { path, .. } => Some(path.clone()),
        };
        let Some(path) = path else {
            tracing::info!("File log re-open ignored, not a file logger");
            return;
        };
        match open_log(&path) {
            Ok(fresh) => {
                *self
                    .settings
                    .target
                    .write()
                    .expect("log target lock poisoned") = Target::File {
                    path,
                    file: Arc::new(fresh),
                };
                tracing::info!("File log re-opened");
            }
            Err(err) => tracing::error!("File log re-open failed: {err:#}"),
        }
    }

    /// Takes a reloaded config's `debug`, `trace` and `logtime` (from the next line on)
    /// and its `log_file`: a new path is opened (created if missing, appended to) and lines
    /// go there; no path means stderr. `JSSERVER_LOG`, when set, still decides the levels.
    ///
    /// # Errors
    /// The new log file cannot be opened: then nothing changes.
    pub fn apply(&self, opts: &ServerOptions) -> anyhow::Result<()> {
        let target = match &opts.log_file {
            None => Target::Stderr,
            Some(path) => {
                let same = matches!(
                    &*self.settings.target.read().expect("log target lock poisoned"),
                    Target::File { path: p, .. } if p == path
                );
                if same {
                    self.settings
                        .target
                        .read()
                        .expect("log target lock poisoned")
                        .clone()
                } else {
                    Target::File {
                        path: path.clone(),
                        file: Arc::new(open_log(path)?),
                    }
                }
            }
        };
        *self
            .settings
            .target
            .write()
            .expect("log target lock poisoned") = target;
        self.settings.debug.store(opts.debug, Ordering::Relaxed);
        self.settings.trace.store(opts.trace, Ordering::Relaxed);
        self.settings.logtime.store(opts.logtime, Ordering::Relaxed);
        // Callsites cached as never enabled (a debug line while only INFO was shown) are
        // asked again, and the global level hint follows the new levels.
        tracing::callsite::rebuild_interest_cache();
        Ok(())
    }
}

/// Writes every line to the [`Target`] in force.
#[derive(Debug, Clone)]
struct TargetWriter(Arc<Settings>);

/// One line's writer: stderr or the file.
enum LineWriter {
    Stderr(std::io::Stderr),
    File(Arc<std::fs::File>),
}

impl std::io::Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            LineWriter::Stderr(e) => e.write(buf),
            LineWriter::File(f) => (&**f).write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            LineWriter::Stderr(e) => e.flush(),
            LineWriter::File(f) => (&**f).flush(),
        }
    }
}

impl<'a> MakeWriter<'a> for TargetWriter {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        match &*self.0.target.read().expect("log target lock poisoned") {
            Target::Stderr => LineWriter::Stderr(std::io::stderr()),
            Target::File { file, .. } => LineWriter::File(Arc::clone(file)),
        }
    }
}

/// Opens the log file for appending; the error in nats-server's words
/// (`error opening file: open PATH: no such file or directory`).
fn open_log(path: &Path) -> anyhow::Result<std::fs::File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|err| {
            anyhow::anyhow!(
                "error opening file: open {}: {}",
                path.display(),
                go_error(&err)
            )
        })
}

/// Installs the global `tracing` subscriber for `opts`: nats-server line
/// format (`NatsFormat`), to stderr or appended to `opts.log_file` (created
/// if missing; every line is written to the file as it is logged, so tests
/// can tail it), at the levels given by `opts.debug` / `opts.trace` (see the
/// module doc). Also routes `log` crate records into `tracing`.
///
/// Errors: the log file cannot be opened, or a global subscriber is already
/// installed, or `JSSERVER_LOG` is not a valid filter.
pub fn init(opts: &ServerOptions) -> anyhow::Result<LogGuard> {
    let filter = std::env::var(LOG_FILTER_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty());
    let target = match &opts.log_file {
        Some(path) => Target::File {
            path: path.clone(),
            file: Arc::new(open_log(path)?),
        },
        None => Target::Stderr,
    };
    let settings = Settings::new(opts, target);
    let layer = layer(&settings, filter, TargetWriter(Arc::clone(&settings)))?;
    tracing_subscriber::registry()
        .with(layer)
        .try_init()
        .context("cannot install the log subscriber")?;
    Ok(LogGuard { settings })
}

/// The formatting layer with its level filter, writing to `writer`.
fn layer<W>(
    settings: &Arc<Settings>,
    env_filter: Option<String>,
    writer: W,
) -> anyhow::Result<Box<dyn Layer<Registry> + Send + Sync>>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .event_format(NatsFormat {
            pid: std::process::id(),
            settings: Arc::clone(settings),
        })
        .with_writer(writer);
    if let Some(directive) = env_filter {
        let filter = EnvFilter::try_new(&directive)
            .with_context(|| format!("invalid {LOG_FILTER_ENV} filter {directive:?}"))?;
        return Ok(fmt.with_filter(filter).boxed());
    }
    Ok(fmt.with_filter(Levels(Arc::clone(settings))).boxed())
}

/// The level filter of nats-server's `-D`/`-V`, read on every line so that a reload changes
/// it: INFO and above always; DEBUG lines with `debug`, TRACE lines with `trace`, of the
/// project's own crates only.
struct Levels(Arc<Settings>);

impl<S> tracing_subscriber::layer::Filter<S> for Levels {
    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        _cx: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        let ours = || {
            let t = meta.target();
            t.starts_with("jsserver") || t.starts_with("jsproto")
        };
        match *meta.level() {
            Level::TRACE => self.0.trace.load(Ordering::Relaxed) && ours(),
            Level::DEBUG => self.0.debug.load(Ordering::Relaxed) && ours(),
            _ => true,
        }
    }

    fn callsite_enabled(&self, meta: &'static tracing::Metadata<'static>) -> Interest {
        if *meta.level() <= Level::INFO {
            Interest::always()
        } else {
            // Asked again on every event: a reload may turn these levels on or off.
            Interest::sometimes()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.0.max_level())
    }
}

/// `tracing_subscriber` event formatter producing nats-server's log lines:
/// `[PID] YYYY/MM/DD HH:MM:SS.UUUUUU [LVL] message key=value ...` (the
/// timestamp, UTC with microseconds, only while `logtime`).
#[derive(Debug, Clone)]
struct NatsFormat {
    pid: u32,
    settings: Arc<Settings>,
}

/// nats-server's level label for `level`.
fn label(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "[ERR]",
        Level::WARN => "[WRN]",
        Level::INFO => "[INF]",
        Level::DEBUG => "[DBG]",
        Level::TRACE => "[TRC]",
    }
}

impl<S, N> FormatEvent<S, N> for NatsFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let logtime = self.settings.logtime.load(Ordering::Relaxed);
        write_prefix(&mut writer, self.pid, logtime)?;
        writer.write_str(label(event.metadata().level()))?;
        writer.write_char(' ')?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>() {
                    if !fields.is_empty() {
                        write!(writer, " {fields}")?;
                    }
                }
            }
        }
        writeln!(writer)
    }
}

/// nats-server's label for a fatal line (its `Fatalf`), which `tracing`
/// levels cannot express; see [`fatal`].
pub const FATAL_LABEL: &str = "[FTL]";

/// Writes a line's start: `[PID] ` and, if `logtime`, the timestamp and a
/// blank.
fn write_prefix(w: &mut impl fmt::Write, pid: u32, logtime: bool) -> fmt::Result {
    write!(w, "[{pid}] ")?;
    if logtime {
        write_timestamp(w, SystemTime::now())?;
        w.write_char(' ')?;
    }
    Ok(())
}

/// One fatal line in nats-server's format, with its newline:
/// `[PID] YYYY/MM/DD HH:MM:SS.UUUUUU [FTL] message` (no timestamp unless
/// `logtime`).
pub fn fatal_line(logtime: bool, message: &str) -> String {
    let mut line = String::new();
    // Writing to a String cannot fail.
    let _ = write_prefix(&mut line, std::process::id(), logtime);
    line.push_str(FATAL_LABEL);
    line.push(' ');
    line.push_str(message);
    line.push('\n');
    line
}

/// Reports errors that stop the server at start-up, before or without
/// [`init`]: each message becomes one [`fatal_line`] on stderr and, when
/// `log_file` is given, is appended to that file as well (so a harness
/// reading the `-l` file sees why the server stopped). The caller then
/// exits with a non-zero status, as nats-server's `Fatalf`.
///
/// Failing to write the log file is not reported (stderr has the lines).
pub fn fatal(log_file: Option<&Path>, logtime: bool, messages: &[String]) {
    let text: String = messages.iter().map(|m| fatal_line(logtime, m)).collect();
    let _ = std::io::stderr().write_all(text.as_bytes());
    if let Some(path) = log_file {
        if let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = file.write_all(text.as_bytes());
        }
    }
}

/// Writes `t` as UTC `YYYY/MM/DD HH:MM:SS.UUUUUU` (Go's `LstdFlags |
/// Lmicroseconds` layout).
fn write_timestamp(w: &mut impl fmt::Write, t: SystemTime) -> fmt::Result {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    write!(
        w,
        "{y:04}/{m:02}/{d:02} {:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_micros()
    )
}

/// Proleptic Gregorian (year, month, day) of the day `days` after
/// 1970-01-01 (the well-known "days to civil" conversion by eras of 400
/// years).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1
    let mp = (5 * doy + 2) / 153; // month from March, [0, 11]
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

// ---------------------------------------------------------------------------------------------
// raft-rs's slog records, into tracing
// ---------------------------------------------------------------------------------------------

/// The `tracing` target of every record forwarded by [`raft_logger`]: under `jsserver`, so
/// `-D` shows raft-rs's debug records and `-V` its trace records, as for the server's own.
pub const RAFT_LOG_TARGET: &str = "jsserver::raft";

/// A `slog` logger for the raft-rs `RawNode` of Raft group `group` (raft-rs 0.7 logs through
/// slog 2 and takes the logger in its `Config`/`RawNode::new`), forwarding each record to
/// `tracing` as one event with target [`RAFT_LOG_TARGET`]:
///
/// * level: slog's `Critical` and `Error` as ERROR, `Warning` as WARN, `Info` as INFO,
///   `Debug` as DEBUG, `Trace` as TRACE;
/// * message: the record's formatted message;
/// * field `group`: `group`;
/// * field `kv` (only when there are any): the record's key-values and those of the logger it
///   went through (raft-rs adds `raft_id` to its loggers), as `key=value` separated by blanks,
///   the record's first, in slog's serialisation order (last added first).
///
/// In the server's log a record reads
/// `[INF] became leader at term 2 group="S-ORDERS" kv="term=2 raft_id=1"`.
///
/// slog filters by level at compile time before any drain sees a record: with slog's default
/// features (the workspace's), trace records never arrive, and in release builds debug records
/// do not either (`release_max_level_info`). slog's `max_level_trace` /
/// `release_max_level_debug` features would let them through.
pub fn raft_logger(group: &str) -> slog::Logger {
    slog::Logger::root(
        TracingDrain {
            group: Arc::from(group),
        },
        slog::o!(),
    )
}

/// The `slog::Drain` behind [`raft_logger`].
struct TracingDrain {
    group: Arc<str>,
}

/// Collects key-values as `key=value key=value`.
struct KvText(String);

impl slog::Serializer for KvText {
    fn emit_arguments(&mut self, key: slog::Key, val: &fmt::Arguments<'_>) -> slog::Result {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        use fmt::Write as _;
        let _ = write!(self.0, "{key}={val}");
        Ok(())
    }
}

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(
        &self,
        record: &slog::Record<'_>,
        values: &slog::OwnedKVList,
    ) -> Result<(), slog::Never> {
        use slog::KV as _;
        let mut kv = KvText(String::new());
        // A value that cannot be formatted only loses its text; the record still goes out.
        let _ = record.kv().serialize(record, &mut kv);
        let _ = values.serialize(record, &mut kv);
        let group = &*self.group;
        let msg = record.msg();
        macro_rules! forward {
            ($level:expr) => {
                if kv.0.is_empty() {
                    tracing::event!(target: RAFT_LOG_TARGET, $level, group, "{msg}")
                } else {
                    tracing::event!(target: RAFT_LOG_TARGET, $level, group, kv = kv.0.as_str(), "{msg}")
                }
            };
        }
        match record.level() {
            slog::Level::Critical | slog::Level::Error => forward!(Level::ERROR),
            slog::Level::Warning => forward!(Level::WARN),
            slog::Level::Info => forward!(Level::INFO),
            slog::Level::Debug => forward!(Level::DEBUG),
            slog::Level::Trace => forward!(Level::TRACE),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::Mutex;
    use std::time::Duration;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    impl Buf {
        fn lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect()
        }
    }

    /// Runs `f` with a thread-local subscriber configured from `opts`.
    fn capture(opts: &ServerOptions, env: Option<&str>, f: impl FnOnce()) -> Vec<String> {
        let buf = Buf::default();
        let settings = Settings::new(opts, Target::Stderr);
        let layer = layer(&settings, env.map(str::to_string), buf.clone()).unwrap();
        let sub = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(sub, f);
        buf.lines()
    }

    fn opts(debug: bool, trace: bool, logtime: bool) -> ServerOptions {
        ServerOptions {
            debug,
            trace,
            logtime,
            ..ServerOptions::default()
        }
    }

    fn emit_all() {
        tracing::error!(target: "jsserver::t", "e1");
        tracing::warn!(target: "jsserver::t", "w1");
        tracing::info!(target: "jsserver::t", "i1");
        tracing::debug!(target: "jsserver::t", "d1");
        tracing::trace!(target: "jsserver::t", "t1");
        tracing::debug!(target: "hyper::proto", "dep-debug");
        tracing::info!(target: "hyper::proto", "dep-info");
    }

    fn strip_pid(line: &str) -> &str {
        let prefix = format!("[{}] ", std::process::id());
        line.strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("no pid prefix: {line}"))
    }

    #[test]
    fn lines_without_time() {
        let lines = capture(&opts(false, false, false), None, emit_all);
        let got: Vec<&str> = lines.iter().map(|l| strip_pid(l)).collect();
        assert_eq!(got, ["[ERR] e1", "[WRN] w1", "[INF] i1", "[INF] dep-info"]);
    }

    #[test]
    fn levels_follow_debug_and_trace() {
        let got = capture(&opts(true, false, false), None, emit_all);
        assert!(got.iter().any(|l| l.ends_with("[DBG] d1")));
        assert!(!got
            .iter()
            .any(|l| l.contains("[TRC]") || l.contains("dep-debug")));
        // -V alone: traces but not debug lines, as nats-server.
        let got = capture(&opts(false, true, false), None, emit_all);
        assert!(got.iter().any(|l| l.ends_with("[TRC] t1")));
        assert!(!got.iter().any(|l| l.contains("[DBG]")));
        let got = capture(&opts(true, true, false), None, emit_all);
        assert_eq!(got.len(), 6, "{got:?}");
        assert!(!got.iter().any(|l| l.contains("dep-debug")));
    }

    #[test]
    fn env_filter_override() {
        let got = capture(
            &opts(false, false, false),
            Some("hyper=debug,jsserver=warn"),
            emit_all,
        );
        let got: Vec<&str> = got.iter().map(|l| strip_pid(l)).collect();
        assert_eq!(
            got,
            ["[ERR] e1", "[WRN] w1", "[DBG] dep-debug", "[INF] dep-info"]
        );
        assert!(layer(
            &Settings::new(&opts(false, false, false), Target::Stderr),
            Some("=[".into()),
            Buf::default()
        )
        .is_err());
    }

    #[test]
    fn fields_follow_the_message() {
        let got = capture(&opts(false, false, false), None, || {
            let e = io::Error::other("boom");
            let span = tracing::info_span!("conn", cid = 7);
            let _g = span.enter();
            tracing::warn!(error = %e, port = 4222, "listen failed");
        });
        assert_eq!(
            strip_pid(&got[0]),
            "[WRN] listen failed error=boom port=4222 cid=7"
        );
    }

    #[test]
    fn timestamped_line_shape() {
        let got = capture(&opts(false, false, true), None, || tracing::info!("ready"));
        let rest = strip_pid(&got[0]);
        // 2026/11/29 09:20:42.123456 [INF] ready
        let (ts, msg) = rest.split_at(26);
        assert_eq!(msg, " [INF] ready");
        let b = ts.as_bytes();
        for (i, c) in b.iter().enumerate() {
            match i {
                4 | 7 => assert_eq!(*c, b'/', "{ts}"),
                10 => assert_eq!(*c, b' ', "{ts}"),
                13 | 16 => assert_eq!(*c, b':', "{ts}"),
                19 => assert_eq!(*c, b'.', "{ts}"),
                _ => assert!(c.is_ascii_digit(), "{ts}"),
            }
        }
    }

    #[test]
    fn timestamps() {
        let at = |secs: u64, micros: u64| {
            let mut s = String::new();
            let t = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
            write_timestamp(&mut s, t).unwrap();
            s
        };
        assert_eq!(at(0, 0), "1970/01/01 00:00:00.000000");
        // Values checked with `date -u -d @SECS`.
        assert_eq!(at(951_782_400, 5), "2000/02/29 00:00:00.000005");
        assert_eq!(at(1_709_251_199, 999_999), "2024/02/29 23:59:59.999999");
        assert_eq!(at(1_795_944_042, 123_456), "2026/11/29 09:20:42.123456");
        assert_eq!(at(4_102_444_800, 0), "2100/01/01 00:00:00.000000");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn fatal_lines_have_nats_servers_shape() {
        let line = fatal_line(false, "no way");
        assert_eq!(strip_pid(&line), "[FTL] no way\n");
        let line = fatal_line(true, "stop");
        let rest = strip_pid(&line);
        // 2026/11/29 09:20:42.123456 [FTL] stop
        assert_eq!(&rest[26..], " [FTL] stop\n", "{line:?}");
        assert_eq!(&rest[4..5], "/", "{line:?}");

        let dir = std::env::temp_dir().join(format!("jsserver-ftl-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.log");
        std::fs::write(&path, "earlier line\n").unwrap();
        fatal(Some(&path), false, &["first".into(), "second".into()]);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0], "earlier line");
        assert_eq!(strip_pid(lines[1]), "[FTL] first");
        assert_eq!(strip_pid(lines[2]), "[FTL] second");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn init_appends_to_the_log_file() {
        // The only test that installs the global subscriber.
        let dir = std::env::temp_dir().join(format!("jsserver-log-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.log");
        std::fs::write(&path, "earlier line\n").unwrap();
        let o = ServerOptions {
            log_file: Some(path.clone()),
            ..opts(false, false, false)
        };
        let _guard = init(&o).unwrap();
        tracing::info!("hello file");
        // Written through at once: visible to a reader without any flush.
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "earlier line");
        assert_eq!(strip_pid(lines[1]), "[INF] hello file");
        // Reopen: the file was rotated away; lines go to a fresh one at the same path.
        let rotated = dir.join("server.log.1");
        std::fs::rename(&path, &rotated).unwrap();
        _guard.reopen();
        tracing::info!("after reopen");
        let fresh = std::fs::read_to_string(&path).unwrap();
        let fresh: Vec<&str> = fresh.lines().map(strip_pid).collect();
        assert_eq!(fresh, ["[INF] File log re-opened", "[INF] after reopen"]);
        assert!(!std::fs::read_to_string(&rotated)
            .unwrap()
            .contains("after reopen"));
        // A reload: debug lines on, another file.
        let moved = dir.join("moved.log");
        tracing::debug!(target: "jsserver::t", "not shown");
        _guard
            .apply(&ServerOptions {
                log_file: Some(moved.clone()),
                debug: true,
                ..opts(false, false, false)
            })
            .unwrap();
        tracing::debug!(target: "jsserver::t", "shown");
        let moved_text = std::fs::read_to_string(&moved).unwrap();
        let moved_lines: Vec<&str> = moved_text.lines().map(strip_pid).collect();
        assert_eq!(moved_lines, ["[DBG] shown"]);
        assert!(!std::fs::read_to_string(&path).unwrap().contains("shown"));
        assert!(_guard
            .apply(&ServerOptions {
                log_file: Some("/nonexistent-dir/x.log".into()),
                ..ServerOptions::default()
            })
            .is_err());
        assert!(init(&o).is_err(), "a second init must fail");
        let _ = std::fs::remove_dir_all(&dir);
        let bad = ServerOptions {
            log_file: Some("/nonexistent-dir/x.log".into()),
            ..ServerOptions::default()
        };
        let e = init(&bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error opening file: open /nonexistent-dir/x.log: no such file or directory"
        );
    }

    #[test]
    fn raft_records_reach_tracing() {
        let logger = raft_logger("S-ORDERS");
        let lines = capture(&opts(true, true, false), None, || {
            let node = logger.new(slog::o!("raft_id" => 1));
            slog::info!(node, "became leader at term {}", 2; "term" => 2);
            slog::debug!(node, "sending heartbeat");
            // Compiled out by slog's default max level (see raft_logger): never arrives.
            slog::trace!(logger, "tick");
            slog::warn!(logger, "dropping message"; "to" => 3);
            slog::error!(logger, "log corrupt");
            slog::crit!(logger, "fatal");
        });
        let got: Vec<&str> = lines.iter().map(|l| strip_pid(l)).collect();
        assert_eq!(
            got,
            [
                r#"[INF] became leader at term 2 group="S-ORDERS" kv="term=2 raft_id=1""#,
                r#"[DBG] sending heartbeat group="S-ORDERS" kv="raft_id=1""#,
                r#"[WRN] dropping message group="S-ORDERS" kv="to=3""#,
                r#"[ERR] log corrupt group="S-ORDERS""#,
                r#"[ERR] fatal group="S-ORDERS""#,
            ]
        );
        // Without -D/-V, raft-rs's debug and trace records are filtered like the server's.
        let lines = capture(&opts(false, false, false), None, || {
            slog::debug!(logger, "quiet");
            slog::info!(logger, "loud");
        });
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].ends_with(r#"[INF] loud group="S-ORDERS""#),
            "{lines:?}"
        );
    }
}
