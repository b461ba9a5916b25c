//! [`WireError`]: why a byte stream could not be decoded.

/// A decode (or encode IO) failure. Every decode error means the stream is corrupt or hostile:
/// the caller should send [`WireError::err_text`] if there is one, then close the connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The control line does not start with an op this side accepts, or has no op at all.
    /// As nats-server's parser, the codec says so as soon as the first bytes of a line cannot
    /// begin an op, without waiting for the line end.
    #[error("unknown protocol operation")]
    UnknownOp,
    /// No line end within reach (`max` + 2 + [`OP_ALLOWANCE`](super::OP_ALLOWANCE) bytes),
    /// or control line arguments longer than `max` bytes.
    #[error("control line longer than {max} bytes")]
    ControlLineTooLong {
        /// The limit, in bytes, excluding the line terminator.
        max: usize,
    },
    /// The total size announced by `PUB`/`HPUB` (`MSG`/`HMSG`) exceeds the payload limit.
    #[error("payload of {len} bytes exceeds the maximum of {max}")]
    PayloadTooLarge {
        /// Announced total size (headers + payload), in bytes.
        len: usize,
        /// The limit, in bytes.
        max: usize,
    },
    /// Wrong number of arguments, or a size that is missing, negative, non-numeric, longer than
    /// nine digits, or a header size larger than the total size.
    #[error("invalid protocol arguments")]
    InvalidArgs,
    /// The `CONNECT` JSON is malformed, not an object, or has a wrongly typed field.
    #[error("invalid CONNECT JSON: {0}")]
    InvalidConnect(String),
    /// The `INFO` JSON is malformed, not an object, or has a wrongly typed field.
    #[error("invalid INFO JSON: {0}")]
    InvalidInfo(String),
    /// A client sent `-ERR`, which only servers send; nats-server closes without a reply.
    #[error("-ERR sent by a client")]
    UnexpectedErr,
    /// The payload is not followed by `\r\n`: the announced size was wrong.
    #[error("payload not followed by CRLF")]
    MissingPayloadTerminator,
    /// Reading or writing the underlying stream failed (required by tokio-util's codec traits).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl WireError {
    /// The exact text nats-server sends in `-ERR '<text>'` before it closes the connection for
    /// this error, or `None` when it closes silently.
    ///
    /// As observed on nats-server 2.15.1: an unknown op or a wrong payload size
    /// (desynchronised framing) gives `Unknown Protocol Operation`; an over-long control line
    /// gives `maximum control line exceeded`; an oversized payload gives
    /// `Maximum Payload Violation`. Bad arguments, bad `CONNECT` JSON and a client's `-ERR`
    /// close without `-ERR`.
    pub fn err_text(&self) -> Option<&'static str> {
        match self {
            Self::UnknownOp | Self::MissingPayloadTerminator => Some("Unknown Protocol Operation"),
            Self::ControlLineTooLong { .. } => Some("maximum control line exceeded"),
            Self::PayloadTooLarge { .. } => Some("Maximum Payload Violation"),
            Self::InvalidArgs
            | Self::UnexpectedErr
            | Self::InvalidConnect(_)
            | Self::InvalidInfo(_)
            | Self::Io(_) => None,
        }
    }
}
