//! Command line of `jsserver`, accepting `nats-server`'s Go-style flags.
//!
//! Test harnesses start `nats-server` by name with the flags of Go's `flag`
//! package (see nats-server's `server/opts.go`, `ConfigureOptions`), so this
//! module accepts the same spellings:
//!
//! * one or two dashes alike: `-port 4222`, `--port 4222`;
//! * a value as the next argument or after `=`: `-p 4222`, `-p=4222`, `--sd=DIR`;
//! * boolean flags take no separate value, only `=`: `-js`, `--js=false`, `-T=false`;
//! * negative numbers as values: `-p -1`, `-m -1` (`-1` = pick a free port).
//!
//! This is done by a small normalisation step in front of clap: a single-dash
//! argument whose name has more than one character becomes a double-dash one
//! (`-js` → `--js`, `-sd=DIR` → `--sd=DIR`, `-DV` → `--DV`), and every Go
//! spelling is a clap long name or alias.
//!
//! The flags of [`crate::options::UNSUPPORTED`] (`-no_advertise`) parse as hidden flags into
//! [`Cli::refused`], so that the server can refuse them with a clear fatal
//! error (fail closed) instead of a generic "unexpected argument".
//!
//! Flags given are `Some(..)` in [`Cli`]; nothing is defaulted here, so that
//! [`crate::options::ServerOptions::load`] can let flags win over the config
//! file and the file over the defaults.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{Arg, ArgAction, CommandFactory, FromArgMatches, Parser};

use crate::options::UNSUPPORTED;

/// The version text printed after `jsserver: ` by `-v` / `--version`, e.g.
/// `v0.1.0 (nats-server compatible 2.14.0)`; the second number is
/// [`NATS_VERSION`](crate::server::NATS_VERSION).
pub const VERSION: &str = concat!(
    "v",
    env!("CARGO_PKG_VERSION"),
    " (nats-server compatible 2.14.0)"
);

