//! Every byte `jsctl` writes goes through here: results to stdout ([`out!`], [`outln!`]),
//! progress and errors to stderr ([`errln!`]).
//!
//! A reader that goes away (`jsctl stream ls | head -1`, a closed terminal) ends `jsctl`
//! quietly: the write that finds stdout closed (`EPIPE`) exits at once with
//! [`BROKEN_PIPE_STATUS`] and no message, as the `nats` CLI and the usual Unix tools (killed
//! by `SIGPIPE`) do. `print!` would panic there instead. Any other failure to write stdout
//! (a full disk) is one `jsctl: error: …` line on stderr and exit status 1. Writes to stderr
//! never fail the command: their errors are ignored.
//!
//! Each write is flushed, so a reader sees every result as soon as it is printed (`jsctl sub`
//! into a pipe) and a closed pipe is noticed at the write that meets it.

use std::io::Write as _;

/// The exit status when stdout is closed under `jsctl`: 128 + `SIGPIPE` (13), what a shell
/// reports for a program that `SIGPIPE` ended (as the `nats` CLI, a Go program, is ended).
/// Rust ignores `SIGPIPE`, so `jsctl` exits with that status itself.
pub const BROKEN_PIPE_STATUS: i32 = 141;

/// Writes `args` to stdout and flushes; exits the process on a write error (see the module
/// doc).
pub fn stdout(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(err) = out.write_fmt(args).and_then(|()| out.flush()) {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE_STATUS);
        }
        stderr(format_args!("jsctl: error: writing the output: {err}\n"));
        std::process::exit(1);
    }
}

/// Writes `args` to stderr, ignoring errors (a closed stderr must not stop the command).
pub fn stderr(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.flush());
}

/// `print!` to stdout through [`stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::stdout(format_args!($($arg)*))
    };
}

/// `println!` to stdout through [`stdout`].
macro_rules! outln {
    () => {
        $crate::cli::output::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`stderr`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::output::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, out, outln};
