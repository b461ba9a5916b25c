//! Config reload on SIGHUP (`--signal reload`).
//!
//! The config file is read again with the flags the server was started with (flags win, as at
//! start-up) and checked exactly as at start-up: a malformed file, an invalid value or a
//! refused setting fails the reload. No setting is applied to the running server yet, so a
//! reload succeeds only when the result is what the server already runs with (`Reloaded
//! server configuration`); a change is refused, naming the changed settings, and the server
//! goes on with the options it has. In particular users and permissions
//! (`authorization`, `no_auth_user`, `--user`/`--pass`/`--auth`) are not reloaded: a
//! reload that changes them fails rather than leaving connections with permissions the file
//! no longer grants unnoticed. nats-server reloads most of its settings; what is refused here
//! is refused with its text `config reload not supported for …`.

use crate::cli::Cli;
use crate::options::ServerOptions;

/// Reloads the config: `Ok` when it is valid and unchanged, else the error to log
/// (`Failed to reload server configuration: <error>`).
pub fn reload(current: &ServerOptions, cli: &Cli) -> Result<(), String> {
    if current.config_file.is_none() {
        return Err("can only reload config when a file is provided using -c or --config".into());
    }
    let (new, _warnings) = ServerOptions::load(cli).map_err(|e| e.to_string())?;
    let changed = changed_settings(current, &new);
    if changed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "config reload not supported for {}: this server applies no changed settings on reload yet; restart it instead",
        changed.join(", ")
    ))
}

/// The names of the settings that differ between `old` and `new` (config key names).
pub fn changed_settings(old: &ServerOptions, new: &ServerOptions) -> Vec<&'static str> {
    let fields = [
        ("host", old.host != new.host),
        ("port", old.port != new.port),
        ("server_name", old.server_name != new.server_name),
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
    if changed.is_empty() && old != new {
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
    fn unchanged_reloads_and_changes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.conf");
        std::fs::write(&file, "debug: false\nlame_duck_duration: \"30s\"\n").unwrap();
        let cli = cli_for(&file);
        let (current, _) = ServerOptions::load(&cli).unwrap();
        assert_eq!(reload(&current, &cli), Ok(()));

        std::fs::write(&file, "debug: true\nlame_duck_duration: \"40s\"\n").unwrap();
        let e = reload(&current, &cli).unwrap_err();
        assert!(
            e.starts_with("config reload not supported for debug, lame_duck_duration:"),
            "{e}"
        );

        std::fs::write(
            &file,
            "lame_duck_duration: \"30s\"\nauthorization { token: s3cret }\n",
        )
        .unwrap();
        let e = reload(&current, &cli).unwrap_err();
        assert!(e.contains("not supported for authorization"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");

        std::fs::write(&file, "port: [nonsense\n").unwrap();
        assert!(reload(&current, &cli).is_err());

        // A refused setting fails the reload as it fails start-up.
        std::fs::write(
            &file,
            "lame_duck_duration: \"30s\"\ncluster { port: 6222 }\n",
        )
        .unwrap();
        assert!(reload(&current, &cli).is_err());

        let no_file = ServerOptions::default();
        assert_eq!(
            reload(&no_file, &cli).unwrap_err(),
            "can only reload config when a file is provided using -c or --config"
        );
    }
}