/// Parsed command line. Every option is `None` when its flag was not given.
///
/// Flag spellings follow nats-server's `ConfigureOptions` (opts.go); each may
/// be written with one or two dashes.
#[derive(Parser, Debug, Clone, Default, PartialEq, Eq)]
#[command(
    name = "jsserver",
    display_name = "jsserver:",
    version = VERSION,
    about = "A JetStream server speaking the NATS client protocol (a drop-in for nats-server).",
    // Without this, clap's derive would show the struct's doc comment (written for this
    // crate's developers) as the long `--help` text.
    long_about = "A JetStream server speaking the NATS client protocol (a drop-in for nats-server).\n\n\
                  Flags follow nats-server's spellings, with one or two dashes: -p 4222, \
                  --port=4222, -js, -sd DIR.",
    disable_version_flag = true,
    disable_help_flag = true,
    // Go's flag package lets a flag repeat, the last value winning; harnesses rely on it.
    args_override_self = true,
    // Go's flag package does not infer abbreviations either.
    infer_long_args = false,
)]
pub struct Cli {
    /// Network host to listen on (`-a`, `-addr`, `-net`). Default 127.0.0.1.
    #[arg(
        short = 'a',
        long = "addr",
        visible_alias = "net",
        value_name = "HOST",
        allow_hyphen_values = true
    )]
    pub addr: Option<String>,

    /// Client port to listen on (`-p`, `-port`). `-1` picks a free port,
    /// `0` means the default 4222 (as nats-server).
    #[arg(short = 'p', long = "port", value_name = "PORT", allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-1..=65535))]
    pub port: Option<i32>,

    /// Server name (`-n`, `-name`, `-server_name`).
    #[arg(
        short = 'n',
        long = "server_name",
        visible_alias = "name",
        value_name = "NAME",
        allow_hyphen_values = true
    )]
    pub server_name: Option<String>,

    /// Accept routes from the other servers of a cluster at this URL
    /// (`-cluster`, `-cluster_listen`), e.g. `nats://127.0.0.1:6222`
    /// (port `-1`: a free one).
    #[arg(
        long = "cluster",
        visible_alias = "cluster_listen",
        value_name = "URL",
        allow_hyphen_values = true
    )]
    pub cluster: Option<String>,

    /// Routes to dial, comma-separated (`-routes`), e.g.
    /// `nats-route://127.0.0.1:6223,nats-route://127.0.0.1:6224`.
    #[arg(long = "routes", value_name = "URLS", allow_hyphen_values = true)]
    pub routes: Option<String>,

    /// The cluster's name (`-cluster_name`); peers with another name are refused.
    #[arg(long = "cluster_name", value_name = "NAME", allow_hyphen_values = true)]
    pub cluster_name: Option<String>,

    /// The route URL given to the other servers of the cluster instead of the
    /// cluster listen address (`-cluster_advertise`), `host:port` or `host`.
    #[arg(
        long = "cluster_advertise",
        value_name = "HOST:PORT",
        allow_hyphen_values = true
    )]
    pub cluster_advertise: Option<String>,

    /// Retries of a route learned from a peer (`-connect_retries`).
    #[arg(long = "connect_retries", value_name = "N")]
    pub connect_retries: Option<u32>,

    /// Enable JetStream (`-js`, `-jetstream`). Off unless this flag or the
    /// config file enables it, as nats-server; `--js=false` keeps it off.
    #[arg(long = "js", visible_alias = "jetstream", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub jetstream: Option<bool>,

    /// JetStream storage directory (`-sd`, `-store_dir`); files go under
    /// `<DIR>/jetstream` as with nats-server.
    #[arg(
        long = "store_dir",
        visible_alias = "sd",
        value_name = "DIR",
        allow_hyphen_values = true
    )]
    pub store_dir: Option<PathBuf>,

    /// Configuration file (`-c`, `-config`).
    #[arg(
        short = 'c',
        long = "config",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    pub config: Option<PathBuf>,

    /// File to write log lines to, appended (`-l`, `-log`). Default stderr.
    #[arg(
        short = 'l',
        long = "log",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    pub log_file: Option<PathBuf>,

    /// File to write the process id to (`-P`, `-pid`).
    #[arg(
        short = 'P',
        long = "pid",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    pub pid_file: Option<PathBuf>,

    /// Send a signal to a running server and exit (`-sl`, `-signal`):
    /// `<signal>[=<pid or pid file>]`, signal one of `ldm`, `stop`, `quit`,
    /// `term`, `reopen`, `reload`; without a pid, to the one running
    /// `jsserver`.
    #[arg(
        long = "signal",
        visible_alias = "sl",
        value_name = "SIGNAL[=PID]",
        allow_hyphen_values = true
    )]
    pub signal: Option<String>,

    /// HTTP monitoring port (`-m`, `-http_port`). `-1` picks a free port;
    /// `0` (the default) disables monitoring.
    #[arg(short = 'm', long = "http_port", visible_alias = "monitor_port", value_name = "PORT",
          allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-1..=65535))]
    pub http_port: Option<i32>,

    /// HTTPS monitoring port (`-ms`, `-https_port`), with the `--tls*` certificate. `-1`
    /// picks a free port.
    #[arg(long = "https_port", visible_alias = "ms", value_name = "PORT", allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-1..=65535))]
    pub https_port: Option<i32>,

    /// Directory in which to write `<exe>_<pid>.ports` (`-ports_file_dir`).
    #[arg(
        long = "ports_file_dir",
        value_name = "DIR",
        allow_hyphen_values = true
    )]
    pub ports_file_dir: Option<PathBuf>,

    /// Maximum message payload in bytes; size suffixes as in the config file
    /// (`1MB` = 1 MiB, `1K` = 1000). Not a nats-server flag.
    #[arg(long = "max_payload", value_name = "SIZE",
          value_parser = parse_size_arg)]
    pub max_payload: Option<i64>,

    /// Enable debug logging (`-D`, `-debug`).
    #[arg(short = 'D', long = "debug", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub debug: Option<bool>,

    /// Enable trace logging (`-V`, `-trace`; `-VV` is taken as `-V`).
    #[arg(short = 'V', long = "trace", visible_alias = "VV", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub trace: Option<bool>,

    /// Enable debug and trace logging (`-DV`; `-DVV` is taken as `-DV`).
    #[arg(long = "DV", visible_alias = "DVV", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub debug_and_trace: Option<bool>,

    /// Timestamp log lines (`-T`, `-logtime`); default true, `-T=false` turns
    /// timestamps off.
    #[arg(short = 'T', long = "logtime", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub logtime: Option<bool>,

    /// Username required for connections (`-user`).
    #[arg(long = "user", value_name = "USER", allow_hyphen_values = true)]
    pub user: Option<String>,

    /// Password required for connections (`-pass`), plain or bcrypt.
    #[arg(long = "pass", value_name = "PASSWORD", allow_hyphen_values = true)]
    pub pass: Option<String>,

    /// Authorization token required for connections (`-auth`).
    #[arg(long = "auth", value_name = "TOKEN", allow_hyphen_values = true)]
    pub auth: Option<String>,

    /// Enable TLS for client connections (`-tls`), with `--tlscert` and `--tlskey`;
    /// `-tls=false` turns off the config file's `tls` block (and every other `-tls*` flag).
    #[arg(long = "tls", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub tls: Option<bool>,

    /// Enable TLS and require verified client certificates (`-tlsverify`).
    #[arg(long = "tlsverify", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub tls_verify: Option<bool>,

    /// Server certificate file, PEM (`-tlscert`).
    #[arg(long = "tlscert", value_name = "FILE", allow_hyphen_values = true)]
    pub tls_cert: Option<String>,

    /// Private key of the server certificate, PEM (`-tlskey`).
    #[arg(long = "tlskey", value_name = "FILE", allow_hyphen_values = true)]
    pub tls_key: Option<String>,

    /// Authorities client certificates must chain to, PEM (`-tlscacert`).
    #[arg(long = "tlscacert", value_name = "FILE", allow_hyphen_values = true)]
    pub tls_ca_cert: Option<String>,

    /// Test the configuration file and exit (`-t`), as nats-server: with `-c` and every
    /// other flag the server would start with, load and check it as at start-up (unknown
    /// keys, values, refused settings, TLS files), then print `jsserver: configuration file
    /// FILE is valid (sha256:...)` and exit 0, or print the error(s) and exit 1.
    #[arg(short = 't', value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub check_config: Option<bool>,

    /// Show this message (`-h`, `-help`). Handled inside [`parse_args`]
    /// (as an `Err` of kind `DisplayHelp`); always `None` in a parsed `Cli`.
    #[arg(short = 'h', long = "help", action = clap::ArgAction::Help)]
    pub help: Option<bool>,

    /// Print version information (`-v`, `-version`). Handled inside
    /// [`parse_args`] (as an `Err` of kind `DisplayVersion`); always `None`
    /// in a parsed `Cli`.
    #[arg(short = 'v', long = "version", action = clap::ArgAction::Version)]
    pub version: Option<bool>,

    /// The refused flags given (see [`crate::options::UNSUPPORTED`]: the
    /// cluster flags, which jsserver does not enforce yet), by name
    /// without dashes, in command-line order. [`parse_args`] accepts them,
    /// with their values, so that [`crate::options::ServerOptions::load`]
    /// can stop the server with a clear fatal error rather than clap's
    /// "unexpected argument".
    #[arg(skip)]
    pub refused: Vec<String>,

    /// nats-server also accepts the commands `version` and `help` as a
    /// positional argument; anything else is an error. Handled inside
    /// [`parse_args`]; always `None` in a parsed `Cli`.
    #[arg(value_name = "COMMAND", hide = true)]
    pub command: Option<String>,
}

