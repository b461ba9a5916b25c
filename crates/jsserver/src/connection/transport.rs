//! The two halves of a connection's byte stream, whatever carries it.
//!
//! A plain client's bytes come straight from its TCP socket. A TLS client's come from one end
//! of a Unix socket pair whose other end the TLS bridge (`super::tls`) feeds with what it
//! decrypts (and drains into what it encrypts). Either way the reader, the writer and the
//! producers' direct writes ([`super::outbound::Outbound::flush`]) see one readable half and
//! one shared writable half with the same non-blocking calls (`try_write`, `writable`), so the
//! connection code has one path, and a plain connection pays one `match` per read or write
//! call on top of the syscall it makes anyway.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::{tcp, unix, TcpStream, UnixStream};

/// The readable half of a connection.
#[derive(Debug)]
pub enum ReadHalf {
    /// A plain client's TCP socket.
    Tcp(tcp::OwnedReadHalf),
    /// The server's end of a TLS client's bridge.
    Unix(unix::OwnedReadHalf),
}

/// The writable half of a connection, shared (`Arc`) by the writer task and the producers
/// that write directly.
#[derive(Debug)]
pub enum WriteHalf {
    /// A plain client's TCP socket.
    Tcp(tcp::OwnedWriteHalf),
    /// The server's end of a TLS client's bridge.
    Unix(unix::OwnedWriteHalf),
}

/// Splits a plain client's socket.
pub fn split_tcp(socket: TcpStream) -> (ReadHalf, WriteHalf) {
    let (r, w) = socket.into_split();
    (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
}

/// Splits the server's end of a TLS bridge.
pub fn split_unix(socket: UnixStream) -> (ReadHalf, WriteHalf) {
    let (r, w) = socket.into_split();
    (ReadHalf::Unix(r), WriteHalf::Unix(w))
}

impl WriteHalf {
    /// Writes what the socket takes now, without waiting (`WouldBlock` when it takes nothing).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            WriteHalf::Tcp(w) => w.try_write(buf),
            WriteHalf::Unix(w) => w.try_write(buf),
        }
    }

    /// Waits until the socket may take more bytes.
    pub async fn writable(&self) -> io::Result<()> {
        match self {
            WriteHalf::Tcp(w) => w.writable().await,
            WriteHalf::Unix(w) => w.writable().await,
        }
    }

    /// Shuts the writing direction (the peer reads end of stream; for a TLS client, the
    /// bridge then sends its `close_notify` and closes the TCP socket).
    pub async fn shutdown(&mut self) -> io::Result<()> {
        use tokio::io::AsyncWriteExt;
        match self {
            WriteHalf::Tcp(w) => w.shutdown().await,
            WriteHalf::Unix(w) => w.shutdown().await,
        }
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Unix(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn unix_halves_carry_bytes_both_ways_and_shut_down() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let (mut r, mut w) = split_unix(ours);
        w.writable().await.unwrap();
        assert_eq!(w.try_write(b"INFO {}\r\n").unwrap(), 9);
        let mut got = [0; 9];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"INFO {}\r\n");
        theirs.write_all(b"PING\r\n").await.unwrap();
        let mut got = [0; 6];
        r.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"PING\r\n");
        w.shutdown().await.unwrap();
        assert_eq!(theirs.read(&mut got).await.unwrap(), 0, "end of stream");
    }
}
