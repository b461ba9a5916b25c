//! Config reload on SIGHUP (`--signal reload`), as nats-server's `Reload`.
//!
//! The config file is read again with the flags the server was started with (flags win, as at
//! start-up) and checked exactly as at start-up: a malformed file, an invalid value, a refused
//! setting or a TLS file that does not load fails the reload. Then every setting is compared
//! with the one in force, in nats-server's order (its `Options` fields), and each change is
//! either applied or refuses the whole reload:
//!
//! | setting | on reload |
//! | --- | --- |
//! | `debug`, `trace`, `logtime`, `log_file` | logging switches from the next line on |
//! | `tls` files, `verify`, `ca_file` (and `tls` added or removed) | the next accepted client gets the new configuration; connected clients keep their session |
//! | `tls { timeout }`, `tls { handshake_first }` | from the next accepted client on |
//! | `authorization`, `accounts`' users, `no_auth_user` removed with its user | every client decided again ([`Server::apply_auth`]) |
//! | `max_connections` | clients over the new limit are closed, newest first, with `-ERR 'maximum connections exceeded'` |
//! | `max_payload`, `max_control_line`, `ping_interval`, `ping_max`, `write_deadline` | every connected client too, from its next read or write; INFO says the new `max_payload` |
//! | `server_tags` (standalone server) | `/varz`, the system account's `server` blocks and placement |
//! | `pid_file`, `ports_file_dir` | the file is written at the new place (the old ports file is removed) |
//! | `max_memory_store`, `max_file_store` raised (JetStream on) | reported as the new limits |
//!
//! Any other change refuses the reload with nats-server's text, naming the first refused
//! setting by nats-server's name (`config reload not supported for MaxPending: old=1000,
//! new=2000`; `... for jetstream storage directory`; `... for decreasing jetstream max memory
//! and store`), and nothing at all is applied: the old configuration stays in force. Where
//! nats-server reloads a setting that jsserver does not (JetStream turned on or off, cluster
//! routes and authorization, the tags of a clustered server), the refusal uses the same
//! words.
//!
//! Each applied change is logged as nats-server logs it (`Reloaded: max_payload = 2000`,
//! `Reloaded: tls = enabled`), then `Reloaded server configuration`.

use std::time::Duration;

use tracing::{error, info};

use crate::cli::Cli;
use crate::logging::LogGuard;
use crate::options::{ServerOptions, SyncPolicy};
use crate::server::Server;

/// One applied change: what the reload does beyond putting the new options in force, and the
/// line it logs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// `debug`, `trace`, `logtime` or `log_file`: logging is set up again.
    Logging(String),
    /// Users, passwords, tokens, nkeys, permissions: every client is decided again.
    Auth(Vec<String>),
    /// `max_connections`: clients over the new limit are closed.
    MaxConnections(usize),
    /// `pid_file`: written at the new place.
    PidFile,
    /// `ports_file_dir`: the old file removed, the new one written.
    PortsFileDir,
    /// Nothing to do but the log line: the options in force are read where they are used.
    Read(String),
}