/// Parses a size flag value: a plain integer or one with a config-file size
/// suffix (see [`crate::conf::parse_size`]).
fn parse_size_arg(s: &str) -> Result<i64, String> {
    crate::conf::parse_size(s).ok_or_else(|| format!("invalid size {s:?}"))
}

/// Parses `args` (which include the program name as `argv[0]`) into a [`Cli`].
///
/// Accepts Go-style flags (see the module doc). Errors are clap errors:
/// `ErrorKind::DisplayHelp` / `DisplayVersion` for `-h` / `-v` (and the
/// positional commands `help` / `version`), otherwise a usage error (unknown
/// flag, missing or bad value). Pass any error to [`exit_with`] to print it and
/// exit like nats-server.
pub fn parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cmd = command();
    let args = normalize(&cmd, args.into_iter().map(Into::into).collect());
    let matches = cmd.clone().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.with_cmd(&cmd))?;
    let mut refused: Vec<(usize, &str)> = UNSUPPORTED
        .iter()
        .flat_map(|r| r.flags)
        .filter_map(|f| Some((matches.index_of(f.name)?, f.name)))
        .collect();
    refused.sort_unstable();
    cli.refused = refused.into_iter().map(|(_, n)| n.to_string()).collect();
    match cli.command.take().as_deref() {
        None => Ok(cli),
        // Let clap render these exactly as for `-v` / `-h`.
        Some("version") => Err(command_error(&cmd, "--version")),
        Some("help") => Err(command_error(&cmd, "--help")),
        Some(other) => Err(cmd.clone().error(
            ErrorKind::InvalidSubcommand,
            format!("unrecognized command: {other:?}"),
        )),
    }
}

