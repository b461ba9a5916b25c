//! The `jsserver` binary: flags and config in, a running server out.
//!
//! Accepts nats-server's flags (see `jsserver --help`) so test harnesses that start
//! `nats-server` can start this instead, and logs the same start-up lines they wait for.
//!
//! Whatever stops the server from starting (a config error, a port in use, an unusable or
//! locked store directory, a pid file that cannot be written...) ends it the one way
//! nats-server's `Fatalf` does: one `[FTL]` line, in nats-server's words where it has the
//! case, on stderr and in the log file when there is one, then exit status 1 ([`die`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jsserver::cli;
use jsserver::jetstream::store_dir::StoreDir;
use jsserver::jetstream::JetStream;
use jsserver::options::{OptionsError, ServerOptions};
use jsserver::os_error::go_error;
use jsserver::server::{Server, NATS_VERSION};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing::{info, warn};

/// A start-up failure: the text of its `[FTL]` line.
#[derive(Debug)]
struct Fatal(String);

/// Logs `message` as one `[FTL]` line (stderr, and `log_file` if any) and exits with
/// status 1, as nats-server's `Fatalf`.
fn die(log_file: Option<&Path>, logtime: bool, message: &str) -> ! {
    // One line: a message with line breaks (a chained error) is joined.
    let line = message.lines().collect::<Vec<_>>().join(" ");
    jsserver::logging::fatal(log_file, logtime, &[line]);
    std::process::exit(1)
}

