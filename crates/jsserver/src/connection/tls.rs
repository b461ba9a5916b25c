//! A TLS client's start: INFO, handshake, and the bridge that carries its bytes.
//!
//! As nats-server's `createClient`: the server sends INFO in plain text (with `tls_required`),
//! then the client starts the handshake; with `handshake_first` the server waits for the
//! handshake first and sends INFO over TLS; with `allow_non_tls` the first byte the client
//! sends after INFO (`0x16`, a TLS handshake record, or not) decides. The handshake must end
//! within `tls { timeout }` (2 s); a client that sends something else than a TLS handshake,
//! fails it (no certificate while `verify` is on, one that does not verify) or does not finish
//! in time is closed without another byte, as nats-server closes it (its `-ERR 'Secure
//! Connection - TLS Required'` never reaches the wire either: it is written into the
//! unfinished TLS session).
//!
//! Once the handshake is done, a bridge task copies between the TLS stream and one end of a
//! Unix socket pair; the connection's reader and writer use the other end exactly as they use
//! a plain client's TCP socket (see `transport`), so the plain path has no TLS branch at all.
//! When the server closes its end, the bridge sends `close_notify` and closes the TCP socket;
//! when the client closes, the server's end reads end of stream.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use jsproto::wire::Info;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::server::TlsStream;
use tracing::{debug, error};

use super::transport::{self, ReadHalf, WriteHalf};
use crate::tls::identity::CertNames;
use crate::tls::TlsOptions;

/// The first byte of a TLS record carrying a handshake message (a ClientHello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Bytes the bridge moves per read in each direction (a TLS record holds at most 16 KiB).
const BRIDGE_BUFFER: usize = 64 * 1024;

/// A client whose TLS handshake (if any) is done.
pub(super) struct Established {
    /// The connection's readable half.
    pub(super) read: ReadHalf,
    /// The connection's writable half.
    pub(super) write: WriteHalf,
    /// The client certificate's names, with `verify_and_map`.
    pub(super) cert: Option<Arc<CertNames>>,
    /// The bridge task of a TLS client: done once what the server wrote reached the client
    /// (and `close_notify` was sent), which the connection waits for before it is let go.
    pub(super) bridge: Option<tokio::task::JoinHandle<()>>,
}

/// Starts a client on the TLS listener: INFO (sent here, in plain text or over TLS) and the
/// handshake as configured, then the bridge.
/// `over_limit`: the connection is over `max_connections`, and gets the INFO (unless
/// `handshake_first`) and `-ERR 'maximum connections exceeded'` in plain text before its
/// close, as from nats-server, which checks the limit before the handshake.
///
/// `None`: the connection is closed (handshake failed, timed out, or over the limit).
pub(super) async fn establish(
    tls: &TlsOptions,
    mut socket: TcpStream,
    peer: SocketAddr,
    cid: u64,
    info: &Info,
    over_limit: bool,
) -> Option<Established> {
    let mut info = info.clone();
    info.tls_required = tls.handshake_first || !tls.plain_allowed();
    info.tls_available = !info.tls_required;
    info.tls_verify = tls.verify;
    let mut info_line = BytesMut::new();
    jsproto::wire::encode_info(&mut info_line, &info);
    if !tls.handshake_first {
        socket.write_all(&info_line).await.ok()?;
    }
    if over_limit {
        let mut err = BytesMut::new();
        jsproto::wire::encode_err(&mut err, "maximum connections exceeded");
        let _ = socket.write_all(&err).await;
        let _ = socket.shutdown().await;
        return None;
    }
    let config = Arc::clone(tls.server_config()?);
    if tls.plain_allowed() {
        // TLS or not: the first byte tells (nats-server waits as long as for a handshake).
        let mut first = [0u8; 1];
        let n = tokio::time::timeout(tls.timeout, socket.peek(&mut first))
            .await
            .unwrap_or(Ok(0))
            .unwrap_or(0);
        if n == 0 || first[0] != TLS_HANDSHAKE_RECORD {
            let (read, write) = transport::split_tcp(socket);
            return Some(Established {
                read,
                write,
                cert: None,
                bridge: None,
            });
        }
    }
    debug!("{peer} - cid:{cid} - Starting TLS client connection handshake");
    let stream = match tokio::time::timeout(tls.timeout, handshake(config, socket)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(Failed { err, probe })) => {
            if probe {
                debug!("{peer} - cid:{cid} - TLS handshake error: {err}");
            } else {
                error!("{peer} - cid:{cid} - TLS handshake error: {err}");
            }
            debug!("{peer} - cid:{cid} - Client connection closed: TLS Handshake Failure");
            return None;
        }
        Err(_) => {
            debug!("{peer} - cid:{cid} - TLS handshake timeout");
            debug!("{peer} - cid:{cid} - Client connection closed: TLS Handshake Failure");
            return None;
        }
    };
    let session = stream.get_ref().1;
    debug!("{peer} - cid:{cid} - TLS handshake complete");
    debug!(
        "{peer} - cid:{cid} - TLS version {}, cipher suite {}",
        version_name(session.protocol_version()),
        suite_name(session.negotiated_cipher_suite())
    );
    let cert = tls
        .map
        .then(|| session.peer_certificates()?.first())
        .flatten()
        .and_then(|der| CertNames::from_der(der))
        .map(Arc::new);
    let (mut ours, theirs) = UnixStream::pair().ok()?;
    let bridge = tokio::spawn(bridge(stream, theirs));
    if tls.handshake_first {
        // Before the reader and the writer start: INFO is the first thing the client reads.
        ours.write_all(&info_line).await.ok()?;
    }
    let (read, write) = transport::split_unix(ours);
    Some(Established {
        read,
        write,
        cert,
        bridge: Some(bridge),
    })
}

