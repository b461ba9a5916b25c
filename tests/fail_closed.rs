//! Fail closed: a setting for access control, encryption, replication or resource limits that
//! jsserver does not enforce yet (the refused entries of `jsserver::options::UNSUPPORTED`)
//! stops the real binary at start-up with an `[FTL]` line naming the setting (and, for a config
//! key, its file, line and column), a non-zero exit status, and no port opened; configs of the
//! features we have still start. (Unknown keys: `tests/config_strict.rs`.)
//!
//! These state jsserver's own behaviour (nats-server runs with these settings), so they are not
//! meant for `JSSERVER_TEST_BINARY=nats-server`.

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, server_binary, Raw, TestServer};
use jsserver::options::{Section, UNSUPPORTED};

/// How long a refused server may take to exit: generous, it is a wait for a condition.
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// What a run of the binary that should refuse to start did.
struct Outcome {
    status: ExitStatus,
    stderr: String,
    /// Ports that accepted a connection while it ran or after it exited.
    accepted: Vec<u16>,
}

/// Runs the binary with `args` until it exits, checking meanwhile that nothing accepts a
/// connection on `ports`. Kills it (and reports a failure through `accepted`/`status`) if it is
/// still running after [`EXIT_WAIT`].
fn run_to_exit(args: &[String], ports: &[u16]) -> Outcome {
    let mut child = Command::new(server_binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn jsserver");
    let mut accepted = Vec::new();
    let probe = |accepted: &mut Vec<u16>| {
        for &port in ports {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
                && !accepted.contains(&port)
            {
                accepted.push(port);
            }
        }
    };
    let deadline = Instant::now() + EXIT_WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for jsserver") {
            break status;
        }
        probe(&mut accepted);
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().expect("wait for jsserver");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    probe(&mut accepted);
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr piped")
        .read_to_string(&mut stderr);
    Outcome {
        status,
        stderr,
        accepted,
    }
}

/// Whether `line` has nats-server's shape `[PID] YYYY/MM/DD HH:MM:SS.UUUUUU [FTL] ...`.
fn is_fatal_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('[') else {
        return false;
    };
    let Some((pid, rest)) = rest.split_once("] ") else {
        return false;
    };
    pid.parse::<u32>().is_ok()
        && rest.len() > 33
        && rest.as_bytes()[4] == b'/'
        && rest.as_bytes()[19] == b'.'
        && rest[26..].starts_with(" [FTL] ")
}

/// Checks one refused run: exit status non-zero, an `[FTL]` line containing every one of
/// `needles`, no port accepted, no "Listening" line. Returns the problems found, each naming
/// `case`.
fn check_refused(case: &str, outcome: &Outcome, needles: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    if outcome.status.success() || outcome.status.code().is_none() {
        problems.push(format!(
            "{case}: exit status {} (want a non-zero exit code); stderr:\n{}",
            outcome.status, outcome.stderr
        ));
    }
    let fatal: Vec<&str> = outcome
        .stderr
        .lines()
        .filter(|l| l.contains("[FTL]"))
        .collect();
    if !fatal.iter().all(|l| is_fatal_line(l)) {
        problems.push(format!(
            "{case}: [FTL] lines not in nats-server's line format:\n{}",
            outcome.stderr
        ));
    }
    for needle in needles {
        if !fatal
            .iter()
            .any(|l| l.contains(needle.as_str()) && l.contains("is not supported yet"))
        {
            problems.push(format!(
                "{case}: no [FTL] line with {needle:?} and \"is not supported yet\"; stderr:\n{}",
                outcome.stderr
            ));
        }
    }
    if !outcome.accepted.is_empty() {
        problems.push(format!(
            "{case}: port(s) {:?} accepted a connection",
            outcome.accepted
        ));
    }
    if outcome.stderr.contains("Listening for") {
        problems.push(format!("{case}: it listened:\n{}", outcome.stderr));
    }
    problems
}

/// A refused config case: the config text after the `listen`/`http_port` lines (which are
/// lines 2 and 3; the text starts at line 4), and the fields expected in `[FTL]` lines as
/// `(shown name, line, column)`.
struct ConfCase {
    name: &'static str,
    body: String,
    want: Vec<(String, usize, usize)>,
}

