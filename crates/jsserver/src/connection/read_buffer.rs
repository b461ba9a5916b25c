//! A connection's read buffer, sized to its client's traffic.

use bytes::{BufMut, BytesMut};
use futures_util::FutureExt;
use tokio::io::AsyncReadExt;

use super::transport::ReadHalf;

/// A connection's read buffer, sized to its client's traffic as nats-server sizes its own: it
/// starts at 512 bytes, doubles (up to 64 KiB) when a read fills it, and halves (down to 64
/// bytes) after two reads in a row that fill less than half of it. A busy publisher's ops are
/// then read 64 KiB per syscall, and a connection that waits holds no buffer at all.
#[derive(Debug)]
pub(super) struct ReadBuffer {
    /// The bytes read and not yet decoded.
    pub(super) bytes: BytesMut,
    /// Bytes the next read asks for.
    size: usize,
    /// Short reads in a row, towards halving `size`.
    short_reads: u8,
}

impl ReadBuffer {
    const START: usize = 512;
    const MIN: usize = 64;
    const MAX: usize = 64 * 1024;

    /// Reads what the socket holds now, without waiting: `None` when there is nothing to
    /// read, `Some(Ok(0))` at end of stream.
    ///
    /// Goes through tokio's `AsyncRead`, which takes a short read as proof that the socket is
    /// drained: the next attempt then costs no syscall (with `try_read`, every wake-up ended
    /// with a `recvfrom` answered `EAGAIN`).
    pub(super) fn read_now(&mut self, half: &mut ReadHalf) -> Option<std::io::Result<usize>> {
        self.read(half).now_or_never()
    }

    /// Reads what arrives before `until`, yielding to the runtime between looks (each turn
    /// of the runtime polls socket readiness and runs the other ready tasks): `None` when
    /// nothing came in time. Reads the clock once per turn.
    pub(super) async fn spin_read(
        &mut self,
        half: &mut ReadHalf,
        until: std::time::Instant,
    ) -> Option<std::io::Result<usize>> {
        loop {
            tokio::task::yield_now().await;
            if let Some(read) = self.read_now(half) {
                return Some(read);
            }
            if std::time::Instant::now() >= until {
                return None;
            }
        }
    }

    /// Reads, waiting until the socket has something: `Ok(0)` at end of stream. Cancel safe.
    pub(super) async fn read(&mut self, half: &mut ReadHalf) -> std::io::Result<usize> {
        if self.bytes.capacity() - self.bytes.len() < self.size {
            self.bytes.reserve(self.size);
        }
        // Never more than `size` per read, even into a larger spare capacity: a stalled
        // producer is let in at most one read's worth of ops between stalls.
        let room = (self.bytes.capacity() - self.bytes.len()).min(self.size);
        let n = half.read_buf(&mut (&mut self.bytes).limit(room)).await?;
        self.adapt(n, room);
        Ok(n)
    }

    /// Resizes after a read of `n` bytes into `room`.
    fn adapt(&mut self, n: usize, room: usize) {
        if n >= room {
            self.size = (self.size * 2).min(Self::MAX);
            self.short_reads = 0;
        } else if n < self.size / 2 {
            self.short_reads += 1;
            if self.short_reads >= 2 {
                self.size = (self.size / 2).max(Self::MIN);
                self.short_reads = 0;
            }
        } else {
            self.short_reads = 0;
        }
    }

    /// The connection is about to wait: let go of an empty buffer.
    pub(super) fn idle(&mut self) {
        if self.bytes.is_empty() {
            self.bytes = BytesMut::new();
        }
    }
}

impl Default for ReadBuffer {
    fn default() -> Self {
        Self {
            bytes: BytesMut::new(),
            size: Self::START,
            short_reads: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;

    use super::*;

    /// A connected loopback pair: our read half and the peer that writes to it.
    async fn pair() -> (ReadHalf, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (sock, _) = listener.accept().await.unwrap();
        (super::super::transport::split_tcp(sock).0, peer)
    }

    /// Reads until `want` bytes arrived in all.
    async fn read_all(buf: &mut ReadBuffer, half: &mut ReadHalf, want: usize) {
        let mut got = 0;
        while got < want {
            got += buf.read(half).await.unwrap();
            buf.bytes.clear();
        }
    }

    #[tokio::test]
    async fn read_buffer_grows_with_full_reads_and_shrinks_with_short_ones() {
        let (mut half, mut peer) = pair().await;
        let mut buf = ReadBuffer::default();
        assert_eq!(buf.size, ReadBuffer::START);
        // A flood: every read fills what it asked for, so the size doubles up to the cap.
        let writer = tokio::spawn(async move {
            peer.write_all(&vec![b'x'; 1 << 20]).await.unwrap();
            peer
        });
        read_all(&mut buf, &mut half, 1 << 20).await;
        let mut peer = writer.await.unwrap();
        assert_eq!(buf.size, ReadBuffer::MAX);
        // One small op per read: two short reads in a row halve the size, down to the floor.
        for _ in 0..40 {
            peer.write_all(b"PING\r\n").await.unwrap();
            read_all(&mut buf, &mut half, 6).await;
        }
        assert_eq!(buf.size, ReadBuffer::MIN);
        // Waiting with nothing buffered holds no allocation.
        buf.idle();
        assert_eq!(buf.bytes.capacity(), 0);
    }
}
