//! Errors of the core client: one enum per boundary (connect, client calls, requests).

use std::io;

use jsproto::wire::WireError;

/// Why [`connect`](crate::connect) (or a reconnect attempt) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A server URL could not be parsed (`nats://host:port`, `host:port` or `host`).
    #[error("invalid server URL {url:?}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
    },
    /// The options name no server at all.
    #[error("no server URL given")]
    NoServers,
    /// The TCP connection could not be opened.
    #[error("connecting to {addr}: {source}")]
    Io {
        /// `host:port` tried.
        addr: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// No `INFO`, or no `PONG` after `CONNECT`+`PING`, within the connection timeout.
    #[error("handshake with {addr} timed out")]
    TimedOut {
        /// `host:port` tried.
        addr: String,
    },
    /// The server closed the connection during the handshake.
    #[error("server closed the connection during the handshake")]
    Closed,
    /// The server did not speak the protocol (first op not `INFO`, or undecodable bytes).
    #[error("protocol error during the handshake: {0}")]
    Protocol(String),
    /// The server answered `-ERR 'Authorization Violation'` (bad or missing credentials).
    #[error("authorization violation")]
    AuthorizationViolation,
    /// The nkey seed given is not a user seed (or cannot sign).
    #[error("invalid nkey seed: {0}")]
    InvalidNkey(String),
    /// A credentials file ([`ConnectOptions::credentials_file`](crate::ConnectOptions::credentials_file))
    /// could not be read or is not usable (no user JWT, no seed, not a user seed).
    #[error("credentials file {file}: {reason}")]
    Credentials {
        /// The file as given.
        file: String,
        /// What is wrong with it (never the seed).
        reason: String,
    },
    /// The server answered another `-ERR` during the handshake; holds its text.
    #[error("server error: {0}")]
    Server(String),
    /// TLS failed: a certificate file could not be read, the handshake failed (the server's
    /// certificate did not verify, or the server refused ours), or TLS was asked for and the
    /// server does not offer it.
    #[error("tls: {0}")]
    Tls(String),
}

impl From<WireError> for ConnectError {
    fn from(e: WireError) -> Self {
        ConnectError::Protocol(e.to_string())
    }
}

/// Why a core client call (publish, subscribe, flush, drain) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The client was closed (drained, or every handle dropped): nothing more can be sent.
    #[error("connection closed")]
    Closed,
    /// The subject (or reply subject, or queue group) is empty, or holds whitespace, or has an
    /// empty token (`a..b`, `.a`, `a.`).
    #[error("invalid subject {0:?}")]
    InvalidSubject(String),
    /// Headers plus payload are larger than the server's `max_payload` (from its `INFO`).
    #[error("message of {len} bytes exceeds the server's max_payload of {max} bytes")]
    MaxPayloadExceeded {
        /// Size of header block plus payload, in bytes.
        len: usize,
        /// The server's limit, in bytes.
        max: usize,
    },
}

/// Why [`Client::request`](crate::Client::request) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The request could not be sent.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Nobody subscribes to the subject: the server answered `503` (no responders).
    #[error("no responders")]
    NoResponders,
    /// No reply arrived within the request timeout.
    #[error("request timed out")]
    TimedOut,
}
