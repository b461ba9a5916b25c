//! Exact bytes over raw TCP against the real `jsserver` binary: INFO shape, `+OK` in verbose
//! mode, each `-ERR` text and whether the connection stays open, as recorded from nats-server
//! in `shared/reference/nats-protocol.md`.

mod common;

use common::{Raw, TestServer};
use serde_json::Value;
use std::time::Duration;

/// The JSON of an INFO line, which must end with CRLF.
fn info_json(line: &str) -> Value {
    assert!(line.ends_with("\r\n"), "{line:?}");
    common::info_json(line)
}

/// Connects with `CONNECT {connect}` then a PING, and checks the PONG.
fn handshake(server: &TestServer, connect: &str) -> Raw {
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(format!("CONNECT {connect}\r\nPING\r\n").as_bytes());
    raw.expect_line("PONG\r\n");
    raw
}

#[test]
fn info_has_the_fields_clients_rely_on() {
    let server = TestServer::start(&[]);
    let (_raw, line) = Raw::connect(server.port);
    let info = info_json(&line);
    for key in ["server_id", "server_name", "version", "host"] {
        assert!(info[key].is_string(), "{key} is a string in {info}");
    }
    assert_eq!(info["proto"], 1);
    assert_eq!(info["headers"], true);
    assert_eq!(info["max_payload"], 1_048_576);
    assert_eq!(info["jetstream"], true);
    assert_eq!(info["port"], server.port);
    assert_eq!(info["client_ip"], "127.0.0.1");
    assert!(info["client_id"].as_u64().unwrap() > 0);
    let version = info["version"].as_str().unwrap();
    assert_eq!(version.split('.').count(), 3, "semver: {version}");
}

#[test]
fn client_ids_differ_per_connection() {
    let server = TestServer::start(&[]);
    let (_a, a) = Raw::connect(server.port);
    let (_b, b) = Raw::connect(server.port);
    assert_ne!(info_json(&a)["client_id"], info_json(&b)["client_id"]);
}

#[test]
fn verbose_connect_gets_ok_for_each_op() {
    let server = TestServer::start(&[]);
    let (mut raw, _) = Raw::connect(server.port);
    // A bare CONNECT {} means verbose (nats-server's default is true).
    raw.send(b"CONNECT {}\r\n");
    raw.expect_line("+OK\r\n");
    raw.send(b"SUB foo 1\r\nPUB foo 5\r\nhello\r\nUNSUB 1\r\nPING\r\n");
    assert_eq!(raw.line(), "+OK\r\n"); // SUB
                                       // PUB: the +OK, then the message to our own subscription, in that order.
    assert_eq!(raw.line(), "+OK\r\n");
    assert_eq!(raw.line(), "MSG foo 1 5\r\n");
    assert_eq!(raw.exact(7), b"hello\r\n");
    assert_eq!(raw.line(), "+OK\r\n"); // UNSUB
    assert_eq!(raw.line(), "PONG\r\n");
}