/// Reloads the config of `server` (started with `cli`), and with `logging` its log settings.
/// Logs each applied change (`Reloaded: ...`) and returns those lines; `Ok` with no lines when
/// nothing changed. The error is to be logged as `Failed to reload server configuration:
/// <error>`; then nothing was changed. Runs bcrypt checks: call it off the async workers.
pub fn reload(
    server: &Server,
    cli: &Cli,
    logging: Option<&LogGuard>,
) -> Result<Vec<String>, String> {
    let current = server.options();
    if current.config_file.is_none() {
        return Err("can only reload config when a file is provided using -c or --config".into());
    }
    let (mut new, _warnings) = ServerOptions::load(cli).map_err(|e| e.to_string())?;
    // As nats-server: a random port (`-1`) keeps the one bound at start-up.
    if new.port == 0 {
        new.port = current.port;
    }
    let changes = plan(&current, &new)?;
    if changes.iter().any(|c| matches!(c, Change::Auth(_))) {
        server.check_auth_reload(&new.auth)?;
    }
    if new.log_file != current.log_file {
        if let Some(path) = &new.log_file {
            // Checked before anything changes: a log file that cannot be opened refuses the
            // reload.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
        }
    }
    let new_log_file = new.log_file.clone();
    server.set_options(new);
    let mut lines = Vec::new();
    let mut relog = false;
    for change in changes {
        match change {
            Change::Logging(line) => {
                relog = true;
                lines.push(line);
            }
            Change::Auth(auth_lines) => {
                lines.extend(auth_lines);
                let closed = server.apply_auth();
                if closed > 0 {
                    lines.push(format!(
                        "Reload closed {closed} client(s) no longer allowed"
                    ));
                }
            }
            Change::MaxConnections(max) => {
                let closed = server.enforce_max_connections(max);
                if closed > 0 {
                    lines.push(format!(
                        "Closed {closed} connections to fall within max_connections"
                    ));
                }
                lines.push(format!("Reloaded: max_connections = {max}"));
            }
            Change::PidFile => {
                let opts = server.options();
                if let Some(path) = &opts.pid_file {
                    if let Err(err) = crate::options::write_pid_file(path) {
                        error!("Failed to write pidfile: {err}");
                    }
                    lines.push(format!("Reloaded: pid_file = {}", path.display()));
                }
            }
            Change::PortsFileDir => {
                if let Some(dir) = &current.ports_file_dir {
                    let _ = crate::options::remove_ports_file(dir);
                }
                let opts = server.options();
                if let (Some(dir), Some(client)) = (&opts.ports_file_dir, server.client_addr()) {
                    if let Err(err) =
                        crate::options::write_ports_file(dir, client, server.monitor_addr())
                    {
                        error!("Error writing ports file: {err}");
                    }
                }
                lines.push(format!(
                    "Reloaded: ports_file_dir = {}",
                    opts.ports_file_dir
                        .as_deref()
                        .map(|d| d.display().to_string())
                        .unwrap_or_default()
                ));
            }
            Change::Read(line) => lines.push(line),
        }
    }
    for line in &lines {
        info!("{line}");
    }
    if relog {
        if let Some(logging) = logging {
            let opts = server.options();
            if let Err(err) = logging.apply(&opts) {
                error!(
                    "log_file {}: {err:#}; logging stays where it was",
                    new_log_file
                        .as_deref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                );
            }
        }
    }
    Ok(lines)
}

/// `config reload not supported for <name>: old=<old>, new=<new>`, nats-server's refusal.
fn refused(name: &str, old: impl std::fmt::Display, new: impl std::fmt::Display) -> String {
    format!("config reload not supported for {name}: old={old}, new={new}")
}

/// Go's `%v` of a duration (`2m0s`, `500ms`).
fn go(d: Duration) -> String {
    jsproto::duration::format_go_duration(d)
}

/// Go's `%v` of an optional string or path: empty when unset.
fn text<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Go's `%v` of seconds as a float64 (`2`, `0.5`).
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

/// nats-server's `friendlyBytes`: `512 B`, `1.86 GB` (powers of 1024).
fn friendly_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    let b = bytes as f64;
    if b < 1024.0 {
        return format!("{bytes} B");
    }
    let exp = ((b.ln() / 1024f64.ln()) as usize).clamp(1, UNITS.len());
    format!("{:.2} {}B", b / 1024f64.powi(exp as i32), UNITS[exp - 1])
}

