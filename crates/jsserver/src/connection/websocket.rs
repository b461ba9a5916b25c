//! A WebSocket client's start: TLS (with a `tls` block), the HTTP upgrade, and the bridge that
//! carries the NATS protocol in binary frames.
//!
//! As nats-server's `wsUpgrade` and `createWSClient`: the upgrade answers `101 Switching
//! Protocols` with no subprotocol, and with `permessage-deflate; server_no_context_takeover;
//! client_no_context_takeover` when the listener has `compression` and the client offers
//! `permessage-deflate` (whatever its parameters; else no extension), a
//! request from a browser page whose `Origin` the listener does not allow gets `403`, any
//! other request that is not an upgrade gets nats-server's HTTP error (`400`, `405`, `431`),
//! and the TLS handshake and the upgrade together must end within `handshake_timeout`. The frames
//! are read and written by `ws_frames` (as nats-server's): clients must mask their frames (an
//! unmasked frame closes the connection without a word, as on nats-server), messages may come
//! in fragments, binary or text frames both carry protocol bytes (nats-server reads text
//! frames too), pings are answered with pongs, and a client's close frame is answered before
//! the socket closes. No frame is collected: its bytes reach the connection's reader (and its
//! `max_control_line`, `max_payload`) as they arrive; only a compressed message is collected,
//! up to `8 × max_payload`, and inflated to at most `max_payload`.
//!
//! Once upgraded, a bridge task copies between the WebSocket and one end of a Unix socket
//! pair, as the TLS bridge does: the connection's reader and writer use the other end (see
//! `transport`), so the protocol code is the same for every client. What the server writes
//! leaves as one binary message per read of the pair (each holds whole protocol lines or a
//! part of one; clients reassemble, as they must with nats-server). When the server closes
//! the connection, the bridge sends a close frame with nats-server's status and reason for
//! why (`1008 Authentication Failure` after `-ERR 'Authorization Violation'`, `1001 Server
//! Shutdown`, ...), set in `CloseStatus` before the server's end closes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::Control;
use tracing::{debug, error};

use super::outbound::CloseReason;
use super::transport::{self, ReadHalf, WriteHalf};
use super::ws_frames::{FrameReader, FrameWriter};
use crate::websocket::{OriginCheck, WebsocketOptions};
use jsproto::websocket::Event;

/// Bytes the bridge reads from the server's end at once: at most one binary message.
const BRIDGE_BUFFER: usize = 64 * 1024;

/// The WebSocket listener as connections use it: its options, origin check and TLS.
#[derive(Debug)]
pub struct WsListener {
    opts: WebsocketOptions,
    origins: OriginCheck,
    /// `max_payload`: what a compressed message may inflate to (8 times it: its compressed
    /// bytes), as nats-server bounds them. Uncompressed frames are not collected at all.
    max_payload: usize,
}

impl WsListener {
    /// The listener of `opts` (its TLS files loaded), for a server whose messages have at most
    /// `max_payload` bytes.
    pub fn new(opts: &WebsocketOptions, max_payload: usize) -> Self {
        WsListener {
            origins: OriginCheck::new(opts),
            opts: opts.clone(),
            max_payload,
        }
    }

    /// Whether clients connect with TLS (`wss://`).
    pub fn tls(&self) -> bool {
        self.opts.tls.is_some()
    }
}