fn main() {
    let cli = cli::parse_args(std::env::args_os()).unwrap_or_else(|err| cli::exit_with(err));
    // `--signal`: send it and exit, before any config is read (as nats-server).
    if let Some(arg) = &cli.signal {
        match jsserver::signal::send(arg) {
            Ok(()) => std::process::exit(0),
            Err(err) => {
                eprintln!("jsserver: {err}");
                std::process::exit(1);
            }
        }
    }
    // `-t`: check the config and exit (as nats-server, after `--signal`).
    if cli.check_config == Some(true) {
        std::process::exit(jsserver::options::run_check_config(&cli));
    }
    let (opts, warnings) = match ServerOptions::load(&cli) {
        Ok(loaded) => loaded,
        // Fail closed: a setting we do not enforce (auth, TLS, clustering) stops the server
        // before anything is bound.
        Err(OptionsError::Refused(refused)) => {
            let lines: Vec<String> = refused.refusals.iter().map(ToString::to_string).collect();
            jsserver::logging::fatal(refused.log_file.as_deref(), refused.logtime, &lines);
            std::process::exit(1);
        }
        // A config that cannot be used (its file, a value, TLS files): the log goes where the
        // flags, or the config file's own `log_file`, say; each error (every unknown field of
        // the file) is its own `[FTL]` line, as the refusals are.
        Err(err) => {
            let (log_file, logtime) = jsserver::options::log_target(&cli, None);
            let lines: Vec<String> = err.to_string().lines().map(str::to_owned).collect();
            jsserver::logging::fatal(log_file.as_deref(), logtime, &lines);
            std::process::exit(1);
        }
    };
    let log_guard = match jsserver::logging::init(&opts) {
        Ok(guard) => guard,
        // The log file cannot be opened: stderr only.
        Err(err) => die(None, opts.logtime, &format!("{err:#}")),
    };
    for warning in &warnings {
        warn!("{warning}");
    }
    let fatal = |message: &str| -> ! { die(opts.log_file.as_deref(), opts.logtime, message) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Named apart from other tokio programs' workers in `top -H` and profiles.
        .thread_name("jsserver-io")
        .build()
        .unwrap_or_else(|err| fatal(&format!("Can't start the tokio runtime: {err}")));
    if let Err(Fatal(message)) = runtime.block_on(run(opts.clone(), &cli, &log_guard)) {
        fatal(&message);
    }
}

/// Removes the file it names when dropped: the pid and ports files, which go with the server
/// however `run` ends.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `host:port` as Go's `net.JoinHostPort` writes it (an IPv6 host in brackets).
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

async fn run(
    opts: ServerOptions,
    cli: &cli::Cli,
    log_guard: &jsserver::logging::LogGuard,
) -> Result<(), Fatal> {
    // Trapped from the start: SIGUSR1/SIGUSR2/SIGHUP would otherwise end the process.
    let signals = Signals::install()
        .map_err(|err| Fatal(format!("Can't install the signal handlers: {err}")))?;
    info!("Starting jsserver");
    info!(
        "  Version:  {} (nats-server {NATS_VERSION} protocol)",
        env!("CARGO_PKG_VERSION")
    );
    let server = Server::new(opts.clone());
    info!("  Name:     {}", server.server_name());
    info!("  ID:       {}", server.server_id());
    if let Some(path) = &opts.config_file {
        info!("Using configuration file: {}", path.display());
    }
    let _pid_file = match &opts.pid_file {
        Some(path) => {
            jsserver::options::write_pid_file(path).map_err(|err| {
                Fatal(format!(
                    "Could not write pidfile: open {}: {}",
                    path.display(),
                    go_error(&err)
                ))
            })?;
            RemoveOnDrop(Some(path.clone()))
        }
        None => RemoveOnDrop(None),
    };

    let monitor_tls = opts
        .https_port
        .and_then(|_| opts.tls.as_ref()?.monitor_config());
    let http_addr = match opts.http_port.or(opts.https_port) {
        Some(port) => {
            let listener = listen(&opts.http_host, port).await.map_err(|err| {
                Fatal(format!(
                    "Can't start monitoring: can't listen to the monitor port: {err}"
                ))
            })?;
            let addr = local_addr(&listener)?;
            let scheme = if monitor_tls.is_some() {
                "https"
            } else {
                "http"
            };
            info!("Starting {scheme} monitor on {addr}");
            server.set_monitor_addr(addr);
            tokio::spawn(jsserver::monitor::serve(
                listener,
                Arc::clone(&server),
                monitor_tls,
            ));
            Some(addr)
        }
        None => None,
    };

    // Checked and locked before any port is bound, where nats-server checks its store
    // directory: a second server on the same directory stops here.
    let store = if opts.jetstream {
        let dir = opts.jetstream_dir();
        info!("Starting JetStream");
        info!("  Store Directory: \"{}\"", dir.display());
        Some(StoreDir::open(&dir).map_err(|err| Fatal(format!("Can't start JetStream: {err}")))?)
    } else {
        None
    };

    let listener = listen(&opts.host, opts.port).await.map_err(|err| {
        Fatal(format!(
            "Error listening on port: {}, {:?}",
            host_port(&opts.host, opts.port),
            err.to_string()
        ))
    })?;
    let client_addr: SocketAddr = local_addr(&listener)?;
    info!("Listening for client connections on {client_addr}");
    if let Some(tls) = &opts.tls {
        if tls.plain_allowed() {
            info!("TLS available for client connections");
        } else {
            info!("TLS required for client connections");
        }
        if tls.handshake_first {
            warn!("Clients that are not using \"TLS Handshake First\" option will fail to connect");
        }
    }
    let websocket = match &opts.websocket {
        Some(ws) => {
            let listener = listen(&ws.host, ws.port).await.map_err(|err| {
                Fatal(format!("Unable to listen for websocket connections: {err}"))
            })?;
            let addr = local_addr(&listener)?;
            // nats-server's lines.
            let scheme = if ws.tls.is_some() { "wss" } else { "ws" };
            info!("Listening for websocket clients on {scheme}://{addr}");
            if ws.tls.is_none() {
                warn!("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!");
            }
            Some(listener)
        }
        None => None,
    };
    if let Some(cluster) = &opts.cluster {
        info!("Cluster name is {}", cluster.name());
        let listener = listen(&cluster.host, cluster.port).await.map_err(|err| {
            Fatal(format!(
                "Error listening on router port: {} - {err}",
                cluster.port
            ))
        })?;
        info!(
            "Listening for route connections on {}",
            local_addr(&listener)?
        );
        jsserver::cluster::Cluster::start(&server, cluster, listener, client_addr)
            .map_err(|err| Fatal(format!("Can't start the cluster: {err}")))?;
    }
    // After the cluster (a clustered JetStream's subscriptions are announced to the routes,
    // and its meta group talks over them), before clients are accepted.
    let jetstream = match store {
        Some(store) => Some(
            JetStream::start(&server, store)
                .map_err(|err| Fatal(format!("Can't start JetStream: {err:#}")))?,
        ),
        None => None,
    };
    // As nats-server: a ports file that cannot be written is an error, not a reason to stop.
    let _ports_file = match &opts.ports_file_dir {
        Some(dir) => match jsserver::options::write_ports_file(dir, client_addr, http_addr) {
            Ok(path) => RemoveOnDrop(Some(path)),
            Err(err) => {
                let path = jsserver::options::ports_file_path(dir);
                tracing::error!(
                    "Error writing ports file ({}): open {}: {}",
                    path.display(),
                    path.display(),
                    go_error(&err)
                );
                RemoveOnDrop(None)
            }
        },
        None => RemoveOnDrop(None),
    };
    info!("Server is ready");
    // On a signal, JetStream stops before the connections close, as in nats-server: waiting
    // pull requests get their `409 Server Shutdown` while their clients can still read it.
    let jetstream = std::sync::Arc::new(std::sync::Mutex::new(jetstream));
    let stopping = std::sync::Arc::clone(&jetstream);
    let signalled = Arc::clone(&server);
    let stop = async move {
        signals.serve(&signalled, &stopping, cli, log_guard).await;
        info!("Initiating Shutdown...");
        stop_jetstream(&stopping).await;
    };
    let served = server.run(listener, websocket, stop).await;
    // Stopped some other way: streams still sync their stores before the process exits.
    stop_jetstream(&jetstream).await;
    // The files of the options in force: a reload may have moved them (the start-up ones go
    // with their RemoveOnDrop guards).
    let opts = server.options();
    if let Some(path) = &opts.pid_file {
        let _ = std::fs::remove_file(path);
    }
    if let Some(dir) = &opts.ports_file_dir {
        let _ = jsserver::options::remove_ports_file(dir);
    }
    served.map_err(|err| Fatal(format!("Server stopped: {err}")))
}

/// The address a listener was bound to.
fn local_addr(listener: &tokio::net::TcpListener) -> Result<SocketAddr, Fatal> {
    listener
        .local_addr()
        .map_err(|err| Fatal(format!("Can't read a listener's address: {err}")))
}

/// How many connections may wait to be accepted. tokio's default (1024) makes a burst of
/// thousands of simultaneous connects fail; nats-server (Go) uses the kernel's `somaxconn`.
const ACCEPT_BACKLOG: u32 = 4096;

/// Why a listener could not be opened, worded as Go's `net.Listen` error, which nats-server's
/// fatal lines quote: `listen tcp 127.0.0.1:4222: bind: address already in use`.
#[derive(Debug)]
struct ListenError(String);

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Opens a listener on `host:port` (client, websocket, cluster and monitoring ports alike)
/// with [`ACCEPT_BACKLOG`] and `SO_REUSEADDR`, as Go's listeners: the first of the host's
/// addresses that can be bound.
async fn listen(host: &str, port: u16) -> Result<tokio::net::TcpListener, ListenError> {
    let hp = host_port(host, port);
    let addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|err| ListenError(format!("listen tcp: lookup {host}: {}", go_error(&err))))?;
    let mut last_err = None;
    for addr in addrs {
        let step = |what: &str, err: std::io::Error| {
            ListenError(format!("listen tcp {hp}: {what}: {}", go_error(&err)))
        };
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        };
        let socket = match socket.and_then(|s| s.set_reuseaddr(true).map(|()| s)) {
            Ok(socket) => socket,
            Err(err) => {
                last_err = Some(step("socket", err));
                continue;
            }
        };
        if let Err(err) = socket.bind(addr) {
            last_err = Some(step("bind", err));
            continue;
        }
        match socket.listen(ACCEPT_BACKLOG) {
            Ok(listener) => return Ok(listener),
            Err(err) => last_err = Some(step("listen", err)),
        }
    }
    Err(last_err.unwrap_or_else(|| {
        ListenError(format!("listen tcp {hp}: the host resolves to no address"))
    }))
}