/// What reloading `new` over `old` does, in nats-server's order; or the refusal of the first
/// setting that cannot change without a restart.
fn plan(old: &ServerOptions, new: &ServerOptions) -> Result<Vec<Change>, String> {
    let mut changes = Vec::new();
    if old.config_file != new.config_file {
        let path = |p: &Option<std::path::PathBuf>| text(p.as_ref().map(|p| p.display()));
        return Err(refused(
            "ConfigFile",
            path(&old.config_file),
            path(&new.config_file),
        ));
    }
    if old.server_name != new.server_name {
        return Err(refused(
            "ServerName",
            text(old.server_name.as_ref()),
            text(new.server_name.as_ref()),
        ));
    }
    if old.host != new.host {
        return Err(refused("Host", &old.host, &new.host));
    }
    if old.port != new.port {
        return Err(refused("Port", old.port, new.port));
    }
    if old.trace != new.trace {
        changes.push(Change::Logging(format!("Reloaded: trace = {}", new.trace)));
    }
    if old.debug != new.debug {
        changes.push(Change::Logging(format!("Reloaded: debug = {}", new.debug)));
    }
    if old.logtime != new.logtime {
        changes.push(Change::Logging(format!(
            "Reloaded: logtime = {}",
            new.logtime
        )));
    }
    if old.max_connections != new.max_connections {
        changes.push(Change::MaxConnections(new.max_connections));
    }
    if old.auth != new.auth {
        changes.push(Change::Auth(auth_lines(old, new)?));
    }
    if old.ping_interval != new.ping_interval {
        changes.push(Change::Read(format!(
            "Reloaded: ping_interval = {}",
            go(new.ping_interval)
        )));
    }
    if old.ping_max != new.ping_max {
        changes.push(Change::Read(format!(
            "Reloaded: ping_max = {}",
            new.ping_max
        )));
    }
    if old.http_host != new.http_host {
        return Err(refused("HTTPHost", &old.http_host, &new.http_host));
    }
    let port = |p: Option<u16>| p.map_or(0, i32::from);
    if old.http_port != new.http_port {
        return Err(refused(
            "HTTPPort",
            port(old.http_port),
            port(new.http_port),
        ));
    }
    if old.https_port != new.https_port {
        return Err(refused(
            "HTTPSPort",
            port(old.https_port),
            port(new.https_port),
        ));
    }
    if old.auth.timeout != new.auth.timeout {
        // Applied with the users (the authenticator holds it), logged in nats-server's place.
        changes.push(Change::Read(format!(
            "Reloaded: authorization timeout = {}",
            seconds(new.auth.timeout)
        )));
    }
    if old.max_control_line != new.max_control_line {
        changes.push(Change::Read(format!(
            "Reloaded: max_control_line = {}",
            new.max_control_line
        )));
    }
    if old.max_payload != new.max_payload {
        changes.push(Change::Read(format!(
            "Reloaded: max_payload = {}",
            new.max_payload
        )));
    }
    if old.max_pending != new.max_pending {
        return Err(refused("MaxPending", old.max_pending, new.max_pending));
    }
    cluster(old, new)?;
    if old.jetstream != new.jetstream {
        // nats-server starts or stops JetStream here; jsserver does not yet.
        return Err(refused("JetStream", old.jetstream, new.jetstream));
    }
    changes.extend(jetstream_limits(old, new)?);
    if old.jetstream && old.store_dir != new.store_dir {
        return Err("config reload not supported for jetstream storage directory".into());
    }
    sync_policy(old.sync_interval, new.sync_interval)?;
    if old.websocket != new.websocket {
        let ws = |w: &Option<crate::websocket::WebsocketOptions>| match w {
            Some(w) => format!("{{{}:{}}}", w.host, w.port),
            None => "{}".to_owned(),
        };
        return Err(refused("Websocket", ws(&old.websocket), ws(&new.websocket)));
    }
    if old.pid_file != new.pid_file {
        changes.push(Change::PidFile);
    }
    if old.ports_file_dir != new.ports_file_dir {
        changes.push(Change::PortsFileDir);
    }
    if old.log_file != new.log_file {
        changes.push(Change::Logging(format!(
            "Reloaded: log_file = {}",
            text(new.log_file.as_ref().map(|p| p.display()))
        )));
    }
    changes.extend(tls(old, new)?);
    if old.write_deadline != new.write_deadline {
        changes.push(Change::Read(format!(
            "Reloaded: write_deadline = {}",
            go(new.write_deadline)
        )));
    }
    if old.lame_duck_duration != new.lame_duck_duration {
        return Err(refused(
            "LameDuckDuration",
            go(old.lame_duck_duration),
            go(new.lame_duck_duration),
        ));
    }
    if old.lame_duck_grace_period != new.lame_duck_grace_period {
        return Err(refused(
            "LameDuckGracePeriod",
            go(old.lame_duck_grace_period),
            go(new.lame_duck_grace_period),
        ));
    }
    if old.server_tags != new.server_tags {
        if old.cluster.is_some() {
            // The other servers learnt the tags in this one's route HELLO and would place
            // streams by the old ones: a restart (nats-server sends them again).
            let list = |t: &[String]| format!("[{}]", t.join(" "));
            return Err(refused(
                "Tags",
                list(&old.server_tags),
                list(&new.server_tags),
            ));
        }
        changes.push(Change::Read("Reloaded: tags".into()));
    }
    // nats-server does not reload these either (its default case names the field).
    if old.max_subscriptions != new.max_subscriptions {
        return Err(refused(
            "MaxSubs",
            old.max_subscriptions,
            new.max_subscriptions,
        ));
    }
    if old.jetstream_request_queue_limit != new.jetstream_request_queue_limit {
        return Err(refused(
            "JetStreamRequestQueueLimit",
            old.jetstream_request_queue_limit,
            new.jetstream_request_queue_limit,
        ));
    }
    if old.max_sub_tokens != new.max_sub_tokens {
        return Err(refused(
            "MaxSubTokens",
            old.max_sub_tokens,
            new.max_sub_tokens,
        ));
    }
    // Fail closed: a setting added to the options but not compared above refuses the
    // reload rather than being left unapplied. Every field is listed, so that adding one
    // breaks the build here.
    let ServerOptions {
        host: _,
        port: _,
        server_name: _,
        server_tags: _,
        http_host: _,
        http_port: _,
        https_port: _,
        max_payload: _,
        max_control_line: _,
        ping_interval: _,
        ping_max: _,
        write_deadline: _,
        max_pending: _,
        max_connections: _,
        max_subscriptions: _,
        max_sub_tokens: _,
        jetstream: _,
        store_dir: _,
        max_memory_store: _,
        max_file_store: _,
        sync_interval: _,
        jetstream_request_queue_limit: _,
        debug: _,
        trace: _,
        logtime: _,
        log_file: _,
        pid_file: _,
        ports_file_dir: _,
        config_file: _,
        lame_duck_duration: _,
        lame_duck_grace_period: _,
        auth: _,
        tls: _,
        allow_non_tls: _,
        websocket: _,
        cluster: _,
    } = new;
    Ok(changes)
}

