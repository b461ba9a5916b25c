//! Signals: sending one to a running server (`--signal <signal>[=<pid or pid file>]`, as
//! nats-server's `-sl`), and what a running server does with the ones it traps.
//!
//! | `--signal` | sends | the server |
//! | --- | --- | --- |
//! | `ldm` | SIGUSR2 | enters lame-duck mode ([`crate::server::Server::lame_duck`]) |
//! | `term` | SIGTERM | stops gracefully (ignored while in lame-duck mode, as nats-server) |
//! | `quit` | SIGINT | stops gracefully |
//! | `stop` | SIGKILL | is killed |
//! | `reopen` | SIGUSR1 | reopens its log file ([`crate::logging::LogGuard::reopen`]) |
//! | `reload` | SIGHUP | reloads its config file ([`crate::reload`]) |
//!
//! Without a pid, the signal goes to the one running `jsserver` process (found with `pgrep`,
//! as nats-server finds `nats-server`); more than one is an error listing them, unless the
//! pid ends in `*`, which sends to every one whose pid starts with what comes before it. The
//! value after `=` is read as a pid file when a file of that name exists, else as the pid.

use rustix::process::{kill_process, Pid, Signal};

/// The process name looked for when no pid is given.
pub const PROCESS_NAME: &str = "jsserver";

/// What `--signal` asks for (nats-server's `Command`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `stop`: SIGKILL.
    Stop,
    /// `quit`: SIGINT.
    Quit,
    /// `reopen`: SIGUSR1.
    Reopen,
    /// `reload`: SIGHUP.
    Reload,
    /// `ldm`: SIGUSR2.
    LameDuck,
    /// `term`: SIGTERM.
    Term,
}

impl Command {
    /// The command named `name`, or nats-server's `unknown signal "x"`.
    pub fn parse(name: &str) -> Result<Command, String> {
        Ok(match name {
            "stop" => Command::Stop,
            "quit" => Command::Quit,
            "reopen" => Command::Reopen,
            "reload" => Command::Reload,
            "ldm" => Command::LameDuck,
            "term" => Command::Term,
            _ => return Err(format!("unknown signal {name:?}")),
        })
    }

    /// The signal it sends.
    pub fn signal(self) -> Signal {
        match self {
            Command::Stop => Signal::KILL,
            Command::Quit => Signal::INT,
            Command::Reopen => Signal::USR1,
            Command::Reload => Signal::HUP,
            Command::LameDuck => Signal::USR2,
            Command::Term => Signal::TERM,
        }
    }
}

/// `--signal` with `arg` (`<signal>[=<pid or pid file>]`): sends the signal, or says why not
/// with nats-server's texts. `main` prints the error as `jsserver: <error>` and exits 1, else
/// exits 0.
pub fn send(arg: &str) -> Result<(), String> {
    let parts: Vec<&str> = arg.split('=').collect();
    if parts.len() > 2 {
        return Err(format!(
            "invalid signal parameters: [{}]",
            parts[2..].join(" ")
        ));
    }
    let pid = parts.get(1).map(|p| read_pid_file(p)).unwrap_or_default();
    send_to(parts[0], &pid, resolve_pids)
}

/// The contents of the file `value` when it can be read (a pid file), else `value`.
fn read_pid_file(value: &str) -> String {
    match std::fs::read_to_string(value) {
        Ok(text) => text.trim().to_owned(),
        Err(_) => value.to_owned(),
    }
}

/// nats-server's `ProcessSignal`, with the running servers' pids from `running`.
fn send_to(
    command: &str,
    pid_expr: &str,
    running: impl FnOnce() -> Result<Vec<i32>, String>,
) -> Result<(), String> {
    let is_glob = pid_expr.ends_with('*');
    let pid_str = pid_expr.strip_suffix('*').unwrap_or(pid_expr);
    let mut pids = Vec::new();
    if !pid_str.is_empty() {
        // Unlike kill(2), no 0 or negative pid: those would signal whole process groups.
        let pid = pid_str
            .parse::<i32>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("invalid pid: {pid_str}"))?;
        pids.push(pid);
    }
    if pid_str.is_empty() || is_glob {
        pids = running()?;
    }
    if pids.len() > 1 && !is_glob {
        let list: String = pids.iter().map(|p| format!("\n{p}")).collect();
        return Err(format!("multiple {PROCESS_NAME} processes running:{list}"));
    }
    if pids.is_empty() {
        return Err(format!("no {PROCESS_NAME} processes running"));
    }
    let signal = Command::parse(command)?.signal();
    let mut errors = String::new();
    for pid in pids {
        let text = pid.to_string();
        if !pid_str.is_empty() && text != pid_str && !(is_glob && text.starts_with(pid_str)) {
            continue;
        }
        let Some(target) = Pid::from_raw(pid).filter(|_| pid > 0) else {
            continue;
        };
        if let Err(err) = kill_process(target, signal) {
            errors.push_str(&format!("\nsignal {command:?} {pid}: {err}"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The pids of the running `jsserver` processes but this one (`pgrep jsserver`).
fn resolve_pids() -> Result<Vec<i32>, String> {
    let unresolved = || "unable to resolve pid, try providing one".to_owned();
    let output = std::process::Command::new("pgrep")
        .arg(PROCESS_NAME)
        .output()
        .map_err(|_| unresolved())?;
    // pgrep exits 1 when nothing matches: no pids.
    if !output.status.success() && output.status.code() != Some(1) {
        return Err(unresolved());
    }
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if line.is_empty() {
            continue;
        }
        let pid: i32 = line.parse().map_err(|_| unresolved())?;
        if pid != me {
            pids.push(pid);
        }
    }
    Ok(pids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> Result<Vec<i32>, String> {
        Ok(vec![])
    }

    #[test]
    fn commands_and_their_signals() {
        for (name, sig) in [
            ("stop", Signal::KILL),
            ("quit", Signal::INT),
            ("reopen", Signal::USR1),
            ("reload", Signal::HUP),
            ("ldm", Signal::USR2),
            ("term", Signal::TERM),
        ] {
            assert_eq!(Command::parse(name).unwrap().signal(), sig);
        }
        assert_eq!(Command::parse("LDM").unwrap_err(), "unknown signal \"LDM\"");
    }

    #[test]
    fn errors_are_nats_servers() {
        assert_eq!(
            send("ldm=1=2=3").unwrap_err(),
            "invalid signal parameters: [2 3]"
        );
        assert_eq!(send_to("ldm", "abc", none).unwrap_err(), "invalid pid: abc");
        assert_eq!(send_to("ldm", "0", none).unwrap_err(), "invalid pid: 0");
        assert_eq!(
            send_to("ldm", "", none).unwrap_err(),
            "no jsserver processes running"
        );
        assert_eq!(
            send_to("ldm", "", || Ok(vec![7, 9])).unwrap_err(),
            "multiple jsserver processes running:\n7\n9"
        );
        assert_eq!(
            send_to("bogus", "", || Ok(vec![7])).unwrap_err(),
            "unknown signal \"bogus\""
        );
        // A glob matching none of the running pids sends nothing.
        assert_eq!(send_to("ldm", "1*", || Ok(vec![23, 42])), Ok(()));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.pid");
        std::fs::write(&file, "1234\n").unwrap();
        assert_eq!(read_pid_file(file.to_str().unwrap()), "1234");
        assert_eq!(read_pid_file("4321"), "4321");
    }
}
