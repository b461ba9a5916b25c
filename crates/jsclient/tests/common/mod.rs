//! Starts a real server binary for jsclient's integration tests.
//!
//! Which binary: `JSCLIENT_TEST_SERVER` if set (e.g. `$(which nats-server)`), else the
//! workspace's `target/debug/jsserver`, which must have been built first with
//! `cargo build -p jsserver` (a test cannot build it: the running `cargo test` holds the
//! build-directory lock). The server runs on a free loopback port with JetStream and a scratch
//! store directory, and is killed on drop.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server process.
pub struct TestServer {
    child: Child,
    /// Client port.
    pub port: u16,
    /// Scratch directory (log, store).
    pub dir: tempfile::TempDir,
}

/// The binary under test.
pub fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("JSCLIENT_TEST_SERVER") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")));
    let path = target.join("debug").join("jsserver");
    assert!(
        path.exists(),
        "{} not found: run `cargo build -p jsserver` first, or set JSCLIENT_TEST_SERVER to a \
         server binary (e.g. $(which nats-server))",
        path.display()
    );
    path
}

impl TestServer {
    /// Starts the server on a free port.
    pub fn start() -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::spawn(dir, -1)
    }

    /// Starts the server on a free port with `-c FILE`, FILE holding `conf`.
    pub fn start_with_config(conf: &str) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("server.conf"), conf).expect("write config");
        Self::spawn(dir, -1)
    }

    fn spawn(dir: tempfile::TempDir, port: i32) -> TestServer {
        let conf = dir.path().join("server.conf");
        let log = dir.path().join("server.log");
        let _ = std::fs::remove_file(&log);
        let store = dir.path().join("store");
        let child = Command::new(server_binary())
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(&store)
            .arg("-l")
            .arg(&log)
            .args(if conf.exists() {
                vec!["-c".into(), conf.into_os_string()]
            } else {
                Vec::new()
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let mut server = TestServer {
            child,
            port: 0,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("Server is ready") {
                let line = text
                    .lines()
                    .find(|l| l.contains("Listening for client connections on"))
                    .expect("listening line");
                server.port = line.rsplit(':').next().unwrap().trim().parse().unwrap();
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("server exited ({status}):\n{text}");
            }
            assert!(Instant::now() < deadline, "server not ready:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the server and starts a new one on the same port and store.
    pub fn restart(mut self) -> TestServer {
        self.kill();
        let port = self.port;
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"));
        drop(self);
        Self::spawn(dir, i32::from(port))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}