fn conf_case(name: &'static str, body: &str, want: &[(&str, usize, usize)]) -> ConfCase {
    ConfCase {
        name,
        body: body.to_owned(),
        want: want
            .iter()
            .map(|(k, l, c)| (k.to_string(), *l, *c))
            .collect(),
    }
}

/// Writes `case`'s config to `dir/server.conf` listening on `port` (monitoring on `http`),
/// runs the binary on it, and returns the problems found.
fn run_conf_case(dir: &Path, case: &ConfCase, port: u16, http: u16) -> Vec<String> {
    let file = dir.join("server.conf");
    let text = format!(
        "# fail-closed case: {}\nlisten: 127.0.0.1:{port}\nhttp_port: {http}\n{}",
        case.name, case.body
    );
    std::fs::write(&file, &text).expect("write config");
    let args = vec!["-c".to_owned(), file.display().to_string()];
    let outcome = run_to_exit(&args, &[port, http]);
    let needles: Vec<String> = case
        .want
        .iter()
        .map(|(key, line, column)| format!("{}:{line}:{column}: \"{key}\"", file.display()))
        .collect();
    check_refused(&format!("config {:?}", case.name), &outcome, &needles)
}

/// The realistic configs a user may write for a setting we lack.
fn realistic_cases(dir: &Path) -> Vec<ConfCase> {
    let store = dir.join("store");
    vec![
        conf_case(
            "auth callout",
            "Authorization: {\n  users: [ {user: auth, password: pw} ]\n  auth_callout {\n    \
             issuer: ABJHLOVMPA4CI6R5KLNGOB4GSLNIY7IOUPAJC4YFNDLQVIOBYQGUWVLA\n    auth_users: [ auth ]\n  }\n}\n",
            &[("Authorization.auth_callout", 6, 3)],
        ),
        conf_case(
            "account mappings",
            "accounts {\n  A: { users: [ {user: a, password: a} ] }\n  B: {\n    mappings: { \"a.>\": \"b.>\" }\n  }\n}\n",
            &[("accounts.B.mappings", 7, 5)],
        ),
        conf_case(
            "tls with pinned certificates",
            "tls {\n  cert_file: \"./server-cert.pem\"\n  key_file: \"./server-key.pem\"\n  verify: true\n  \
             pinned_certs: [\"a\"]\n}\n",
            &[("tls.pinned_certs", 8, 3)],
        ),
        conf_case(
            "leafnodes",
            "leafnodes {\n  remotes: [ { url: \"nats-leaf://127.0.0.1:7422\" } ]\n}\n",
            &[("leafnodes", 4, 1)],
        ),
        conf_case(
            "gateway",
            "gateway {\n  name: g1\n  listen: 127.0.0.1:7222\n}\n",
            &[("gateway", 4, 1)],
        ),
        conf_case(
            "websocket with its own users",
            "websocket {\n  port: 8080\n  no_tls: true\n  authorization { token: s3cret }\n}\n",
            &[("websocket.authorization", 7, 3)],
        ),
        conf_case(
            "websocket with a JWT cookie and pinned certificates",
            "websocket {\n  port: 8080\n  jwt_cookie: jwt\n  tls {\n    cert_file: c.pem\n    \
             key_file: k.pem\n    pinned_certs: [\"a\"]\n  }\n}\n",
            &[
                ("websocket.jwt_cookie", 6, 3),
                ("websocket.tls.pinned_certs", 10, 5),
            ],
        ),
        conf_case("mqtt", "mqtt {\n  port: 1883\n}\n", &[("mqtt", 4, 1)]),
        conf_case(
            "operator and resolver",
            "operator: \"./op.jwt\"\nsystem_account: AAAXAUVSGK7TCRHFIRAS4SYXVJ76EWDMNXZM6ARFGXP7BASNDGLKU7A5\nresolver: MEMORY\n",
            &[("operator", 4, 1), ("resolver", 6, 1)],
        ),
        conf_case(
            "encryption at rest",
            &format!(
                "jetstream {{\n  store_dir: \"{}\"\n  cipher: chachapoly\n  key: \"s3cret\"\n}}\n",
                store.display()
            ),
            &[("jetstream.cipher", 6, 3), ("jetstream.key", 7, 3)],
        ),
        conf_case(
            "global account mappings",
            "mappings {\n  \"audit.>\": \"blackhole.>\"\n}\n",
            &[("mappings", 4, 1)],
        ),
        conf_case(
            "server-wide JetStream limits",
            &format!(
                "jetstream {{\n  store_dir: \"{}\"\n  limits {{ max_ha_assets: 1 }}\n}}\n",
                store.display()
            ),
            &[("jetstream.limits", 6, 3)],
        ),
    ]
    // A key in an included file: `refused_key_in_an_included_file_...` below.
}