/// The lines of an `authorization`/`accounts` change, after nats-server's refusals of
/// `no_auth_user`: it may only go away together with its user.
fn auth_lines(old: &ServerOptions, new: &ServerOptions) -> Result<Vec<String>, String> {
    let (o, n) = (&old.auth, &new.auth);
    if o.no_auth_user != n.no_auth_user {
        let user_stays = n.all_users().any(|(u, _)| u.user == o.no_auth_user)
            || n.nkeys.iter().any(|k| k.nkey == o.no_auth_user);
        if o.no_auth_user.is_empty() || !n.no_auth_user.is_empty() || user_stays {
            return Err(refused("NoAuthUser", &o.no_auth_user, &n.no_auth_user));
        }
    }
    Ok(vec!["Reloaded: authorization users".to_owned()])
}

/// The cluster: nothing of it changes on reload (nats-server's words for the listener,
/// the same form for the rest, which nats-server partly applies).
fn cluster(old: &ServerOptions, new: &ServerOptions) -> Result<(), String> {
    let (o, n) = match (&old.cluster, &new.cluster) {
        (None, None) => return Ok(()),
        (Some(o), Some(n)) => (o, n),
        (o, n) => {
            let host = |c: &Option<crate::cluster::config::ClusterOptions>| {
                c.as_ref().map(|c| c.host.clone()).unwrap_or_default()
            };
            return Err(format!(
                "config reload not supported for cluster host: old={}, new={}",
                host(o),
                host(n)
            ));
        }
    };
    if o.host != n.host {
        return Err(format!(
            "config reload not supported for cluster host: old={}, new={}",
            o.host, n.host
        ));
    }
    if o.port != n.port {
        return Err(format!(
            "config reload not supported for cluster port: old={}, new={}",
            o.port, n.port
        ));
    }
    if o.name != n.name {
        return Err(refused(
            "cluster name",
            text(o.name.as_ref()),
            text(n.name.as_ref()),
        ));
    }
    if o.routes != n.routes {
        return Err(refused(
            "cluster routes",
            format!("{:?}", o.routes),
            format!("{:?}", n.routes),
        ));
    }
    if o.authorization != n.authorization || o.route_credentials != n.route_credentials {
        // Credentials are not printed.
        return Err("config reload not supported for cluster authorization".into());
    }
    if o.advertise != n.advertise {
        return Err(refused(
            "cluster advertise",
            text(o.advertise.as_ref()),
            text(n.advertise.as_ref()),
        ));
    }
    if o.connect_retries != n.connect_retries {
        return Err(refused(
            "cluster connect_retries",
            o.connect_retries,
            n.connect_retries,
        ));
    }
    let same_tls = match (&o.tls, &n.tls) {
        (None, None) => true,
        (Some(a), Some(b)) => a == b && a.serves_same(b),
        _ => false,
    };
    if !same_tls {
        return Err("config reload not supported for cluster tls".into());
    }
    if o != n {
        return Err("config reload not supported for cluster".into());
    }
    Ok(())
}