/// [`Cli`]'s clap command plus a hidden argument for every refused flag of
/// [`UNSUPPORTED`], taking a value as its Go flag does (a boolean only after
/// `=`), so that the flag and its value parse and land in [`Cli::refused`].
fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for flag in UNSUPPORTED.iter().flat_map(|r| r.flags) {
        let arg = Arg::new(flag.name)
            .long(flag.name)
            .hide(true)
            .action(ArgAction::Set);
        let arg = if flag.boolean {
            arg.num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
        } else {
            arg.num_args(1).allow_hyphen_values(true)
        };
        cmd = cmd.arg(arg);
    }
    cmd
}

fn command_error(cmd: &clap::Command, flag: &str) -> clap::Error {
    match cmd.clone().try_get_matches_from(["jsserver", flag]) {
        Err(e) => e,
        Ok(_) => cmd
            .clone()
            .error(ErrorKind::InvalidValue, "internal: no display"),
    }
}

/// Prints a [`parse_args`] error and exits the process: help and version go
/// to stdout with exit code 0; any other error (unknown flag, bad value) goes
/// to stderr with exit code 1, as nats-server does.
pub fn exit_with(err: clap::Error) -> ! {
    let code = match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
        _ => 1,
    };
    let _ = err.print();
    std::process::exit(code)
}

/// Turns Go-style single-dash long flags into clap's double-dash form,
/// leaving flag values (the argument after a value-taking flag) untouched.
fn normalize(cmd: &clap::Command, args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    if let Some(argv0) = it.next() {
        out.push(argv0);
    }
    let mut value_next = false;
    while let Some(arg) = it.next() {
        if value_next {
            value_next = false;
            out.push(arg);
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s == "--" {
            out.push(arg);
            out.extend(it);
            break;
        }
        let (body, is_long) = if let Some(rest) = s.strip_prefix("--") {
            (rest, true)
        } else if let Some(rest) = s.strip_prefix('-') {
            if rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_digit()) {
                out.push(arg);
                continue;
            }
            (
                rest,
                rest.split('=')
                    .next()
                    .is_some_and(|n| n.chars().count() > 1),
            )
        } else {
            // Positional; Go stops flag parsing here, and so does clap's
            // positional handling for our single optional positional.
            out.push(arg);
            continue;
        };
        let (name, has_eq) = match body.split_once('=') {
            Some((n, _)) => (n, true),
            None => (body, false),
        };
        value_next = !has_eq && takes_separate_value(cmd, name, is_long);
        if is_long {
            out.push(OsString::from(format!("--{body}")));
        } else {
            out.push(arg);
        }
    }
    out
}

