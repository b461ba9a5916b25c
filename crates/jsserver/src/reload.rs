//! Config reload on SIGHUP (`--signal reload`).
//!
//! The config file is read again with the flags the server was started with (flags win, as at
//! start-up) and checked exactly as at start-up: a malformed file, an invalid value or a
//! refused setting fails the reload. Users, passwords, tokens, nkeys and permissions
//! (`authorization`, the users of `accounts`, `no_auth_user`, `--user`/`--pass`/`--auth`) are
//! applied to the running server ([`Server::reload_auth`]: every client decided again, the
//! ones no longer allowed closed). Any other changed setting fails the reload as a whole,
//! naming it with nats-server's text `config reload not supported for …`, and nothing is
//! applied; nats-server reloads more of its settings.

use crate::cli::Cli;
use crate::options::ServerOptions;
use crate::server::Server;

/// Reloads the config of `server` (started with `cli`): `Ok(None)` when nothing changed,
/// `Ok(Some(n))` when new users and permissions were applied and `n` clients closed, else
/// the error to log (`Failed to reload server configuration: <error>`). Runs bcrypt checks:
/// call it off the async workers.
pub fn reload(server: &Server, cli: &Cli) -> Result<Option<usize>, String> {
    let current = server.options();
    if current.config_file.is_none() {
        return Err("can only reload config when a file is provided using -c or --config".into());
    }
    let (new, _warnings) = ServerOptions::load(cli).map_err(|e| e.to_string())?;
    let changed: Vec<&str> = changed_settings(current, &new)
        .into_iter()
        .filter(|name| *name != "authorization")
        .collect();
    if !changed.is_empty() {
        return Err(format!(
            "config reload not supported for {}: this server applies only users and permissions on reload; restart it for the rest",
            changed.join(", ")
        ));
    }
    if new.auth == server.current_auth() {
        return Ok(None);
    }
    server.reload_auth(&new.auth).map(Some)
}

/// The names of the settings that differ between `old` and `new` (config key names).
pub fn changed_settings(old: &ServerOptions, new: &ServerOptions) -> Vec<&'static str> {
    let fields = [
        ("host", old.host != new.host),
        ("port", old.port != new.port),
        ("server_name", old.server_name != new.server_name),
        ("server_tags", old.server_tags != new.server_tags),
        ("http_host", old.http_host != new.http_host),
        ("http_port", old.http_port != new.http_port),
        ("max_payload", old.max_payload != new.max_payload),
        (
            "max_control_line",
            old.max_control_line != new.max_control_line,
        ),
        ("ping_interval", old.ping_interval != new.ping_interval),
        ("ping_max", old.ping_max != new.ping_max),
        ("write_deadline", old.write_deadline != new.write_deadline),
        ("max_pending", old.max_pending != new.max_pending),
        (
            "max_connections",
            old.max_connections != new.max_connections,
        ),
        ("jetstream", old.jetstream != new.jetstream),
        ("store_dir", old.store_dir != new.store_dir),
        (
            "max_memory_store",
            old.max_memory_store != new.max_memory_store,
        ),
        ("max_file_store", old.max_file_store != new.max_file_store),
        ("sync_interval", old.sync_interval != new.sync_interval),
        ("debug", old.debug != new.debug),
        ("trace", old.trace != new.trace),
        ("logtime", old.logtime != new.logtime),
        ("log_file", old.log_file != new.log_file),
        ("pid_file", old.pid_file != new.pid_file),
        ("ports_file_dir", old.ports_file_dir != new.ports_file_dir),
        ("config_file", old.config_file != new.config_file),
        (
            "lame_duck_duration",
            old.lame_duck_duration != new.lame_duck_duration,
        ),
        (
            "lame_duck_grace_period",
            old.lame_duck_grace_period != new.lame_duck_grace_period,
        ),
        ("authorization", old.auth != new.auth),
    ];
    let mut changed: Vec<&'static str> = fields
        .into_iter()
        .filter_map(|(name, differs)| differs.then_some(name))
        .collect();
    // Fail closed: a field added to the options but not to the list above still counts.
    let mut rest = new.clone();
    rest.auth = old.auth.clone();
    if changed.iter().all(|c| *c == "authorization") && *old != rest {
        changed.push("a setting");
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli_for(file: &std::path::Path) -> Cli {
        crate::cli::parse_args(["jsserver", "-c", file.to_str().unwrap(), "-p", "-1"]).unwrap()
    }

    #[test]
    fn unchanged_reloads_users_apply_and_other_changes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.conf");
        std::fs::write(&file, "debug: false\nlame_duck_duration: \"30s\"\n").unwrap();
        let cli = cli_for(&file);
        let (current, _) = ServerOptions::load(&cli).unwrap();
        let server = Server::new(current);
        assert_eq!(reload(&server, &cli), Ok(None));

        std::fs::write(&file, "debug: true\nlame_duck_duration: \"40s\"\n").unwrap();
        let e = reload(&server, &cli).unwrap_err();
        assert!(
            e.starts_with("config reload not supported for debug, lame_duck_duration:"),
            "{e}"
        );

        // Users are applied (no clients to close here), and a second identical reload is a
        // no-op.
        std::fs::write(
            &file,
            "lame_duck_duration: \"30s\"\nauthorization { token: s3cret }\n",
        )
        .unwrap();
        assert_eq!(reload(&server, &cli), Ok(Some(0)));
        assert!(server.auth().required());
        assert_eq!(reload(&server, &cli), Ok(None));

        std::fs::write(&file, "port: [nonsense\n").unwrap();
        assert!(reload(&server, &cli).is_err());

        // A refused setting fails the reload as it fails start-up.
        std::fs::write(
            &file,
            "lame_duck_duration: \"30s\"\ncluster { port: 6222 }\n",
        )
        .unwrap();
        assert!(reload(&server, &cli).is_err());

        let no_file = Server::new(ServerOptions::default());
        assert_eq!(
            reload(&no_file, &cli).unwrap_err(),
            "can only reload config when a file is provided using -c or --config"
        );
    }
}