/// JetStream's `max_memory_store` and `max_file_store`, as nats-server's reload: while
/// JetStream runs, a set limit may only grow.
fn jetstream_limits(old: &ServerOptions, new: &ServerOptions) -> Result<Vec<Change>, String> {
    let mut changes = Vec::new();
    if !old.jetstream {
        return Ok(changes);
    }
    for (name, o, n) in [
        ("max_mem_store", old.max_memory_store, new.max_memory_store),
        ("max_file_store", old.max_file_store, new.max_file_store),
    ] {
        match (o, n) {
            (o, n) if o == n => {}
            (Some(o), Some(n)) if n > o => changes.push(Change::Read(format!(
                "Reloaded: JetStream {name} = {}",
                friendly_bytes(n)
            ))),
            (Some(_), None) => {
                return Err(
                    "config reload not supported for jetstream max memory and max store".into(),
                )
            }
            (None, Some(_)) => {
                return Err(
                    "config reload not supported for jetstream dynamic max memory and store".into(),
                )
            }
            _ => {
                return Err(
                    "config reload not supported for decreasing jetstream max memory and store"
                        .into(),
                )
            }
        }
    }
    Ok(changes)
}

/// `sync_interval` (`SyncInterval`, `SyncAlways` in nats-server) takes a restart.
fn sync_policy(old: SyncPolicy, new: SyncPolicy) -> Result<(), String> {
    match (old, new) {
        (SyncPolicy::Interval(o), SyncPolicy::Interval(n)) if o != n => {
            Err(refused("SyncInterval", go(o), go(n)))
        }
        (SyncPolicy::Always, SyncPolicy::Interval(_)) => Err(refused("SyncAlways", true, false)),
        (SyncPolicy::Interval(_), SyncPolicy::Always) => Err(refused("SyncAlways", false, true)),
        _ => Ok(()),
    }
}

