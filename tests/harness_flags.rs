//! Starting `jsserver` exactly as client test harnesses start `nats-server`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{free_port, listen_port, Raw, TestServer};

/// A minimal HTTP/1.0 GET; returns (status line, body).
fn http_get(port: u16, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect monitor");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.lines().next().unwrap_or_default().to_owned();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

#[test]
fn random_port_log_pid_and_config_files() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nats.log");
    let pid = dir.path().join("nats.pid");
    let conf = dir.path().join("nats.conf");
    let store = dir.path().join("store");
    std::fs::write(&conf, "# harness config\nserver_name: harness_test\n").unwrap();
    let args = vec![
        "-p".to_owned(),
        "-1".to_owned(),
        "-l".to_owned(),
        log.display().to_string(),
        "-P".to_owned(),
        pid.display().to_string(),
        "-c".to_owned(),
        conf.display().to_string(),
        "--store_dir".to_owned(),
        store.display().to_string(),
        "-js".to_owned(),
    ];
    let server = TestServer::spawn(args, dir, log);
    let text = server.log_text();
    assert!(
        text.contains("Store Directory: \""),
        "store dir logged:\n{text}"
    );
    let pid_text = std::fs::read_to_string(&pid).expect("pid file written");
    assert_eq!(pid_text.trim(), server.pid().to_string());
    let (_raw, info) = Raw::connect(server.port);
    assert!(
        info.contains(&format!("\"port\":{}", server.port)),
        "INFO names the real port: {info}"
    );
    assert!(
        info.contains("\"server_name\":\"harness_test\""),
        "config file applied: {info}"
    );
}

#[test]
fn fixed_ports_monitoring_and_go_style_flags() {
    let port = free_port();
    let http = free_port();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let args = vec![
        "-p".to_owned(),
        port.to_string(),
        "-m".to_owned(),
        http.to_string(),
        "-a".to_owned(),
        "127.0.0.1".to_owned(),
        "-js".to_owned(),
        format!("-sd={}", dir.path().join("sd").display()),
        format!("--log={}", log.display()),
    ];
    let server = TestServer::spawn(args, dir, log);
    assert_eq!(server.port, port);
    assert_eq!(listen_port(&server.log_text()), Some(port));

    let (status, body) = http_get(http, "/healthz");
    assert!(status.contains("200"), "{status}");
    assert_eq!(body, r#"{"status":"ok"}"#);

    let (_raw, _info) = Raw::connect(port);
    let (status, body) = http_get(http, "/varz");
    assert!(status.contains("200"), "{status}");
    let varz: serde_json::Value = serde_json::from_str(&body).expect("varz JSON");
    assert_eq!(varz["port"], port);
    assert_eq!(varz["max_payload"], 1_048_576);
    assert_eq!(varz["connections"], 1);
    assert!(varz["server_id"].is_string());

    let (status, body) = http_get(http, "/connz?subs=1");
    assert!(status.contains("200"), "{status}");
    let connz: serde_json::Value = serde_json::from_str(&body).expect("connz JSON");
    assert_eq!(connz["num_connections"], 1);
    assert_eq!(connz["connections"][0]["ip"], "127.0.0.1");

    let (status, body) = http_get(http, "/jsz");
    assert!(status.contains("200"), "{status}");
    let jsz: serde_json::Value = serde_json::from_str(&body).expect("jsz JSON");
    assert!(jsz["config"]["store_dir"]
        .as_str()
        .unwrap()
        .ends_with("sd/jetstream"));
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut server = TestServer::start(&[]);
    let status = server.terminate();
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    assert!(server.log_text().contains("Server Exiting"));
}

#[test]
fn jetstream_is_off_without_js_as_nats_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let store = dir.path().join("store");
    let args = vec![
        "-a".to_owned(),
        "127.0.0.1".to_owned(),
        "-p".to_owned(),
        "-1".to_owned(),
        "-l".to_owned(),
        log.display().to_string(),
        "-sd".to_owned(),
        store.display().to_string(),
    ];
    let server = TestServer::spawn(args, dir, log);
    let text = server.log_text();
    assert!(
        !text.contains("Starting JetStream"),
        "JetStream started without -js:\n{text}"
    );
    assert!(
        !store.join("jetstream").exists(),
        "a JetStream store directory was created without -js"
    );
    let (mut raw, info) = Raw::connect(server.port);
    assert!(
        !info.contains("\"jetstream\""),
        "INFO advertises JetStream without -js: {info}"
    );
    // As nats-server without JetStream: the API has no responders.
    raw.send(
        b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true,\"protocol\":1}\r\n\
          SUB r.1 1\r\nPUB $JS.API.INFO r.1 0\r\n\r\nPING\r\n",
    );
    assert_eq!(raw.line(), "HMSG r.1 1 44 44\r\n");
    assert_eq!(raw.line(), "NATS/1.0 503\r\n");
    assert_eq!(raw.line(), "Nats-Subject: $JS.API.INFO\r\n");
    assert_eq!(raw.line(), "\r\n");
    assert_eq!(raw.line(), "\r\n");
    raw.expect_line("PONG\r\n");
}