/// One case per key of every refused [`UNSUPPORTED`] entry, lowercase, and the first key in
/// upper case.
fn table_cases(dir: &Path) -> Vec<ConfCase> {
    let store = dir.join("store");
    let mut cases = Vec::new();
    for setting in UNSUPPORTED.iter().filter(|s| s.purpose().is_some()) {
        let spellings = setting
            .keys
            .iter()
            .map(|k| k.to_string())
            .chain(std::iter::once(setting.keys[0].to_ascii_uppercase()));
        for key in spellings {
            let column = match setting.section {
                Section::Top => 1,
                Section::Account => 5,
                _ => 3,
            };
            let (body, shown, line) = match setting.section {
                Section::Top => (format!("{key}: {{}}\n"), key.clone(), 4),
                Section::JetStream => (
                    format!(
                        "jetstream {{\n  store_dir: \"{}\"\n  {key}: \"x\"\n}}\n",
                        store.display()
                    ),
                    format!("jetstream.{key}"),
                    6,
                ),
                Section::Authorization => (
                    format!("authorization {{\n  token: t\n  {key}: {{}}\n}}\n"),
                    format!("authorization.{key}"),
                    6,
                ),
                Section::Account => (
                    format!("accounts {{\n  A: {{\n    {key}: {{}}\n  }}\n}}\n"),
                    format!("accounts.A.{key}"),
                    6,
                ),
                Section::Tls => (
                    format!("tls {{\n  cert_file: c.pem\n  {key}: {{}}\n}}\n"),
                    format!("tls.{key}"),
                    6,
                ),
                Section::Websocket => (
                    format!("websocket {{\n  port: -1\n  {key}: {{}}\n}}\n"),
                    format!("websocket.{key}"),
                    6,
                ),
                Section::Cluster => (
                    format!("cluster {{\n  port: -1\n  {key}: {{}}\n}}\n"),
                    format!("cluster.{key}"),
                    6,
                ),
            };
            cases.push(ConfCase {
                name: "UNSUPPORTED table",
                body,
                want: vec![(shown, line, column)],
            });
        }
    }
    cases
}

#[test]
fn every_refused_config_setting_stops_the_server_before_it_listens() {
    let dir = tempfile::tempdir().unwrap();
    let (port, http) = (free_port(), free_port());
    let mut cases = realistic_cases(dir.path());
    cases.extend(table_cases(dir.path()));
    let mut problems = Vec::new();
    for case in &cases {
        problems.extend(run_conf_case(dir.path(), case, port, http));
    }
    assert!(
        problems.is_empty(),
        "{} of {} refused configs misbehaved:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n\n")
    );
}

#[test]
fn refused_key_in_an_included_file_names_that_file_and_reaches_the_log_file() {
    let dir = tempfile::tempdir().unwrap();
    let (port, http) = (free_port(), free_port());
    let auth = dir.path().join("auth.conf");
    std::fs::write(&auth, "# accounts\n\ntrusted: X\n").unwrap();
    let file = dir.path().join("server.conf");
    std::fs::write(
        &file,
        format!("port: {port}\nhttp_port: {http}\ninclude ./auth.conf\n"),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let args = vec![
        "-c".to_owned(),
        file.display().to_string(),
        "-l".to_owned(),
        log.display().to_string(),
    ];
    let outcome = run_to_exit(&args, &[port, http]);
    // The file as the include names it (`DIR/./auth.conf`).
    let needle = "auth.conf:3:1: \"trusted\"".to_owned();
    let problems = check_refused("include", &outcome, std::slice::from_ref(&needle));
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    // Harnesses read the -l file: the fatal line is there too.
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        log_text
            .lines()
            .any(|l| is_fatal_line(l) && l.contains(&needle)),
        "no [FTL] line in the log file:\n{log_text}"
    );
}