/// The client TLS settings: the configuration (files, `verify`, `ca_file`, on or off), the
/// handshake timeout and `handshake_first` apply to the next client; `verify_and_map` and
/// `allow_non_tls` take a restart, as in nats-server.
fn tls(old: &ServerOptions, new: &ServerOptions) -> Result<Vec<Change>, String> {
    let mut changes = Vec::new();
    let (o, n) = (old.tls.as_ref(), new.tls.as_ref());
    let timeout = |t: Option<&crate::tls::TlsOptions>| t.map_or(0.0, |t| t.timeout.as_secs_f64());
    if timeout(o) != timeout(n) {
        if let Some(t) = n {
            changes.push(Change::Read(format!(
                "Reloaded: tls timeout = {}",
                seconds(t.timeout)
            )));
        }
    }
    let map = |t: Option<&crate::tls::TlsOptions>| t.is_some_and(|t| t.map);
    if map(o) != map(n) {
        return Err(refused("TLSMap", map(o), map(n)));
    }
    let same = match (o, n) {
        (None, None) => true,
        (Some(a), Some(b)) => a.serves_same(b),
        _ => false,
    };
    if !same {
        let state = if n.is_some() { "enabled" } else { "disabled" };
        changes.push(Change::Read(format!("Reloaded: tls = {state}")));
    }
    let first = |t: Option<&crate::tls::TlsOptions>| t.is_some_and(|t| t.handshake_first);
    if first(o) != first(n) {
        changes.push(Change::Read(format!(
            "Reloaded: Client TLS handshake first: {}",
            first(n)
        )));
    }
    if old.allow_non_tls != new.allow_non_tls {
        return Err(refused("AllowNonTLS", old.allow_non_tls, new.allow_non_tls));
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli_for(file: &std::path::Path) -> Cli {
        crate::cli::parse_args(["jsserver", "-c", file.to_str().unwrap(), "-p", "-1"]).unwrap()
    }

    /// Starts a server from `before`, writes `after` and reloads it.
    fn reload_over(
        before: &str,
        after: &str,
    ) -> (std::sync::Arc<Server>, Result<Vec<String>, String>) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.conf");
        std::fs::write(&file, before).unwrap();
        let cli = cli_for(&file);
        let (current, _) = ServerOptions::load(&cli).unwrap();
        let server = Server::new(current);
        std::fs::write(&file, after).unwrap();
        let result = reload(&server, &cli, None);
        (server, result)
    }

    #[test]
    fn applied_settings_log_nats_servers_lines_in_its_order() {
        let (server, result) = reload_over(
            "debug: false\n",
            "debug: true\ntrace: true\nlogtime: false\nmax_payload: 2000\n\
             max_control_line: 2000\nping_interval: \"3s\"\nping_max: 3\n\
             write_deadline: \"3s\"\nmax_connections: 10\nserver_tags: [\"a\"]\n",
        );
        assert_eq!(
            result.unwrap(),
            [
                "Reloaded: trace = true",
                "Reloaded: debug = true",
                "Reloaded: logtime = false",
                "Reloaded: max_connections = 10",
                "Reloaded: ping_interval = 3s",
                "Reloaded: ping_max = 3",
                "Reloaded: max_control_line = 2000",
                "Reloaded: max_payload = 2000",
                "Reloaded: write_deadline = 3s",
                "Reloaded: tags",
            ]
        );
        let opts = server.options();
        assert_eq!(opts.max_payload, 2000);
        assert_eq!(opts.ping_interval, Duration::from_secs(3));
        assert_eq!(server.options_generation(), 1);
        let info = server.info_for(1, "127.0.0.1:1".parse().unwrap(), None);
        assert_eq!(info.max_payload, 2000);
    }

    #[test]
    fn refused_settings_name_nats_servers_field_and_change_nothing() {
        for (before, after, want) in [
            (
                "lame_duck_duration: \"30s\"\n",
                "lame_duck_duration: \"40s\"\n",
                "config reload not supported for LameDuckDuration: old=30s, new=40s",
            ),
            (
                "lame_duck_grace_period: \"3s\"\n",
                "lame_duck_grace_period: \"4s\"\n",
                "config reload not supported for LameDuckGracePeriod: old=3s, new=4s",
            ),
            (
                "max_pending: 10000000\n",
                "max_pending: 20000000\n",
                "config reload not supported for MaxPending: old=10000000, new=20000000",
            ),
            (
                "max_subscriptions: 10\n",
                "max_subscriptions: 20\n",
                "config reload not supported for MaxSubs: old=10, new=20",
            ),
            (
                "max_sub_tokens: 5\n",
                "max_sub_tokens: 7\n",
                "config reload not supported for MaxSubTokens: old=5, new=7",
            ),
            (
                "server_name: a\n",
                "server_name: b\n",
                "config reload not supported for ServerName: old=a, new=b",
            ),
            (
                "",
                "http_port: 18222\n",
                "config reload not supported for HTTPPort: old=0, new=18222",
            ),
            (
                "",
                "allow_non_tls: true\n",
                "config reload not supported for AllowNonTLS: old=false, new=true",
            ),
            (
                "",
                "no_auth_user: x\nauthorization { users: [ {user: x, password: y} ] }\n",
                "config reload not supported for NoAuthUser: old=, new=x",
            ),
            (
                "jetstream { store_dir: /tmp/jsserver-reload-a }\n",
                "jetstream { store_dir: /tmp/jsserver-reload-b }\n",
                "config reload not supported for jetstream storage directory",
            ),
            (
                "jetstream { store_dir: /tmp/jsserver-reload-a, max_mem: 2G }\n",
                "jetstream { store_dir: /tmp/jsserver-reload-a, max_mem: 1G }\n",
                "config reload not supported for decreasing jetstream max memory and store",
            ),
            (
                "jetstream { store_dir: /tmp/jsserver-reload-a }\n",
                "jetstream { store_dir: /tmp/jsserver-reload-a, max_file: 1G }\n",
                "config reload not supported for jetstream dynamic max memory and store",
            ),
            (
                "jetstream { store_dir: /tmp/jsserver-reload-a }\n",
                "",
                "config reload not supported for JetStream: old=true, new=false",
            ),
            (
                "",
                "cluster { port: 6222 }\n",
                "config reload not supported for cluster host: old=, new=127.0.0.1",
            ),
            (
                "cluster { port: 6222 }\nserver_tags: [\"a\"]\n",
                "cluster { port: 6222 }\nserver_tags: [\"a\", \"b\"]\n",
                "config reload not supported for Tags: old=[a], new=[a b]",
            ),
            (
                "jetstream { sync_interval: \"2m\" }\n",
                "jetstream { sync_interval: \"10s\" }\n",
                "config reload not supported for SyncInterval: old=2m0s, new=10s",
            ),
        ] {
            // Every refusal comes with an applicable change, which must not be applied.
            let (server, result) = reload_over(
                &format!("max_payload: 1000\n{before}"),
                &format!("max_payload: 2000\n{after}"),
            );
            assert_eq!(result.unwrap_err(), want, "{after}");
            assert_eq!(server.options().max_payload, 1000, "{after}");
            assert_eq!(server.options_generation(), 0, "{after}");
        }
    }

    #[test]
    fn jetstream_limits_may_grow() {
        let (server, result) = reload_over(
            "jetstream { store_dir: /tmp/jsserver-reload-a, max_mem: 1G }\n",
            "jetstream { store_dir: /tmp/jsserver-reload-a, max_mem: 2G }\n",
        );
        assert_eq!(
            result.unwrap(),
            ["Reloaded: JetStream max_mem_store = 1.86 GB"]
        );
        assert_eq!(server.options().max_memory_store, Some(2_000_000_000));
        assert_eq!(friendly_bytes(2_000_000_000), "1.86 GB");
        assert_eq!(friendly_bytes(512), "512 B");
    }

    #[test]
    fn users_apply_and_unchanged_reloads_do_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.conf");
        std::fs::write(&file, "debug: false\n").unwrap();
        let cli = cli_for(&file);
        let (current, _) = ServerOptions::load(&cli).unwrap();
        let server = Server::new(current);
        assert_eq!(reload(&server, &cli, None), Ok(vec![]));

        std::fs::write(&file, "authorization { token: s3cret, timeout: 3 }\n").unwrap();
        assert_eq!(
            reload(&server, &cli, None),
            Ok(vec![
                "Reloaded: authorization users".to_owned(),
                "Reloaded: authorization timeout = 3".to_owned()
            ])
        );
        assert!(server.auth().required());
        assert_eq!(reload(&server, &cli, None), Ok(vec![]));

        std::fs::write(&file, "port: [nonsense\n").unwrap();
        assert!(reload(&server, &cli, None).is_err());
        assert!(server.auth().required());

        let no_file = Server::new(ServerOptions::default());
        assert_eq!(
            reload(&no_file, &cli, None).unwrap_err(),
            "can only reload config when a file is provided using -c or --config"
        );
    }

    #[test]
    fn tls_settings_apply_or_name_tls_map() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_file, key_file) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        let block = |extra: &str| {
            format!(
                "tls {{\n cert_file: {:?}\n key_file: {:?}\n {extra}\n}}\n",
                cert_file.display().to_string(),
                key_file.display().to_string()
            )
        };
        let ca = format!("ca_file: {:?}", cert_file.display().to_string());
        let (server, result) = reload_over(
            &block(""),
            &block(&format!(
                "timeout: 5\n handshake_first: true\n verify: true\n {ca}"
            )),
        );
        let lines = result.unwrap();
        let tls_lines: Vec<&str> = lines
            .iter()
            .map(String::as_str)
            .filter(|l| l.contains("tls") || l.contains("TLS"))
            .collect();
        assert_eq!(
            tls_lines,
            [
                "Reloaded: tls timeout = 5",
                "Reloaded: tls = enabled",
                "Reloaded: Client TLS handshake first: true"
            ]
        );
        assert!(server.options().tls.as_ref().unwrap().verify);

        let (_, result) = reload_over(&block(&ca), &block(&format!("{ca}\n verify_and_map: true")));
        assert_eq!(
            result.unwrap_err(),
            "config reload not supported for TLSMap: old=false, new=true"
        );
        // The same files, unchanged: nothing to say.
        let (_, result) = reload_over(&block(""), &block(""));
        assert_eq!(result.unwrap(), Vec::<String>::new());
        // As nats-server: the default auth timeout follows the TLS timeout (2 s + 1 s).
        let (_, result) = reload_over(&block(""), "");
        assert_eq!(
            result.unwrap(),
            [
                "Reloaded: authorization users",
                "Reloaded: authorization timeout = 2",
                "Reloaded: tls = disabled"
            ]
        );
    }

    #[test]
    fn go_formats() {
        assert_eq!(seconds(Duration::from_secs(5)), "5");
        assert_eq!(seconds(Duration::from_millis(500)), "0.5");
        assert_eq!(go(Duration::from_secs(120)), "2m0s");
    }
}