/// A failed handshake: the error as logged, and whether it looks like a probe (plain text on
/// the TLS port), which nats-server logs at debug level only.
struct Failed {
    err: String,
    probe: bool,
}

async fn handshake(
    config: Arc<rustls::ServerConfig>,
    socket: TcpStream,
) -> Result<TlsStream<TcpStream>, Failed> {
    let mut first = [0u8; 1];
    match socket.peek(&mut first).await {
        Ok(0) | Err(_) => {
            return Err(Failed {
                err: "EOF".into(),
                probe: true,
            })
        }
        Ok(_) if first[0] != TLS_HANDSHAKE_RECORD => {
            return Err(Failed {
                err: "tls: first record does not look like a TLS handshake".into(),
                probe: true,
            })
        }
        Ok(_) => {}
    }
    tokio_rustls::TlsAcceptor::from(config)
        .accept(socket)
        .await
        .map_err(|e| Failed {
            err: e.to_string(),
            probe: false,
        })
}

/// A TLS stream (either side: a route's dialer is the TLS client) as the halves the
/// connection code reads and writes, through a bridge task ([`bridge`]) that ends once both
/// the halves and the peer are done.
///
/// # Errors
/// The Unix socket pair cannot be made.
pub(crate) fn bridged<S>(tls: S) -> std::io::Result<(ReadHalf, WriteHalf)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (ours, theirs) = UnixStream::pair()?;
    tokio::spawn(bridge(tls, theirs));
    Ok(transport::split_unix(ours))
}

/// Copies between the client's TLS stream and the server's end of the Unix pair until the
/// server's end closes; then sends `close_notify` and lets the TCP socket close.
async fn bridge<S>(tls: S, unix: UnixStream)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (tls_read, mut tls_write) = tokio::io::split(tls);
    let (unix_read, mut unix_write) = unix.into_split();
    let mut tls_read = BufReader::with_capacity(BRIDGE_BUFFER, tls_read);
    let mut unix_read = BufReader::with_capacity(BRIDGE_BUFFER, unix_read);
    let from_client = async {
        let _ = tokio::io::copy_buf(&mut tls_read, &mut unix_write).await;
        // The server's reader sees end of stream and closes the connection.
        let _ = unix_write.shutdown().await;
        std::future::pending::<()>().await;
    };
    let to_client = async {
        let _ = tokio::io::copy_buf(&mut unix_read, &mut tls_write).await;
        let _ = tls_write.shutdown().await;
    };
    tokio::select! {
        () = to_client => {}
        () = from_client => {}
    }
}

/// `1.2`, `1.3`, as nats-server logs the version.
fn version_name(v: Option<rustls::ProtocolVersion>) -> String {
    match v {
        Some(rustls::ProtocolVersion::TLSv1_2) => "1.2".into(),
        Some(rustls::ProtocolVersion::TLSv1_3) => "1.3".into(),
        Some(other) => format!("{other:?}"),
        None => "unknown".into(),
    }
}

/// The suite's IANA name as Go prints it (`TLS_AES_128_GCM_SHA256`).
fn suite_name(s: Option<rustls::SupportedCipherSuite>) -> String {
    s.map_or_else(
        || "unknown".into(),
        |s| format!("{:?}", s.suite()).replace("TLS13_", "TLS_"),
    )
}
