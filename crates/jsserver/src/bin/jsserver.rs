//! The `jsserver` binary: flags and config in, a running server out.
//!
//! Accepts nats-server's flags (see `jsserver --help`) so test harnesses that start
//! `nats-server` can start this instead, and logs the same start-up lines they wait for.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use jsserver::cli;
use jsserver::jetstream::JetStream;
use jsserver::options::{OptionsError, ServerOptions};
use jsserver::server::{Server, NATS_VERSION};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing::{info, warn};

fn main() -> anyhow::Result<()> {
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
        Err(err) => return Err(err.into()),
    };
    let log_guard = jsserver::logging::init(&opts)?;
    for warning in &warnings {
        warn!("{warning}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Named apart from other tokio programs' workers in `top -H` and profiles.
        .thread_name("jsserver-io")
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(run(opts, &cli, &log_guard))
}

async fn run(
    opts: ServerOptions,
    cli: &cli::Cli,
    log_guard: &jsserver::logging::LogGuard,
) -> anyhow::Result<()> {
    // Trapped from the start: SIGUSR1/SIGUSR2/SIGHUP would otherwise end the process.
    let signals = Signals::install().context("installing the signal handlers")?;
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
    if let Some(path) = &opts.pid_file {
        jsserver::options::write_pid_file(path)?;
    }

    let monitor_tls = opts
        .https_port
        .and_then(|_| opts.tls.as_ref()?.monitor_config());
    let http_addr = match opts.http_port.or(opts.https_port) {
        Some(port) => {
            let listener = tokio::net::TcpListener::bind((opts.http_host.as_str(), port))
                .await
                .with_context(|| {
                    format!("binding the monitoring port {}:{port}", opts.http_host)
                })?;
            let addr = listener.local_addr()?;
            let scheme = if monitor_tls.is_some() {
                "https"
            } else {
                "http"
            };
            info!("Starting {scheme} monitor on {addr}");
            tokio::spawn(jsserver::monitor::serve(
                listener,
                Arc::clone(&server),
                monitor_tls,
            ));
            Some(addr)
        }
        None => None,
    };

    let listener = bind_clients(&opts.host, opts.port)
        .await
        .with_context(|| format!("binding the client port {}:{}", opts.host, opts.port))?;
    let client_addr: SocketAddr = listener.local_addr()?;
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
            let listener = bind_clients(&ws.host, ws.port)
                .await
                .with_context(|| format!("binding the websocket port {}:{}", ws.host, ws.port))?;
            let addr = listener.local_addr()?;
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
        let listener = bind_clients(&cluster.host, cluster.port)
            .await
            .with_context(|| {
                format!("binding the cluster port {}:{}", cluster.host, cluster.port)
            })?;
        info!("Cluster name is {}", cluster.name());
        info!(
            "Listening for route connections on {}",
            listener.local_addr()?
        );
        jsserver::cluster::Cluster::start(&server, cluster, listener, client_addr)
            .context("starting the cluster")?;
    }
    // After the cluster (a clustered JetStream's subscriptions are announced to the routes,
    // and its meta group talks over them), before clients are accepted.
    let jetstream = if opts.jetstream {
        let dir = opts.jetstream_dir();
        info!("Starting JetStream");
        info!("  Store Directory: \"{}\"", dir.display());
        Some(JetStream::start(&server, &dir).context("starting JetStream")?)
    } else {
        None
    };
    if let Some(dir) = &opts.ports_file_dir {
        jsserver::options::write_ports_file(dir, client_addr, http_addr)?;
    }
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
    server.run(listener, websocket, stop).await?;
    // Stopped some other way: streams still sync their stores before the process exits.
    stop_jetstream(&jetstream).await;
    if let Some(path) = &opts.pid_file {
        let _ = std::fs::remove_file(path);
    }
    if let Some(dir) = &opts.ports_file_dir {
        let _ = jsserver::options::remove_ports_file(dir);
    }
    Ok(())
}

/// How many connections may wait to be accepted. tokio's default (1024) makes a burst of
/// thousands of simultaneous connects fail; nats-server (Go) uses the kernel's `somaxconn`.
const ACCEPT_BACKLOG: u32 = 4096;

/// Binds the client listener with [`ACCEPT_BACKLOG`] and `SO_REUSEADDR`, as Go's listeners.
async fn bind_clients(host: &str, port: u16) -> std::io::Result<tokio::net::TcpListener> {
    let mut last_err = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket
            .bind(addr)
            .and_then(|()| socket.listen(ACCEPT_BACKLOG))
        {
            Ok(listener) => return Ok(listener),
            Err(err) => last_err = Some(err),
        }
    }
    Err(last_err.unwrap_or_else(|| std::io::Error::other("host resolves to no address")))
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
                    let result =
                        tokio::task::spawn_blocking(move || jsserver::reload::reload(&s, &c)).await;
                    match result {
                        Ok(Ok(applied)) => {
                            if let Some(closed) = applied {
                                info!("Reloaded: authorization users");
                                if closed > 0 {
                                    info!("Reload closed {closed} client(s) no longer allowed");
                                }
                            }
                            info!("Reloaded server configuration");
                        }
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