#[test]
fn every_refused_flag_stops_the_server_before_it_listens() {
    let (port, http) = (free_port(), free_port());
    let base = [
        "-a".to_owned(),
        "127.0.0.1".to_owned(),
        "-p".to_owned(),
        port.to_string(),
        "-m".to_owned(),
        http.to_string(),
    ];
    let mut cases: Vec<(Vec<String>, String)> = Vec::new();
    for flag in UNSUPPORTED.iter().flat_map(|r| r.flags) {
        let want = format!("flag --{}", flag.name);
        // Go's single-dash form, value as the next argument.
        let mut single = vec![format!("-{}", flag.name)];
        if !flag.boolean {
            single.push("x".to_owned());
        }
        cases.push((single, want.clone()));
        // Double dash, value after `=`.
        let value = if flag.boolean { "true" } else { "x" };
        cases.push((vec![format!("--{}={value}", flag.name)], want));
    }
    // As harnesses write them.
    cases.push((
        vec![
            "--tlscert".into(),
            "./cert.pem".into(),
            "-no_advertise".into(),
        ],
        "flag --no_advertise".into(),
    ));
    cases.push((
        vec![
            "-cluster".into(),
            "nats://127.0.0.1:6222".into(),
            "-routes".into(),
            "nats://127.0.0.1:6223".into(),
            "-no_advertise".into(),
        ],
        "flag --no_advertise".into(),
    ));
    let mut problems = Vec::new();
    for (extra, want) in &cases {
        let mut args = base.to_vec();
        args.extend(extra.iter().cloned());
        let outcome = run_to_exit(&args, &[port, http]);
        let case = format!("flags {extra:?}");
        problems.extend(check_refused(&case, &outcome, std::slice::from_ref(want)));
        if outcome.stderr.contains("unexpected argument") {
            problems.push(format!("{case}: clap's generic error:\n{}", outcome.stderr));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} refused flag sets misbehaved:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n\n")
    );
}