/// The close frame the bridge sends once the server's end closes: set by the connection
/// before it closes, from why it closes.
pub(super) type CloseStatus = Arc<Mutex<Option<(u16, &'static str)>>>;

/// An upgraded WebSocket client.
pub(super) struct Upgraded {
    pub(super) read: ReadHalf,
    pub(super) write: WriteHalf,
    pub(super) bridge: tokio::task::JoinHandle<()>,
    pub(super) close: CloseStatus,
}

/// TLS (if configured) and the HTTP upgrade, within `handshake_timeout`; then the bridge.
/// `None`: the client failed the handshake or was too slow (logged), and is closed.
pub(super) async fn upgrade(
    ws: &WsListener,
    socket: TcpStream,
    peer: SocketAddr,
) -> Option<Upgraded> {
    let handshake = async {
        match ws.opts.tls.as_ref().and_then(|t| t.server_config()) {
            Some(config) => {
                let tls = tokio_rustls::TlsAcceptor::from(Arc::clone(config))
                    .accept(socket)
                    .await
                    .map_err(|e| format!("TLS handshake error: {e}"))?;
                http_upgrade(ws, tls, peer).await
            }
            None => http_upgrade(ws, socket, peer).await,
        }
    };
    match tokio::time::timeout(ws.opts.handshake_timeout, handshake).await {
        Ok(Ok(upgraded)) => Some(upgraded),
        Ok(Err(why)) => {
            error!("{peer} - websocket handshake error: {why}");
            None
        }
        Err(_) => {
            error!("{peer} - websocket handshake error: i/o timeout");
            None
        }
    }
}

/// Largest upgrade request (request line and headers) read: a larger one gets `431`
/// (nats-server reads up to 1 MiB, Go's default).
const MAX_REQUEST: usize = 64 * 1024;
/// Most header lines an upgrade request may have (more: `431`).
const MAX_HEADERS: usize = 256;

/// Why an upgrade request is refused: its HTTP status and the reason logged.
struct Refusal {
    status: u16,
    why: String,
}

fn refuse(status: u16, why: impl Into<String>) -> Refusal {
    Refusal {
        status,
        why: why.into(),
    }
}

/// The HTTP upgrade, as nats-server's `wsUpgrade`: the request is read (at most
/// [`MAX_REQUEST`] bytes) and checked in nats-server's order, and a request that is not a
/// WebSocket upgrade gets nats-server's HTTP error (`405` for a method other than GET, `400`
/// with `Sec-Websocket-Version: 13` for a missing `Host`, `Upgrade`, `Connection` or key or
/// another version, `403` for an origin not allowed, `431` for a request too large) rather
/// than a closed socket. Then `101 Switching Protocols` and the frames (`ws_frames`);
/// bytes the client sent after its request are its first frames.
async fn http_upgrade<S>(
    ws: &WsListener,
    mut stream: S,
    peer: SocketAddr,
) -> Result<Upgraded, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let checked = loop {
        let mut headers = vec![httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => break check_request(ws, &req).map(|k| (k, len)),
            Ok(httparse::Status::Partial) if buf.len() >= MAX_REQUEST => {
                break Err(refuse(431, "request headers too large"));
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => break Err(refuse(431, "too many headers")),
            Err(e) => break Err(refuse(400, format!("malformed HTTP request: {e}"))),
        }
        let want = chunk.len().min(MAX_REQUEST - buf.len());
        match stream.read(&mut chunk[..want]).await {
            Ok(0) => return Err("connection closed before the upgrade request".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(e.to_string()),
        }
    };
    let ((key, deflate), len) = match checked {
        Ok(ok) => ok,
        Err(refusal) => {
            http_error(&mut stream, refusal.status).await;
            return Err(refusal.why);
        }
    };
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n{}\r\n",
        derive_accept_key(key.as_bytes()),
        if deflate { DEFLATE_RESPONSE } else { "" }
    );
    stream
        .write_all(response.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())?;
    let leftover = buf.split_off(len);
    let (ours, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
    let close: CloseStatus = Arc::new(Mutex::new(None));
    let bridge = tokio::spawn(bridge(
        stream,
        leftover,
        ws.max_payload,
        deflate,
        theirs,
        Arc::clone(&close),
        peer,
    ));
    let (read, write) = transport::split_unix(ours);
    Ok(Upgraded {
        read,
        write,
        bridge,
        close,
    })
}

/// The answer to a `permessage-deflate` offer, nats-server's `wsPMCFullResponse`: neither
/// side keeps a compression context between messages.
const DEFLATE_RESPONSE: &str = "Sec-WebSocket-Extensions: permessage-deflate; \
                                server_no_context_takeover; client_no_context_takeover\r\n";

/// nats-server's checks of an upgrade request, in its order and with its reasons; the
/// client's `Sec-WebSocket-Key`, and whether the frames are compressed (the listener has
/// `compression` and the client offers `permessage-deflate`, as nats-server's
/// `wsPMCExtensionSupport` looks for it: any parameter of any offer).
fn check_request(
    ws: &WsListener,
    req: &httparse::Request<'_, '_>,
) -> Result<(String, bool), Refusal> {
    let values = |name: &'static str| {
        req.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .filter_map(|h| std::str::from_utf8(h.value).ok())
    };
    let contains = |name: &'static str, token: &str| {
        values(name)
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    let first = |name: &'static str| values(name).map(str::trim).find(|v| !v.is_empty());
    if req.method != Some("GET") {
        return Err(refuse(405, "request method must be GET"));
    }
    let host = first("Host").ok_or_else(|| refuse(400, "'Host' missing in request"))?;
    if !contains("Upgrade", "websocket") {
        return Err(refuse(400, "invalid value for header 'Upgrade'"));
    }
    if !contains("Connection", "Upgrade") {
        return Err(refuse(400, "invalid value for header 'Connection'"));
    }
    let key = first("Sec-WebSocket-Key").ok_or_else(|| refuse(400, "key missing"))?;
    if !contains("Sec-WebSocket-Version", "13") {
        return Err(refuse(400, "invalid version"));
    }
    let origin = first("Origin").or_else(|| first("Sec-WebSocket-Origin"));
    ws.origins
        .check(origin, Some(host))
        .map_err(|e| refuse(403, format!("origin not allowed: {e}")))?;
    let deflate = ws.opts.compression
        && values("Sec-WebSocket-Extensions")
            .flat_map(|v| v.split([',', ';']))
            .any(|p| {
                p.trim_matches([' ', '\t'])
                    .eq_ignore_ascii_case("permessage-deflate")
            });
    Ok((key.to_string(), deflate))
}

/// Answers `status` as nats-server's `wsReturnHTTPError` (Go's `http.Error`: the status text
/// as a plain-text body, and `Sec-Websocket-Version: 13`), then closes: the write side at
/// once, the socket once the client has closed or after a moment (what it still sends is
/// read and dropped, so that the close does not reset the connection before the client has
/// read the answer).
async fn http_error<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, status: u16) {
    let text = match status {
        403 => "Forbidden",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Bad Request",
    };
    let response = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Sec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{text}\n",
        text.len() + 1
    );
    if stream.write_all(response.as_bytes()).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        let mut sink = [0u8; 4096];
        let mut total = 0usize;
        while total < DRAIN_LIMIT {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
}