#[test]
fn a_later_connect_changes_only_the_options_it_sets() {
    // nats-server decodes each CONNECT into the options the connection already has (probed on
    // 2.15.1 with these exact bytes).
    let server = TestServer::start(&[]);
    // `verbose:false` stays off through `CONNECT {}`: no +OK before the PONG.
    let mut raw = handshake(&server, r#"{"verbose":false}"#);
    raw.send(b"CONNECT {}\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n");
    // `headers:true` stays on: HPUB is still allowed, and `no_responders` alone is accepted.
    let mut raw = handshake(&server, r#"{"verbose":false,"headers":true}"#);
    raw.send(b"CONNECT {\"verbose\":false}\r\nHPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n");
    raw.send(b"CONNECT {\"no_responders\":true}\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n");
    // `echo:false` stays off: the connection's own message does not come back.
    let mut raw = handshake(&server, r#"{"verbose":false,"echo":false}"#);
    raw.send(b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n");
    // A field the later CONNECT sets does change.
    raw.send(b"CONNECT {\"verbose\":true}\r\nPING\r\n");
    assert_eq!(raw.line(), "+OK\r\n");
    assert_eq!(raw.line(), "PONG\r\n");
}

#[test]
fn a_repeated_connect_drops_the_subscriptions() {
    // nats-server 2.15.1 clears a connection's subscriptions on every CONNECT after the first
    // (it may bind the client to other credentials); later SUBs work as usual.
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false}"#);
    raw.send(b"SUB a 1\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n");
    raw.send(b"CONNECT {\"verbose\":false}\r\nPUB a 1\r\nx\r\nPING\r\n");
    assert_eq!(
        raw.line(),
        "PONG\r\n",
        "the old subscription got the message"
    );
    raw.send(b"SUB a 2\r\nPUB a 1\r\ny\r\nPING\r\n");
    assert_eq!(raw.line(), "MSG a 2 1\r\n");
    assert_eq!(raw.exact(3), b"y\r\n");
    assert_eq!(raw.line(), "PONG\r\n");
}

#[test]
fn connect_keys_match_in_any_case_as_go_reads_them() {
    // nats-server decodes CONNECT with Go's encoding/json: keys match fields in any case.
    let server = TestServer::start(&[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"VERBOSE\":false,\"Headers\":true}\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n", "no +OK: VERBOSE is verbose");
    raw.send(b"HPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n", "HPUB allowed: Headers is headers");
}

#[test]
fn msg_and_hmsg_bytes_match_the_reference() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(
        &server,
        r#"{"verbose":false,"pedantic":false,"headers":true,"protocol":1}"#,
    );
    raw.send(b"SUB foo 1\r\nPUB foo reply.x 5\r\nhello\r\n");
    raw.send(b"HPUB foo 24 29\r\nNATS/1.0\r\nA: B\r\nC: d\r\n\r\nhello\r\nPING\r\n");
    assert_eq!(raw.line(), "MSG foo 1 reply.x 5\r\n");
    assert_eq!(raw.exact(7), b"hello\r\n");
    assert_eq!(raw.line(), "HMSG foo 1 24 29\r\n");
    assert_eq!(raw.exact(31), b"NATS/1.0\r\nA: B\r\nC: d\r\n\r\nhello\r\n");
    raw.expect_line("PONG\r\n");
}

#[test]
fn sid_is_echoed_as_given_and_clients_quirky_spacing_is_accepted() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    // nats-py writes an empty reply or queue as a double space; nats.go a trailing space.
    raw.send(b"sub t  abc\r\npub t  2\r\nhi\r\nPING\r\n");
    assert_eq!(raw.line(), "MSG t abc 2\r\n");
    assert_eq!(raw.exact(4), b"hi\r\n");
    raw.expect_line("PONG\r\n");
    raw.send(b"UNSUB abc \r\nPUB t 2\r\nhi\r\nPING\r\n");
    raw.expect_line("PONG\r\n");
}

#[test]
fn headers_are_stripped_for_a_client_without_header_support() {
    let server = TestServer::start(&[]);
    let mut plain = handshake(&server, r#"{"verbose":false,"headers":false}"#);
    plain.send(b"SUB foo 9\r\nPING\r\n");
    plain.expect_line("PONG\r\n");
    let mut pubr = handshake(&server, r#"{"verbose":false,"headers":true}"#);
    pubr.send(b"HPUB foo 24 29\r\nNATS/1.0\r\nA: B\r\nC: d\r\n\r\nhello\r\nPING\r\n");
    pubr.expect_line("PONG\r\n");
    assert_eq!(plain.line(), "MSG foo 9 5\r\n");
    assert_eq!(plain.exact(7), b"hello\r\n");
}

#[test]
fn no_responders_status_is_exact() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(
        &server,
        r#"{"verbose":false,"headers":true,"no_responders":true}"#,
    );
    raw.send(b"SUB _INBOX.abc 9\r\nPUB nothing _INBOX.abc 0\r\n\r\nPING\r\n");
    assert_eq!(raw.line(), "HMSG _INBOX.abc 9 39 39\r\n");
    assert_eq!(
        raw.exact(41),
        b"NATS/1.0 503\r\nNats-Subject: nothing\r\n\r\n\r\n"
    );
    raw.expect_line("PONG\r\n");
}

#[test]
fn no_echo_skips_own_messages() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false,"echo":false}"#);
    raw.send(b"SUB foo 1\r\nPUB foo 1\r\na\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n", "own message must not come back");
}

#[test]
fn unknown_op_gets_err_and_close() {
    let server = TestServer::start(&[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"FOO bar\r\n");
    assert_eq!(raw.line(), "-ERR 'Unknown Protocol Operation'\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn wrong_payload_size_desynchronises_into_unknown_op() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    raw.send(b"PUB foo 2\r\nhello\r\n");
    assert_eq!(raw.line(), "-ERR 'Unknown Protocol Operation'\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn oversized_control_line_gets_err_and_close() {
    let server = TestServer::start(&[]);
    let (mut raw, _) = Raw::connect(server.port);
    let long = format!("SUB {} 1\r\n", "a".repeat(5000));
    raw.send(long.as_bytes());
    assert_eq!(raw.line(), "-ERR 'maximum control line exceeded'\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn malformed_lines_get_nats_servers_answers() {
    // Observed on nats-server 2.15.1, each on a fresh connection followed by PING. Its parser
    // reads an op name byte by byte and fails at the first unexpected byte: an op that takes
    // arguments must be followed by a blank (`PUBX`, `PUB` alone, a bare `-ERR` are unknown);
    // with a blank and nothing else the connection closes silently, as for a client's -ERR;
    // CONNECT takes whatever follows its name as its JSON (`CONNECTX {}` is bad JSON: a silent
    // close; `CONNECT{...}` is fine); PING, PONG and +OK are read up to the line end,
    // whatever follows their names.
    let unknown = "-ERR 'Unknown Protocol Operation'\r\n";
    // What arrives before the server closes the connection.
    let closing: &[(&[u8], &str)] = &[
        (b"PUB\r\n", unknown),
        (b"SUB\r\n", unknown),
        (b"UNSUB\r\n", unknown),
        (b"PUB \r\n", ""),
        (b"UNSUB \r\n", ""),
        (b"-ERR 'x'\r\n", ""),
        (b"-ERR\r\n", unknown),
        (b"CONNECTX {}\r\n", ""),
        (b"CONNECTX\r\n", ""),
        (b"SUBX a 1\r\n", unknown),
        (b"PUBX a 1\r\n", unknown),
        (b"UNSUBX 1\r\n", unknown),
        (b"HPUBX\r\n", unknown),
    ];
    // How many PONGs come back on a connection that stays open.
    let served: &[(&[u8], usize)] = &[
        (b"PINGX\r\n", 2),
        (b"PING\rPING\r\n", 2),
        (b"PONGX\r\n", 1),
        (b"+OKAY\r\n", 1),
        (b"CONNECT{\"verbose\":false}\r\n", 1),
    ];
    let server = TestServer::start(&[]);
    for &(input, want) in closing {
        let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
        raw.send(&[input, b"PING\r\n"].concat());
        // A reset (the server closed with our PING unread) ends the text like EOF.
        assert_eq!(
            raw.read_to_eof(),
            want,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    for &(input, pongs) in served {
        let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
        raw.send(&[input, b"PING\r\n"].concat());
        for _ in 0..pongs {
            assert_eq!(
                raw.line(),
                "PONG\r\n",
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
    // Sent without a line end: nats-server answers at the first byte that cannot continue an
    // op name, without waiting for more (a server that waited would time the read out).
    let junk = b"xyz".repeat(3414);
    let refused_before_line_end: &[&[u8]] = &[&junk, b"x", b"SUBX", b"PUBX", b"HPUBX", b"PUB\r"];
    for &input in refused_before_line_end {
        let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
        raw.send(input);
        assert_eq!(
            raw.line(),
            unknown,
            "{:?}",
            String::from_utf8_lossy(&input[..input.len().min(8)])
        );
        let _ = raw.read_to_eof();
    }
    // An op written a byte at a time is read as a whole.
    let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    for &b in b"SUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n" {
        raw.send(&[b]);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(raw.line(), "MSG a 1 1\r\n");
    assert_eq!(raw.exact(3), b"x\r\n");
    raw.expect_line("PONG\r\n");
}

#[test]
fn max_control_line_counts_the_arguments_only() {
    // nats-server measures what follows `SUB `/`PUB ` (and the blanks after it): 4096 bytes
    // of arguments are served, 4097 are not.
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    let subject = "a".repeat(4094);
    raw.send(format!("SUB   {subject} 1\r\nPUB {subject} 0\r\n\r\nPING\r\n").as_bytes());
    assert_eq!(raw.line(), format!("MSG {subject} 1 0\r\n"));
    assert_eq!(raw.line(), "\r\n");
    raw.expect_line("PONG\r\n");
    raw.send(format!("SUB {subject}b 2\r\n").as_bytes());
    assert_eq!(raw.line(), "-ERR 'maximum control line exceeded'\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn payload_over_max_payload_gets_err_and_close() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    raw.send(b"PUB foo 2000000\r\n");
    assert_eq!(raw.line(), "-ERR 'Maximum Payload Violation'\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn invalid_subject_gets_err_and_stays_open() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    for bad in ["foo..bar", "a.>.b", ">.a", ".a", "a."] {
        raw.send(format!("SUB {bad} 1\r\n").as_bytes());
        assert_eq!(raw.line(), "-ERR 'Invalid Subject'\r\n", "SUB {bad}");
    }
    raw.send(b"PING\r\n");
    raw.expect_line("PONG\r\n");
}

#[test]
fn pedantic_wildcard_publish_gets_err_and_is_still_routed() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":true}"#);
    raw.send(b"SUB foo.* 1\r\nPUB foo.* 1\r\nx\r\nPING\r\n");
    assert_eq!(raw.line(), "-ERR 'Invalid Publish Subject'\r\n");
    assert_eq!(raw.line(), "MSG foo.* 1 1\r\n");
    assert_eq!(raw.exact(3), b"x\r\n");
    raw.expect_line("PONG\r\n");
}

/// Publish subjects as nats-server 2.15.1 takes them (recorded side by side): it checks them
/// only for a pedantic connection, with `-ERR 'Invalid Publish Subject'` and the message still
/// going on (then the verbose `+OK`); `*` and `>` tokens anywhere are matched as literal tokens
/// (`a.>.b` reaches `a.>` and `a.*.b`); a subject with an empty token reaches no one. PUB and
/// HPUB alike, in every verbose/pedantic combination.
#[test]
fn publish_subjects_route_as_nats_server_routes_them() {
    const SUBS: [&str; 8] = [">", "a.>", "a.*.b", "*.*.*", "*", "a.*", "*.>", "a.b.>"];
    // (published subject, literal (no -ERR when pedantic), the subscriptions it reaches)
    let table: &[(&str, bool, &[&str])] = &[
        ("a.b", true, &[">", "a.>", "a.*", "*.>"]),
        ("a.**.b", true, &[">", "a.>", "a.*.b", "*.*.*", "*.>"]),
        ("a.>>", true, &[">", "a.>", "a.*", "*.>"]),
        ("a.>.b", false, &[">", "a.>", "a.*.b", "*.*.*", "*.>"]),
        ("a.>.>", false, &[">", "a.>", "*.*.*", "*.>"]),
        (">.a", false, &[">", "*.>"]),
        (">", false, &[">", "*"]),
        ("*", false, &[">", "*"]),
        ("a.>", false, &[">", "a.>", "a.*", "*.>"]),
        ("a.*", false, &[">", "a.>", "a.*", "*.>"]),
        ("a.*.b", false, &[">", "a.>", "a.*.b", "*.*.*", "*.>"]),
        ("a.b.>", false, &[">", "a.>", "*.*.*", "*.>", "a.b.>"]),
        ("*.>", false, &[">", "*.>"]),
        ("a..b", false, &[]),
        (".a", false, &[]),
        ("a.", false, &[]),
        (".", false, &[]),
        ("..", false, &[]),
    ];
    let server = TestServer::start(&[]);
    let mut sub = handshake(&server, r#"{"verbose":false}"#);
    for (sid, subject) in SUBS.iter().enumerate() {
        sub.send(format!("SUB {subject} {sid}\r\n").as_bytes());
    }
    sub.send(b"PING\r\n");
    sub.expect_line("PONG\r\n");
    for verbose in [false, true] {
        for pedantic in [false, true] {
            for hpub in [false, true] {
                let connect =
                    format!(r#"{{"verbose":{verbose},"pedantic":{pedantic},"headers":true}}"#);
                let mut publisher = Raw::connect(server.port).0;
                publisher.send(format!("CONNECT {connect}\r\n").as_bytes());
                if verbose {
                    publisher.expect_line("+OK\r\n");
                }
                for &(subject, literal, reaches) in table {
                    let case =
                        format!("{subject} verbose={verbose} pedantic={pedantic} hpub={hpub}");
                    if hpub {
                        publisher.send(
                            format!("HPUB {subject} 12 13\r\nNATS/1.0\r\n\r\nx\r\nPING\r\n")
                                .as_bytes(),
                        );
                    } else {
                        publisher.send(format!("PUB {subject} 1\r\nx\r\nPING\r\n").as_bytes());
                    }
                    let mut answers = Vec::new();
                    loop {
                        let line = publisher.line();
                        assert!(!line.is_empty(), "{case}: closed");
                        if line == "PONG\r\n" {
                            break;
                        }
                        answers.push(line);
                    }
                    let mut want = Vec::new();
                    if pedantic && !literal {
                        want.push("-ERR 'Invalid Publish Subject'\r\n".to_owned());
                    }
                    if verbose {
                        want.push("+OK\r\n".to_owned());
                    }
                    assert_eq!(answers, want, "{case}");
                    sub.send(b"PING\r\n");
                    let mut got = Vec::new();
                    loop {
                        let line = sub.line();
                        if line == "PONG\r\n" {
                            break;
                        }
                        let mut words = line.split_whitespace();
                        let op = words.next().unwrap_or_default();
                        assert!(op == "MSG" || op == "HMSG", "{case}: {line:?}");
                        assert_eq!(words.next(), Some(subject), "{case}: {line:?}");
                        let sid: usize = words.next().unwrap().parse().unwrap();
                        got.push(SUBS[sid]);
                        let size: usize = line.split_whitespace().last().unwrap().parse().unwrap();
                        sub.exact(size + 2);
                    }
                    got.sort_unstable();
                    let mut want: Vec<&str> = reaches.to_vec();
                    want.sort_unstable();
                    assert_eq!(got, want, "{case}");
                }
            }
        }
    }
}

/// A request to a subject with an empty token reaches no one, so the requester gets the
/// no-responders status at once (nats-server 2.15.1). That includes JetStream API requests
/// whose stream or consumer name is empty, for every verb.
#[test]
fn a_request_to_an_empty_token_subject_gets_no_responders() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(
        &server,
        r#"{"verbose":false,"pedantic":false,"headers":true,"no_responders":true}"#,
    );
    raw.send(b"SUB _INBOX.r 1\r\n");
    for subject in [
        "a..b",
        "a.",
        ".a",
        "$JS.API.STREAM.INFO.",
        "$JS.API.STREAM.INFO..x",
        "$JS.API.STREAM.CREATE.",
        "$JS.API.STREAM.UPDATE.",
        "$JS.API.STREAM.DELETE.",
        "$JS.API.STREAM.PURGE.",
        "$JS.API.STREAM.MSG.GET.",
        "$JS.API.STREAM.MSG.DELETE.",
        "$JS.API.STREAM.LEADER.STEPDOWN.",
        "$JS.API.CONSUMER.CREATE.S.",
        "$JS.API.CONSUMER.CREATE..C",
        "$JS.API.CONSUMER.CREATE.S.C.",
        "$JS.API.CONSUMER.DURABLE.CREATE.S.",
        "$JS.API.CONSUMER.INFO.S.",
        "$JS.API.CONSUMER.INFO..C",
        "$JS.API.CONSUMER.DELETE.S.",
        "$JS.API.CONSUMER.NAMES.",
        "$JS.API.CONSUMER.LIST.",
        "$JS.API.CONSUMER.MSG.NEXT.S.",
        "$JS.API.CONSUMER.PAUSE.S.",
        "$JS.API.DIRECT.GET.",
        "$JS.API.INFO.",
    ] {
        raw.send(format!("PUB {subject} _INBOX.r 2\r\n{{}}\r\nPING\r\n").as_bytes());
        let head = raw.line();
        let status = format!("NATS/1.0 503\r\nNats-Subject: {subject}\r\n\r\n");
        assert_eq!(
            head,
            format!("HMSG _INBOX.r 1 {0} {0}\r\n", status.len()),
            "{subject}"
        );
        assert_eq!(
            raw.exact(status.len() + 2),
            format!("{status}\r\n").as_bytes(),
            "{subject}"
        );
        raw.expect_line("PONG\r\n");
    }
}

#[test]
fn bad_protocol_version_gets_err_and_close() {
    let server = TestServer::start(&[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":false,\"protocol\":2}\r\n");
    assert_eq!(raw.line(), "-ERR 'invalid client protocol'\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn no_responders_without_headers_gets_err_and_close() {
    let server = TestServer::start(&[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":false,\"no_responders\":true}\r\n");
    assert_eq!(
        raw.line(),
        "-ERR 'no responders requires headers support'\r\n"
    );
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn silent_closes_for_malformed_frames() {
    let server = TestServer::start(&[]);
    for bad in [
        &b"CONNECT {not json\r\n"[..],
        b"CONNECT [1,2]\r\n",
        b"CONNECT {\"verbose\":\"yes\"}\r\n",
        b"PUB foo -1\r\n",
        b"PUB foo bar\r\n",
        b"SUB foo\r\n",
        b"HPUB foo 10 5\r\n",
    ] {
        let (mut raw, _) = Raw::connect(server.port);
        raw.send(bad);
        assert_eq!(
            raw.read_to_eof(),
            "",
            "{:?} closes without -ERR",
            String::from_utf8_lossy(bad)
        );
    }
    // HPUB from a client that did not negotiate headers.
    let mut raw = handshake(&server, r#"{"verbose":false,"headers":false}"#);
    raw.send(b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn bad_input_on_one_connection_leaves_others_alone() {
    let server = TestServer::start(&[]);
    let mut good = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    good.send(b"SUB foo 1\r\nPING\r\n");
    good.expect_line("PONG\r\n");
    for junk in [
        &b"\x00\xff\xfe garbage\r\n"[..],
        b"PUB foo 99999999999999999999\r\n",
        b"\r\n\r\n",
    ] {
        let (mut bad, _) = Raw::connect(server.port);
        bad.send(junk);
        let _ = bad.read_to_eof();
    }
    let mut publisher = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    publisher.send(b"PUB foo 2\r\nok\r\nPING\r\n");
    publisher.expect_line("PONG\r\n");
    assert_eq!(good.line(), "MSG foo 1 2\r\n");
}

#[test]
fn server_pings_and_closes_a_stale_connection() {
    let server = TestServer::start_with_config("ping_interval: \"200ms\"\nping_max: 2\n", &[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":false}\r\n");
    // Never answer: two PINGs, then the stale-connection error and a close.
    assert_eq!(raw.line(), "PING\r\n");
    assert_eq!(raw.line(), "PING\r\n");
    assert_eq!(raw.line(), "-ERR 'Stale Connection'\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn the_first_ping_goes_out_even_to_a_busy_client() {
    // nats-server delays a PING while the client is sending, but not the first one, which
    // measures the round trip (and one an hour after that).
    let server = TestServer::start_with_config("ping_interval: \"200ms\"\nping_max: 5\n", &[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":false}\r\n");
    // Busy for 1 s: a PING of our own every 20 ms, answers read afterwards.
    let mut sent = 0;
    let until = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < until {
        raw.send(b"PING\r\n");
        sent += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut pongs, mut pings) = (0, 0);
    while pongs < sent {
        match raw.line().as_str() {
            "PONG\r\n" => pongs += 1,
            "PING\r\n" => pings += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        pings >= 1,
        "no PING from the server in 1 s of ping_interval 200ms"
    );
}

#[test]
fn answered_pings_keep_the_connection() {
    let server = TestServer::start_with_config("ping_interval: \"100ms\"\nping_max: 1\n", &[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":false}\r\n");
    for _ in 0..5 {
        assert_eq!(raw.line(), "PING\r\n");
        raw.send(b"PONG\r\n");
    }
    raw.send(b"PING\r\n");
    raw.expect_line("PONG\r\n");
}

#[test]
fn a_reader_that_never_reads_is_closed_as_slow_consumer() {
    let server = TestServer::start_with_config("max_pending: 64KB\nmax_payload: 32KB\n", &[]);
    // A subscriber that never reads its socket.
    let (mut slow, _) = Raw::connect(server.port);
    slow.send(b"CONNECT {\"verbose\":false}\r\nSUB big 1\r\nPING\r\n");
    slow.expect_line("PONG\r\n");
    let mut publisher = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    let payload = vec![b'x'; 30_000];
    let mut frame = b"PUB big 30000\r\n".to_vec();
    frame.extend_from_slice(&payload);
    frame.extend_from_slice(b"\r\n");
    // Far more than socket buffers plus max_pending hold.
    for _ in 0..800 {
        publisher.send(&frame);
    }
    publisher.send(b"PING\r\n");
    publisher.expect_line("PONG\r\n");
    // The slow connection is closed: reading drains what the kernel held, then EOF.
    let rest = slow.read_to_eof();
    assert!(
        !rest.contains("-ERR"),
        "slow consumers are closed without -ERR"
    );
    let mut other = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    other.send(b"PING\r\n");
    other.expect_line("PONG\r\n");
}

#[test]
fn a_subscriber_slower_than_its_publisher_slows_the_publisher_down() {
    // nats-server's fast-producer stall: a publisher that fills a subscriber past three
    // quarters of max_pending waits before the server reads more from it, so a subscriber
    // that keeps reading, only slower, gets everything instead of being cut off.
    let server = TestServer::start_with_config("max_pending: 2MB\nmax_payload: 64KB\n", &[]);
    let (mut sub, _) = Raw::connect(server.port);
    sub.send(b"CONNECT {\"verbose\":false}\r\nSUB big 1\r\nPING\r\n");
    sub.expect_line("PONG\r\n");
    const MSGS: usize = 1600;
    const SIZE: usize = 10_000;
    let mut publisher = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    let sender = std::thread::spawn(move || {
        let mut frame = format!("PUB big {SIZE}\r\n").into_bytes();
        frame.extend_from_slice(&[b'x'; SIZE]);
        frame.extend_from_slice(b"\r\n");
        // 16 MB, eight times max_pending, written as fast as the socket takes it.
        for _ in 0..MSGS {
            publisher.send(&frame);
        }
        publisher.send(b"PING\r\n");
        publisher.expect_line("PONG\r\n");
    });
    // About 30 MB/s: far slower than the publisher could go, faster than the stall lets it
    // (one read of at most 64 KiB per 10 ms stall).
    for i in 0..MSGS {
        let line = sub.line();
        assert_eq!(line, format!("MSG big 1 {SIZE}\r\n"), "message {i}");
        assert_eq!(sub.exact(SIZE + 2).len(), SIZE + 2);
        if i % 3 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    sender.join().unwrap();
    sub.send(b"PING\r\n");
    sub.expect_line("PONG\r\n");
    assert!(
        !server.log_text().contains("Slow Consumer"),
        "the subscriber was cut off: {}",
        server.log_text()
    );
}

#[test]
fn lenient_inputs_nats_server_accepts() {
    let server = TestServer::start(&[]);
    // An UNSUB max that is not a positive number unsubscribes at once and keeps the connection.
    let mut raw = handshake(&server, r#"{"verbose":false,"pedantic":false}"#);
    raw.send(b"SUB foo 1\r\nUNSUB 1 abc\r\nSUB bar 2\r\nUNSUB 2 -1\r\nPUB foo 1\r\nx\r\nPUB bar 1\r\ny\r\nPING\r\n");
    assert_eq!(
        raw.line(),
        "PONG\r\n",
        "both subscriptions are gone, the connection stays"
    );
    // CONNECT null is all defaults (verbose); a repeated key keeps its last value.
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT null\r\nPING\r\n");
    assert_eq!(raw.line(), "+OK\r\n");
    raw.expect_line("PONG\r\n");
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":true,\"verbose\":false}\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n");
    // Before CONNECT a client is verbose.
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"SUB early 1\r\nPING\r\n");
    assert_eq!(raw.line(), "+OK\r\n");
    raw.expect_line("PONG\r\n");
}

#[test]
fn a_cr_separates_sub_and_unsub_arguments_but_not_pub_ones() {
    // nats-server splits SUB/UNSUB arguments at blanks and CRs (its `splitArg`), PUB's at
    // blanks only (probed on 2.15.1 with these bytes).
    let server = TestServer::start(&[]);
    for (input, want) in [
        (&b"SUB a\r1\r\n"[..], "MSG a 1 1\r\n"),
        (b"SUB a q\r1\r\n", "MSG a 1 1\r\n"),
        (b"SUB a 1\r\r\n", "MSG a 1 1\r\n"),
    ] {
        let mut raw = handshake(&server, r#"{"verbose":false}"#);
        raw.send(input);
        raw.send(b"PUB a 1\r\nx\r\nPING\r\n");
        assert_eq!(raw.line(), want, "{input:?}");
        assert_eq!(raw.exact(3), b"x\r\n");
        assert_eq!(raw.line(), "PONG\r\n", "{input:?}");
    }
    // A stray CR before UNSUB's CRLF: the subscription is gone.
    let mut raw = handshake(&server, r#"{"verbose":false}"#);
    raw.send(b"SUB a 1\r\nUNSUB 1\r\r\nPUB a 1\r\nx\r\nPING\r\n");
    assert_eq!(raw.line(), "PONG\r\n");
    // In PUB the CR stays in the size: the line is refused and the connection closed.
    for input in [&b"PUB a\r1\r\nx\r\n"[..], b"PUB a 1\r\r\nx\r\n"] {
        let mut raw = handshake(&server, r#"{"verbose":false}"#);
        raw.send(input);
        raw.send(b"PING\r\n");
        assert_eq!(raw.read_to_eof(), "", "{input:?}");
    }
}

#[test]
fn hpub_with_an_empty_header_block_is_delivered_as_msg() {
    let server = TestServer::start(&[]);
    let mut raw = handshake(&server, r#"{"verbose":false,"headers":true}"#);
    raw.send(b"SUB foo 1\r\nHPUB foo 0 2\r\nab\r\nPING\r\n");
    assert_eq!(raw.line(), "MSG foo 1 2\r\n");
    assert_eq!(raw.exact(4), b"ab\r\n");
    raw.expect_line("PONG\r\n");
}

#[test]
fn bare_unsub_is_an_unknown_operation() {
    let server = TestServer::start(&[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"UNSUB\r\n");
    assert_eq!(raw.line(), "-ERR 'Unknown Protocol Operation'\r\n");
    assert_eq!(raw.read_to_eof(), "");
}

#[test]
fn connections_over_max_connections_are_refused() {
    let server = TestServer::start_with_config("max_connections: 1\n", &[]);
    let _first = handshake(&server, r#"{"verbose":false}"#);
    let (mut second, info) = Raw::connect(server.port);
    assert!(info.starts_with("INFO "), "INFO first, as nats-server");
    assert_eq!(second.line(), "-ERR 'maximum connections exceeded'\r\n");
    assert_eq!(second.read_to_eof(), "");
}