#[test]
fn a_harness_config_of_the_features_we_have_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (port, http) = (free_port(), free_port());
    let log = dir.path().join("server.log");
    let file = dir.path().join("server.conf");
    std::fs::write(
        &file,
        format!(
            "# as client harnesses write them\nport: {port}\nhost: 127.0.0.1\n\
             server_name: harness_js\nhttp_port: {http}\nmax_payload: 2MB\n\
             ping_interval: \"30s\"\njetstream {{\n  store_dir: \"{}\"\n}}\n\
             server_tags: [\"az:1\"]\nlame_duck_duration: \"30s\"\n\
             http_base_path: \"/\"\n",
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    let args = vec![
        "-c".to_owned(),
        file.display().to_string(),
        "-l".to_owned(),
        log.display().to_string(),
    ];
    let server = TestServer::spawn(args, dir, log);
    assert_eq!(server.port, port);
    let text = server.log_text();
    assert!(!text.contains("[FTL]"), "{text}");
    // Settings that do not affect safety are ignored, with a warning saying so.
    assert!(
        text.lines().any(|l| l.contains("[WRN]")
            && l.contains("\"http_base_path\"")
            && l.contains("is not supported and is ignored")),
        "no warning for http_base_path:\n{text}"
    );
    // lame_duck_duration and server_tags are settings of their own now: no warning.
    assert!(!text.contains("\"lame_duck_duration\""), "{text}");
    assert!(!text.contains("\"server_tags\""), "{text}");
    let (_raw, info) = Raw::connect(port);
    assert!(info.contains("\"jetstream\":true"), "{info}");
    assert!(info.contains("\"server_name\":\"harness_js\""), "{info}");
    assert!(info.contains("\"max_payload\":2097152"), "{info}");
    assert!(
        TcpStream::connect(("127.0.0.1", http)).is_ok(),
        "monitoring port {http} not listening"
    );
}

/// A stream or consumer setting that nats-server honours and jsserver does not is refused by
/// `$JS.API.STREAM.CREATE`/`UPDATE` and `CONSUMER.CREATE` with 10052 naming it, and nothing is
/// created; what clients send for key-value buckets and object stores still works.
#[tokio::test]
async fn stream_and_consumer_settings_we_do_not_honour_are_refused() {
    use futures_util::StreamExt;
    use serde_json::{json, Value};

    async fn api(nc: &async_nats::Client, subject: String, body: Value) -> Value {
        let payload = if body.is_null() {
            bytes::Bytes::new()
        } else {
            body.to_string().into()
        };
        let msg = tokio::time::timeout(Duration::from_secs(10), nc.request(subject, payload))
            .await
            .expect("answered in time")
            .expect("request");
        serde_json::from_slice(&msg.payload).expect("JSON response")
    }
    fn not_supported(field: &str) -> Value {
        json!({"code": 500, "err_code": 10052,
               "description": format!("{field} is not supported by this server yet")})
    }

    let server = TestServer::start(&[]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let cases = [
        (json!({"mirror": {"name": "X"}}), "mirror"),
        (json!({"sources": [{"name": "X"}]}), "sources"),
        (json!({"compression": "s2"}), "compression"),
        (json!({"first_seq": 100}), "first_seq"),
        (
            json!({"subject_transform": {"src": "t.>", "dest": "u.>"}}),
            "subject_transform",
        ),
        (
            json!({"republish": {"src": ">", "dest": "rp.>"}}),
            "republish",
        ),
        (json!({"allow_msg_counter": true}), "allow_msg_counter"),
        (json!({"allow_atomic": true}), "allow_atomic"),
        (json!({"allow_msg_schedules": true}), "allow_msg_schedules"),
        (json!({"persist_mode": "async"}), "persist_mode async"),
        (json!({"allow_batched": true}), "allow_batched"),
    ];
    for (extra, field) in cases {
        let mut body = json!({"name": "T"});
        if extra.get("mirror").is_none() {
            body["subjects"] = json!(["t.>"]);
        }
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let r = api(&nc, "$JS.API.STREAM.CREATE.T".into(), body.clone()).await;
        assert_eq!(r["error"], not_supported(field), "{body}: {r}");
        let info = api(&nc, "$JS.API.STREAM.INFO.T".into(), Value::Null).await;
        assert_eq!(
            info["error"]["err_code"], 10059,
            "{field}: created anyway: {info}"
        );
    }

    // Update: refused, the stored config unchanged.
    let plain = json!({"name": "U", "subjects": ["u.>"]});
    let r = api(&nc, "$JS.API.STREAM.CREATE.U".into(), plain).await;
    assert!(r.get("error").is_none(), "{r}");
    let update = json!({"name": "U", "subjects": ["u.>"], "republish": {"dest": "x.>"}});
    let r = api(&nc, "$JS.API.STREAM.UPDATE.U".into(), update).await;
    assert_eq!(r["error"], not_supported("republish"), "{r}");
    let info = api(&nc, "$JS.API.STREAM.INFO.U".into(), Value::Null).await;
    assert!(info["config"].get("republish").is_none(), "{info}");

    // Consumers: ack sampling is refused; the consumer is not created.
    let body = json!({"stream_name": "U", "config": {"durable_name": "S", "ack_policy": "explicit", "sample_freq": "100%"}});
    let r = api(&nc, "$JS.API.CONSUMER.CREATE.U.S".into(), body).await;
    assert_eq!(r["error"], not_supported("sample_freq"), "{r}");
    let r = api(&nc, "$JS.API.CONSUMER.INFO.U.S".into(), Value::Null).await;
    assert_eq!(r["error"]["err_code"], 10014, "{r}");

    // What async-nats sends for a key-value bucket and an object store is accepted.
    let js = async_nats::jetstream::new(nc.clone());
    let kv = js
        .create_key_value(async_nats::jetstream::kv::Config {
            bucket: "cfg".into(),
            history: 5,
            ..Default::default()
        })
        .await
        .expect("create bucket");
    kv.put("k", "v".into()).await.expect("put");
    assert_eq!(kv.get("k").await.expect("get").as_deref(), Some(&b"v"[..]));
    let mut watch = kv.watch_all().await.expect("watch");
    kv.put("k", "w".into()).await.expect("put again");
    let seen = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("watch in time")
        .expect("entry")
        .expect("entry ok");
    assert_eq!(seen.key, "k");
    let store = js
        .create_object_store(async_nats::jetstream::object_store::Config {
            bucket: "files".into(),
            ..Default::default()
        })
        .await
        .expect("create object store");
    let mut data: &[u8] = b"object bytes";
    store.put("o", &mut data).await.expect("object put");
    let mut obj = store.get("o").await.expect("object get");
    let mut got = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut obj, &mut got)
        .await
        .expect("read object");
    assert_eq!(got, b"object bytes");
}
