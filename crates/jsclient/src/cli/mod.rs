//! `jsctl`: a command line for NATS and JetStream on `jsclient`, with the commands, flags and
//! output of the `nats` CLI for the parts it covers (publish, subscribe, request, streams,
//! consumers). Not part of the library: `src/bin/jsctl.rs` includes it.

mod args;
mod commands;
mod format;
mod output;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use jsclient::jetstream::consumer::ConsumerError;
use jsclient::jetstream::message::AckError;
use jsclient::jetstream::{JetStreamError, PublishError};
use jsclient::{ClientError, ConnectError, RequestError};

pub use args::Cli;

/// A failed command: one line for the user.
#[derive(Debug)]
pub struct CliError(pub String);

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Result of a command.
pub type CliResult<T = ()> = Result<T, CliError>;

impl From<ConnectError> for CliError {
    fn from(e: ConnectError) -> Self {
        match e {
            ConnectError::InvalidUrl { url } => CliError(format!(
                "invalid server URL {url:?} (expected nats://host:port, tls://host:port, host:port or host)"
            )),
            ConnectError::NoServers => CliError("no server URL given".into()),
            e @ ConnectError::Credentials { .. } => CliError(e.to_string()),
            e => CliError(format!("server unreachable: {e}")),
        }
    }
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        CliError(e.to_string())
    }
}

impl From<RequestError> for CliError {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::NoResponders => CliError("no responders available for request".into()),
            e => CliError(e.to_string()),
        }
    }
}

impl From<JetStreamError> for CliError {
    fn from(e: JetStreamError) -> Self {
        match e {
            JetStreamError::Api(api) => CliError(api.to_string()),
            JetStreamError::Request(RequestError::NoResponders) => {
                CliError("JetStream not enabled (no responders on the JetStream API)".into())
            }
            JetStreamError::Request(RequestError::TimedOut) => {
                CliError("JetStream API request timed out".into())
            }
            e => CliError(e.to_string()),
        }
    }
}

impl From<PublishError> for CliError {
    fn from(e: PublishError) -> Self {
        match e {
            // The cause of a 503 is named (`Context::no_responders_cause`): no stream, no
            // leader yet, JetStream off; each `Display`s as the user should read it.
            PublishError::Api(api) => CliError(api.to_string()),
            e => CliError(e.to_string()),
        }
    }
}

impl From<ConsumerError> for CliError {
    fn from(e: ConsumerError) -> Self {
        CliError(e.to_string())
    }
}

impl From<AckError> for CliError {
    fn from(e: AckError) -> Self {
        CliError(format!("acknowledgement failed: {e}"))
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError(e.to_string())
    }
}

/// Parses the command line, runs the command, prints an error as one line on stderr
/// (`jsctl: error: …`) and returns the exit code: 0 on success, 1 on error (2 for usage
/// errors, also one line).
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            output::errln!("jsctl: error: {} (see --help)", usage_error_line(&e));
            return ExitCode::from(2);
        }
        Err(e) => e.exit(), // --help, --version
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            output::errln!("jsctl: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            output::errln!("jsctl: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Clap's error message on one line: without the `error: ` prefix, the usage block and tips.
fn usage_error_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let message = text.split("\n\n").next().unwrap_or_default();
    let message = message.strip_prefix("error: ").unwrap_or(message);
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Clap value parser for a count that must be at least 1.
fn positive_count(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Clap value parser for durations (`500ms`, `30s`, `2m`, `1h`).
fn duration_arg(s: &str) -> Result<Duration, String> {
    format::parse_duration(s)
}
