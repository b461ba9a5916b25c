//! Starts the real `jsserver` binary the way client test harnesses start `nats-server`.
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod pki;
pub mod ws;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `jsserver` child process on a free loopback port, killed on drop.
pub struct TestServer {
    child: Child,
    /// The client port read from the server's log.
    pub port: u16,
    /// Scratch directory holding the log file and the store dir.
    pub dir: tempfile::TempDir,
    /// The `-l` log file.
    pub log: PathBuf,
}

/// The name of [`TestServer::start_with_config`]'s config file.
const CONFIG_FILE: &str = "server.conf";

/// The config of `sync_interval: always` (fsync before every PubAck).
pub const SYNC_ALWAYS: &str = "jetstream { sync_interval: always }\n";

/// How long to wait for a spawned server to log that it is ready: generous, it is a wait for a
/// condition, not a timing assertion.
const READY_WAIT: Duration = Duration::from_secs(30);

impl TestServer {
    /// Starts `jsserver -a 127.0.0.1 -p -1 -l LOG -sd DIR <extra>` and waits for
    /// `Server is ready` in its log.
    pub fn start(extra: &[&str]) -> TestServer {
        TestServer::start_in(tempfile::tempdir().expect("temp dir"), extra)
    }

    /// [`TestServer::start`] with `-c FILE`, FILE holding `conf` and kept in the server's
    /// scratch directory (so it outlives the server and serves [`TestServer::restart`]; its
    /// path is [`TestServer::config_path`]).
    pub fn start_with_config(conf: &str, extra: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join(CONFIG_FILE);
        std::fs::write(&file, conf).expect("write config");
        let file = file.display().to_string();
        let mut args = vec!["-c", file.as_str()];
        args.extend_from_slice(extra);
        TestServer::start_in(dir, &args)
    }