/// After an HTTP error: how long, and how many bytes, the client's remaining request is read
/// and dropped before the socket closes (Go waits 500 ms the same way).
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_millis(500);
const DRAIN_LIMIT: usize = 4 << 20;

/// Copies client messages into the server's end of the pair and what the server writes into
/// binary frames, until either side closes.
async fn bridge<S>(
    stream: S,
    leftover: Vec<u8>,
    max_payload: usize,
    deflate: bool,
    unix: UnixStream,
    close: CloseStatus,
    peer: SocketAddr,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (read, write) = tokio::io::split(stream);
    let mut frames = FrameReader::new(read, leftover, max_payload, deflate);
    // Shared by the two directions: pongs and the close echo go out between data frames.
    let out = tokio::sync::Mutex::new(Out {
        frames: FrameWriter::new(write, deflate),
        closed: false,
    });
    let (mut unix_read, mut unix_write) = unix.into_split();
    let from_client = async {
        loop {
            let bytes = match frames.next().await {
                Ok(Some(Event::Data(bytes))) => bytes,
                Ok(Some(Event::Ping(payload))) => {
                    let mut out = out.lock().await;
                    if !out.closed && out.frames.control(Control::Pong, &payload).await.is_err() {
                        return;
                    }
                    continue;
                }
                Ok(Some(Event::Close(payload))) => {
                    // Answered (its status and reason, as nats-server makes the answer), then
                    // nothing more is sent but the end.
                    let mut out = out.lock().await;
                    if !out.closed {
                        out.closed = true;
                        let _ = out.frames.control(Control::Close, &payload).await;
                    }
                    break;
                }
                Ok(Some(Event::Pong)) => continue,
                Ok(None) => break,
                Err(e) => {
                    // A protocol error (an unmasked frame, a bad opcode), a compressed message
                    // over its bounds: closed at once, without a close frame.
                    debug!("{peer} - websocket read error: {e}");
                    return;
                }
            };
            if unix_write.write_all(&bytes).await.is_err() {
                return;
            }
        }
        // The client closed: the server's reader sees end of stream.
        let _ = unix_write.shutdown().await;
        std::future::pending::<()>().await;
    };
    let to_client = async {
        let mut buf = vec![0u8; BRIDGE_BUFFER];
        loop {
            match unix_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut out = out.lock().await;
                    if out.closed {
                        continue;
                    }
                    if out.frames.binary(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
        let status = close.lock().expect("close lock poisoned").take();
        let mut out = out.lock().await;
        if !out.closed {
            out.closed = true;
            // nats-server's status and reason, or a close frame without a status.
            let payload = status.map_or_else(Vec::new, |(code, reason)| {
                let mut p = code.to_be_bytes().to_vec();
                p.extend_from_slice(reason.as_bytes());
                p
            });
            let _ = out.frames.control(Control::Close, &payload).await;
        }
        out.frames.shutdown().await;
    };
    tokio::select! {
        () = to_client => {}
        () = from_client => {}
    }
}

/// The writing side of a client's socket, and whether its close frame went out.
struct Out<W> {
    frames: FrameWriter<W>,
    closed: bool,
}

/// The close frame nats-server sends when it closes a WebSocket client (`wsEnqueueCloseMessage`):
/// its status and the closed state's name, from why the connection closes and the `-ERR` it
/// sent last. `None`: no frame (the client went away first).
pub(super) fn close_status(
    reason: CloseReason,
    last_err: Option<&str>,
    shutting_down: bool,
) -> Option<(u16, &'static str)> {
    const POLICY: u16 = 1008;
    Some(match reason {
        CloseReason::Normal if shutting_down => (1001, "Server Shutdown"),
        CloseReason::Normal => return None,
        CloseReason::SlowConsumer => (POLICY, "Slow Consumer (Pending Bytes)"),
        CloseReason::ProtocolError => match last_err.unwrap_or_default() {
            "Authorization Violation" => (POLICY, "Authentication Failure"),
            "Authentication Timeout" => (POLICY, "Authentication Timeout"),
            "maximum connections exceeded" => (POLICY, "Maximum Connections Exceeded"),
            "maximum account active connections exceeded" => {
                (POLICY, "Maximum Account Connections Exceeded")
            }
            "Maximum Control Line Exceeded" => (POLICY, "Maximum Control Line Exceeded"),
            "Maximum Payload Violation" => (1009, "Maximum Message Payload Exceeded"),
            // nats-server sends 1001 (going away) here: RFC 6455 forbids 1006 in a close
            // frame, and clients fail the connection on it.
            "Stale Connection" => (1001, "Stale Connection"),
            _ => (1002, "Parse Error"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_statuses_are_nats_servers() {
        let auth = close_status(
            CloseReason::ProtocolError,
            Some("Authorization Violation"),
            false,
        );
        assert_eq!(auth, Some((1008, "Authentication Failure")));
        assert_eq!(
            close_status(CloseReason::Normal, None, true),
            Some((1001, "Server Shutdown"))
        );
        assert_eq!(close_status(CloseReason::Normal, None, false), None);
        assert_eq!(
            close_status(
                CloseReason::ProtocolError,
                Some("Unknown Protocol Operation"),
                false
            ),
            Some((1002, "Parse Error"))
        );
        assert_eq!(
            close_status(CloseReason::ProtocolError, Some("Stale Connection"), false),
            Some((1001, "Stale Connection"))
        );
    }
}
