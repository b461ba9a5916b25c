//! `jsctl`: the `nats` CLI's everyday commands (pub, sub, request, stream and consumer
//! management, pulling from a consumer) on `jsclient`. See `jsctl --help` and
//! `docs/tutorial.md`.

#[path = "../cli/mod.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