    /// The config file written by [`TestServer::start_with_config`].
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join(CONFIG_FILE)
    }

    fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> TestServer {
        let log = dir.path().join("server.log");
        let store = dir.path().join("store");
        let mut args: Vec<String> = vec![
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            "-1".into(),
            "-l".into(),
            log.display().to_string(),
            "-sd".into(),
            store.display().to_string(),
            "-js".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        TestServer::spawn(args, dir, log)
    }

    /// Starts the binary with exactly `args` (which must make it log to `log`).
    pub fn spawn(args: Vec<String>, dir: tempfile::TempDir, log: PathBuf) -> TestServer {
        TestServer::spawn_env(args, &[], dir, log)
    }

    /// [`TestServer::spawn`] with `env` set for the process.
    pub fn spawn_env(
        args: Vec<String>,
        env: &[(&str, &str)],
        dir: tempfile::TempDir,
        log: PathBuf,
    ) -> TestServer {
        let child = Command::new(server_binary())
            .args(&args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn jsserver");
        let mut server = TestServer {
            child,
            port: 0,
            dir,
            log,
        };
        let text = server.wait_for_log("Server is ready");
        server.port = listen_port(&text).expect("no 'Listening for client connections on' line");
        server
    }

    /// Polls the log file until it contains `needle`; returns the whole log.
    pub fn wait_for_log(&mut self, needle: &str) -> String {
        wait_for_file_text(&self.log, needle, &mut self.child)
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process with SIGKILL (no chance to flush anything) and waits for it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a new server in `old`'s scratch directory (same log file, appended), with
    /// `-a 127.0.0.1 -p -1 -l LOG -js` and `extra`; the old one must have stopped.
    pub fn restart(mut old: TestServer, extra: &[&str]) -> TestServer {
        let dir = std::mem::replace(&mut old.dir, tempfile::tempdir().expect("temp dir"));
        let log = old.log.clone();
        drop(old);
        let _ = std::fs::remove_file(&log);
        let mut args: Vec<String> = ["-a", "127.0.0.1", "-p", "-1", "-js", "-l"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push(log.display().to_string());
        args.extend(extra.iter().map(|s| s.to_string()));
        TestServer::spawn(args, dir, log)
    }

    /// Waits for the process to exit by itself (panics with the log after `limit`, a generous
    /// bound, not a timing assertion).
    pub fn wait_for_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {limit:?}; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits for the process to exit; returns whether it exited by itself.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().expect("wait for jsserver")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary under test: `jsserver`, or whatever `JSSERVER_TEST_BINARY` names (e.g.
/// `nats-server`, to check that a test states the reference server's behaviour).
pub fn server_binary() -> String {
    std::env::var("JSSERVER_TEST_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_jsserver").to_owned())
}

/// How a run of the binary to its exit ended: its status and what it printed.
pub struct Exited {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Exited {
    /// Both outputs, stderr first.
    pub fn text(&self) -> String {
        format!("{}{}", self.stderr, self.stdout)
    }
}

/// Runs the binary with `args` until it exits (a start-up refusal), its output kept in files
/// so that a chatty server never blocks on a full pipe. Kills it and panics when it is still
/// running after 30 s: it started where it should have stopped.
pub fn run_to_exit(args: &[&str]) -> Exited {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(server_binary())
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("spawn the server");
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?}: still running after 30 s; output:\n{}{}",
                read(&err_path),
                read(&out_path)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Exited {
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// [`run_to_exit`] with `-c FILE` (a `server.conf` holding `conf`) and then `args`.
pub fn run_config_to_exit(conf: &str, args: &[&str]) -> Exited {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.conf");
    std::fs::write(&path, conf).unwrap();
    let all: Vec<&str> = [&["-c", path.to_str().unwrap()][..], args].concat();
    run_to_exit(&all)
}

/// Waits until `path` contains `needle` (panics with the log if the child exits first).
pub fn wait_for_file_text(path: &Path, needle: &str, child: &mut Child) -> String {
    let deadline = Instant::now() + READY_WAIT;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("jsserver exited ({status}) before logging {needle:?}; log:\n{text}");
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the log within {READY_WAIT:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The JSON of an INFO line (`INFO {...}`, with or without its CRLF).
pub fn info_json(info: &str) -> serde_json::Value {
    let json = info
        .strip_prefix("INFO ")
        .unwrap_or_else(|| panic!("not an INFO line: {info:?}"));
    serde_json::from_str(json.trim()).expect("INFO JSON")
}

/// The port from `Listening for client connections on HOST:PORT`.
pub fn listen_port(log: &str) -> Option<u16> {
    let line = log
        .lines()
        .find(|l| l.contains("Listening for client connections on"))?;
    line.rsplit(':').next()?.trim().parse().ok()
}

/// A raw TCP connection for exact-bytes tests.
pub struct Raw {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Raw {
    /// Connects and returns the connection with the INFO line already read.
    pub fn connect(port: u16) -> (Raw, String) {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let writer = stream.try_clone().expect("clone");
        let mut raw = Raw {
            reader: BufReader::new(stream),
            writer,
        };
        let mut info = String::new();
        raw.reader.read_line(&mut info).expect("read INFO");
        (raw, info)
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write");
    }

    /// Reads one line including its CRLF ("" at EOF), skipping the asynchronous INFO that
    /// nats-server may send after the first PONG (the INFO before CONNECT is read by
    /// [`Raw::connect`]).
    pub fn line(&mut self) -> String {
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("read line");
            if !line.starts_with("INFO ") {
                return line;
            }
        }
    }

    /// Reads exactly `n` bytes.
    pub fn exact(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        self.reader.read_exact(&mut buf).expect("read exact");
        buf
    }

    /// Reads lines until one equals `want` (skipping server PINGs); panics at EOF.
    pub fn expect_line(&mut self, want: &str) {
        loop {
            let line = self.line();
            assert!(!line.is_empty(), "EOF while waiting for {want:?}");
            if line == want {
                return;
            }
            assert_eq!(
                line, "PING\r\n",
                "unexpected line while waiting for {want:?}"
            );
        }
    }

    /// Reads until EOF and returns what came (the server closed the connection).
    pub fn read_to_eof(&mut self) -> String {
        let mut rest = String::new();
        let _ = self.reader.read_to_string(&mut rest);
        rest
    }
}

/// A free loopback port (bound then released).
///
/// Picked at random below the kernel's ephemeral range (Linux: 32768 and up), so that the
/// outgoing connections of running servers and proxies (whose source ports come from that
/// range) cannot take it between this check and the server's bind; a port from `bind(:0)`
/// could be, and a cluster test with many routes lost that race. Never the same port twice
/// in one test process: the tests of a file run at once, and two of them picking the same
/// port before either server bound it made one server fail to start.
pub fn free_port() -> u16 {
    use rand::Rng;
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = rand::rng();
    for _ in 0..1000 {
        let port = rng.random_range(20_000..32_000);
        if !handed.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed.push(port);
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Fetches up to `n` messages from a pull consumer, waiting at most `expires`; panics on a
/// failed request or delivery.
pub async fn fetch(
    c: &async_nats::jetstream::consumer::PullConsumer,
    n: usize,
    expires: Duration,
) -> Vec<async_nats::jetstream::Message> {
    use futures_util::StreamExt;
    let mut batch = c
        .fetch()
        .max_messages(n)
        .expires(expires)
        .messages()
        .await
        .expect("fetch request");
    let mut got = Vec::new();
    while let Some(m) = batch.next().await {
        got.push(m.expect("delivery"));
    }
    got
}

/// One delivery: stream seq, delivery count, and the ack subject.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Stream sequence.
    pub seq: u64,
    /// Delivery count.
    pub count: u64,
    /// The ack subject.
    pub reply: String,
}

/// A `no_wait` pull of up to `batch`: the deliveries made before the request ended.
pub async fn pull(
    nc: &async_nats::Client,
    stream: &str,
    consumer: &str,
    batch: u64,
) -> Vec<Delivery> {
    let inbox = nc.new_inbox();
    use futures_util::StreamExt;
    let mut sub = nc.subscribe(inbox.clone()).await.expect("subscribe");
    nc.publish_with_reply(
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"),
        inbox,
        bytes::Bytes::from(format!(r#"{{"batch":{batch},"no_wait":true}}"#)),
    )
    .await
    .expect("pull");
    let mut got = Vec::new();
    while (got.len() as u64) < batch {
        let msg = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("pull answered in time")
            .expect("subscription open");
        if msg.status.is_some() {
            break;
        }
        let reply = msg.reply.expect("ack subject").to_string();
        // $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>
        let tokens: Vec<&str> = reply.split('.').collect();
        got.push(Delivery {
            seq: tokens[5].parse().unwrap(),
            count: tokens[4].parse().unwrap(),
            reply,
        });
    }
    got
}

/// The stream seqs of `ds`.
pub fn seqs(ds: &[Delivery]) -> Vec<u64> {
    ds.iter().map(|d| d.seq).collect()
}

/// Runs `tests/scripts/<name>` with python3 against a fresh server; the script prints a line
/// starting with `OK` when everything it checks held. Skipped (with a note) when `python3`
/// with `nats-py` is not installed.
pub fn run_nats_py_script(name: &str) {
    let has_nats_py = std::process::Command::new("python3")
        .args(["-c", "import nats"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_nats_py {
        eprintln!("skipped: python3 with nats-py is not installed");
        return;
    }
    let server = TestServer::start(&[]);
    let script = format!("{}/../../tests/scripts/{name}", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(server.url())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.starts_with("OK"),
        "{name} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}