/// Whether the flag `name` consumes the next argument as its value.
fn takes_separate_value(cmd: &clap::Command, name: &str, is_long: bool) -> bool {
    cmd.get_arguments()
        .find(|a| {
            if is_long {
                a.get_long() == Some(name)
                    || a.get_all_aliases().is_some_and(|al| al.contains(&name))
            } else {
                let mut chars = name.chars();
                let c = chars.next();
                chars.next().is_none() && c.is_some() && a.get_short() == c
            }
        })
        .is_some_and(|a| a.get_action().takes_values() && !a.is_require_equals_set())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        let mut v = vec!["nats-server"];
        v.extend_from_slice(args);
        match parse_args(v) {
            Ok(c) => c,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    fn parse_err(args: &[&str]) -> clap::Error {
        let mut v = vec!["nats-server"];
        v.extend_from_slice(args);
        parse_args(v).expect_err("expected an error")
    }

    #[test]
    fn a_repeated_flag_keeps_its_last_value_like_go() {
        let cli = parse(&[
            "-sd",
            "/a",
            "--store_dir=/b",
            "-p",
            "1",
            "-p",
            "2",
            "-js",
            "-js",
        ]);
        assert_eq!(cli.store_dir.as_deref(), Some(std::path::Path::new("/b")));
        assert_eq!(cli.port, Some(2));
    }

    #[test]
    fn no_flags_is_all_none() {
        assert_eq!(parse(&[]), Cli::default());
    }

    #[test]
    fn port_forms() {
        assert_eq!(parse(&["-p", "-1"]).port, Some(-1));
        assert_eq!(parse(&["-p", "4222"]).port, Some(4222));
        assert_eq!(parse(&["-p=4333"]).port, Some(4333));
        assert_eq!(parse(&["--port=4222"]).port, Some(4222));
        assert_eq!(parse(&["-port", "5000"]).port, Some(5000));
        assert_eq!(parse(&["--port", "-1"]).port, Some(-1));
        assert_eq!(parse(&["-port=-1"]).port, Some(-1));
    }

    #[test]
    fn bad_port_values() {
        assert_eq!(parse_err(&["-p", "x"]).kind(), ErrorKind::ValueValidation);
        assert_eq!(
            parse_err(&["-p", "70000"]).kind(),
            ErrorKind::ValueValidation
        );
        assert_eq!(parse_err(&["-p", "-2"]).kind(), ErrorKind::ValueValidation);
        assert_eq!(parse_err(&["-p"]).kind(), ErrorKind::InvalidValue);
    }

    #[test]
    fn store_dir_forms() {
        let want = Some(PathBuf::from("/tmp/js"));
        assert_eq!(parse(&["-sd=/tmp/js"]).store_dir, want);
        assert_eq!(parse(&["-sd", "/tmp/js"]).store_dir, want);
        assert_eq!(parse(&["--sd", "/tmp/js"]).store_dir, want);
        assert_eq!(parse(&["--store_dir", "/tmp/js"]).store_dir, want);
        assert_eq!(parse(&["-store_dir=/tmp/js"]).store_dir, want);
    }

    #[test]
    fn jetstream_forms() {
        assert_eq!(parse(&["-js"]).jetstream, Some(true));
        assert_eq!(parse(&["--js"]).jetstream, Some(true));
        assert_eq!(parse(&["-jetstream"]).jetstream, Some(true));
        assert_eq!(parse(&["--jetstream=false"]).jetstream, Some(false));
        assert_eq!(parse(&["-js=false"]).jetstream, Some(false));
        assert_eq!(parse(&["-js=true"]).jetstream, Some(true));
        // A bool flag does not eat the next argument.
        let c = parse(&["-js", "-p", "1234"]);
        assert_eq!((c.jetstream, c.port), (Some(true), Some(1234)));
    }

    #[test]
    fn debug_trace_forms() {
        let c = parse(&["-DV"]);
        assert_eq!(
            (c.debug, c.trace, c.debug_and_trace),
            (None, None, Some(true))
        );
        assert_eq!(parse(&["--DV"]).debug_and_trace, Some(true));
        assert_eq!(parse(&["-DVV"]).debug_and_trace, Some(true));
        assert_eq!(parse(&["-D"]).debug, Some(true));
        assert_eq!(parse(&["-debug"]).debug, Some(true));
        assert_eq!(parse(&["-V"]).trace, Some(true));
        assert_eq!(parse(&["-VV"]).trace, Some(true));
        assert_eq!(parse(&["--trace"]).trace, Some(true));
        let c = parse(&["-D", "-V"]);
        assert_eq!((c.debug, c.trace), (Some(true), Some(true)));
        assert_eq!(parse(&["-T=false"]).logtime, Some(false));
        assert_eq!(parse(&["-T"]).logtime, Some(true));
        assert_eq!(parse(&["-logtime=false"]).logtime, Some(false));
        assert_eq!(parse(&["--logtime=0"]).logtime, Some(false));
    }

    #[test]
    fn addr_and_monitoring() {
        assert_eq!(
            parse(&["-a", "127.0.0.1"]).addr.as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            parse(&["-addr", "0.0.0.0"]).addr.as_deref(),
            Some("0.0.0.0")
        );
        assert_eq!(parse(&["--net=::1"]).addr.as_deref(), Some("::1"));
        assert_eq!(parse(&["-m", "8222"]).http_port, Some(8222));
        assert_eq!(parse(&["-m", "-1"]).http_port, Some(-1));
        assert_eq!(parse(&["-http_port=8223"]).http_port, Some(8223));
    }

    #[test]
    fn files() {
        let c = parse(&["-l", "/tmp/a.log", "-P", "/tmp/a.pid", "-c", "/tmp/a.conf"]);
        assert_eq!(c.log_file, Some(PathBuf::from("/tmp/a.log")));
        assert_eq!(c.pid_file, Some(PathBuf::from("/tmp/a.pid")));
        assert_eq!(c.config, Some(PathBuf::from("/tmp/a.conf")));
        assert_eq!(
            parse(&["-sl", "ldm=/tmp/a.pid"]).signal.as_deref(),
            Some("ldm=/tmp/a.pid")
        );
        assert_eq!(
            parse(&["--signal=reopen"]).signal.as_deref(),
            Some("reopen")
        );
        assert_eq!(
            parse(&["-signal", "term=12"]).signal.as_deref(),
            Some("term=12")
        );
        let c = parse(&["--log", "x.log", "-pid=x.pid", "--config", "x.conf"]);
        assert_eq!(c.log_file, Some(PathBuf::from("x.log")));
        assert_eq!(c.pid_file, Some(PathBuf::from("x.pid")));
        assert_eq!(c.config, Some(PathBuf::from("x.conf")));
        let c = parse(&["-ports_file_dir", "/tmp/p"]);
        assert_eq!(c.ports_file_dir, Some(PathBuf::from("/tmp/p")));
    }

    #[test]
    fn names_and_sizes() {
        assert_eq!(parse(&["-n", "s1"]).server_name.as_deref(), Some("s1"));
        assert_eq!(parse(&["-name", "s2"]).server_name.as_deref(), Some("s2"));
        assert_eq!(
            parse(&["--server_name=s3"]).server_name.as_deref(),
            Some("s3")
        );
        assert_eq!(parse(&["--max_payload", "2MB"]).max_payload, Some(2 << 20));
        assert_eq!(parse(&["-max_payload=1000"]).max_payload, Some(1000));
        assert_eq!(
            parse_err(&["--max_payload", "lots"]).kind(),
            ErrorKind::ValueValidation
        );
    }

    #[test]
    fn a_typical_harness_line() {
        let c = parse(&[
            "-js",
            "-sd",
            "/tmp/x",
            "-p",
            "-1",
            "-a",
            "127.0.0.1",
            "-DV",
            "-m",
            "-1",
        ]);
        assert_eq!(c.jetstream, Some(true));
        assert_eq!(c.store_dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(c.port, Some(-1));
        assert_eq!(c.addr.as_deref(), Some("127.0.0.1"));
        assert_eq!(c.debug_and_trace, Some(true));
        assert_eq!(c.http_port, Some(-1));
    }

    #[test]
    fn unknown_flags_are_errors() {
        assert_eq!(parse_err(&["-bogus"]).kind(), ErrorKind::UnknownArgument);
        assert_eq!(parse_err(&["--bogus=1"]).kind(), ErrorKind::UnknownArgument);
        assert_eq!(parse_err(&["-x"]).kind(), ErrorKind::UnknownArgument);
        assert_eq!(parse_err(&["stop"]).kind(), ErrorKind::InvalidSubcommand);
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse_err(&["-h"]).kind(), ErrorKind::DisplayHelp);
        assert_eq!(parse_err(&["-help"]).kind(), ErrorKind::DisplayHelp);
        assert_eq!(parse_err(&["help"]).kind(), ErrorKind::DisplayHelp);
        let e = parse_err(&["-v"]);
        assert_eq!(e.kind(), ErrorKind::DisplayVersion);
        assert_eq!(
            e.to_string().trim_end(),
            format!(
                "jsserver: v{} (nats-server compatible 2.14.0)",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(parse_err(&["--version"]).kind(), ErrorKind::DisplayVersion);
        assert_eq!(parse_err(&["version"]).kind(), ErrorKind::DisplayVersion);
        assert!(VERSION.contains(crate::server::NATS_VERSION));
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
        command().debug_assert();
    }

    #[test]
    fn refused_flags_parse_with_their_values() {
        let c = parse(&["-p", "4333", "--no_advertise=false", "-js"]);
        assert_eq!(c.refused, ["no_advertise"]);
        // The other flags still parse around them.
        assert_eq!((c.port, c.jetstream), (Some(4333), Some(true)));
        // A repeated refused flag is named once.
        assert_eq!(
            parse(&["-no_advertise", "--no_advertise=true"]).refused,
            ["no_advertise"]
        );
        // The cluster flags are ordinary flags now.
        let c = parse(&[
            "--cluster",
            "nats://127.0.0.1:6222",
            "-routes=nats://a:1,nats://b:2",
            "-cluster_name",
            "C",
            "-connect_retries",
            "3",
            "-cluster_advertise",
            "10.0.0.5:7222",
        ]);
        assert!(c.refused.is_empty());
        assert_eq!(
            (
                c.cluster.as_deref(),
                c.routes.as_deref(),
                c.cluster_name.as_deref(),
                c.connect_retries,
                c.cluster_advertise.as_deref()
            ),
            (
                Some("nats://127.0.0.1:6222"),
                Some("nats://a:1,nats://b:2"),
                Some("C"),
                Some(3),
                Some("10.0.0.5:7222")
            )
        );
        assert_eq!(
            parse(&["-cluster_listen", "nats://h:1"]).cluster.as_deref(),
            Some("nats://h:1")
        );
        // The auth flags are ordinary flags now.
        let c = parse(&["-user", "u", "--pass=p", "-auth", "t"]);
        assert!(c.refused.is_empty());
        assert_eq!(
            (c.user.as_deref(), c.pass.as_deref(), c.auth.as_deref()),
            (Some("u"), Some("p"), Some("t"))
        );
        // Every flag of the table parses, alone.
        for flag in UNSUPPORTED.iter().flat_map(|r| r.flags) {
            let dashed = format!("-{}", flag.name);
            let args: Vec<&str> = if flag.boolean {
                vec![&dashed]
            } else {
                vec![&dashed, "x"]
            };
            assert_eq!(parse(&args).refused, [flag.name], "{args:?}");
        }
        assert!(parse(&["-js"]).refused.is_empty());
        // Still hidden from --help.
        let help = parse_err(&["-h"]).to_string();
        assert!(!help.contains("no_advertise"), "{help}");
        assert!(help.contains("--cluster_advertise"), "{help}");
        assert!(help.contains("--cluster_name"), "{help}");
        // The TLS flags are ordinary flags now.
        assert!(help.contains("--tlscert"), "{help}");
        let c = parse(&[
            "-tls",
            "-tlscert",
            "c.pem",
            "--tlskey=k.pem",
            "-tlsverify=false",
        ]);
        assert!(c.refused.is_empty());
        assert_eq!(
            (
                c.tls,
                c.tls_cert.as_deref(),
                c.tls_key.as_deref(),
                c.tls_verify
            ),
            (Some(true), Some("c.pem"), Some("k.pem"), Some(false))
        );
    }
}