/// Stops JetStream if it runs (streams sync their stores, waiting pulls get their status).
async fn stop_jetstream(jetstream: &std::sync::Mutex<Option<JetStream>>) {
    let taken = jetstream.lock().expect("jetstream slot").take();
    if let Some(jetstream) = taken {
        if tokio::task::spawn_blocking(move || jetstream.shutdown())
            .await
            .is_err()
        {
            tracing::error!("stopping JetStream panicked");
        }
    }
}

/// The signals the server traps, as nats-server (`handleSignals`); SIGQUIT is not trapped
/// (nats-server does not either; `--signal quit` sends SIGINT).
struct Signals {
    interrupt: Signal,
    terminate: Signal,
    reopen: Signal,
    lame_duck: Signal,
    reload: Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            reopen: signal(SignalKind::user_defined1())?,
            lame_duck: signal(SignalKind::user_defined2())?,
            reload: signal(SignalKind::hangup())?,
        })
    }

    /// Handles signals until one asks to stop: SIGINT, or SIGTERM outside lame-duck mode.
    /// SIGUSR1 reopens the log file, SIGUSR2 starts lame-duck mode (which stops the server by
    /// itself when done), SIGHUP reloads the config ([`jsserver::reload`]).
    async fn serve(
        mut self,
        server: &Arc<Server>,
        jetstream: &Arc<std::sync::Mutex<Option<JetStream>>>,
        cli: &cli::Cli,
        log_guard: &jsserver::logging::LogGuard,
    ) {
        loop {
            tokio::select! {
                _ = self.interrupt.recv() => {
                    info!("Trapped \"interrupt\" signal");
                    return;
                }
                _ = self.terminate.recv() => {
                    info!("Trapped \"terminated\" signal");
                    if !server.in_lame_duck() {
                        return;
                    }
                }
                _ = self.reopen.recv() => {
                    info!("Trapped \"user defined signal 1\" signal");
                    log_guard.reopen();
                }
                _ = self.lame_duck.recv() => {
                    info!("Trapped \"user defined signal 2\" signal");
                    let server = Arc::clone(server);
                    let jetstream = Arc::clone(jetstream);
                    tokio::spawn(async move {
                        server.lame_duck(stop_jetstream(&jetstream)).await;
                    });
                }
                _ = self.reload.recv() => {
                    info!("Trapped \"hangup\" signal");
                    let (s, c) = (Arc::clone(server), cli.clone());
                    let logging = log_guard.clone();
                    // bcrypt checks: off the async workers.
                    let result = tokio::task::spawn_blocking(move || {
                        jsserver::reload::reload(&s, &c, Some(&logging))
                    })
                    .await;
                    match result {
                        Ok(Ok(_)) => info!("Reloaded server configuration"),
                        Ok(Err(err)) => {
                            tracing::error!("Failed to reload server configuration: {err}");
                        }
                        Err(_) => tracing::error!("Failed to reload server configuration: the reload panicked"),
                    }
                }
            }
        }
    }
}
