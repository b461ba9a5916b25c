//! A connection's writer task: drains the outbound buffer to the socket.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use tracing::{info, trace};

use super::outbound::{CloseReason, Take, SHRINK_ABOVE};
use super::transport::WriteHalf;
use crate::router::ClientHandle;
use crate::server::Server;

/// Drains the connection's outbound buffer to the socket, one write per burst, until closed.
pub(crate) async fn write_loop(
    server: Arc<Server>,
    handle: Arc<ClientHandle>,
    peer: SocketAddr,
    socket: Arc<WriteHalf>,
    mut write_deadline: Duration,
    done: CancellationToken,
) {
    let mut spare = BytesMut::new();
    let max_pending = server.options().max_pending;
    // The deadline given was read at accept time, perhaps before a reload: the first write
    // reads the options in force.
    let mut generation = u64::MAX;
    loop {
        match handle.outbound.take(&mut spare) {
            Take::Write => {
                // A reload's `write_deadline` applies from the next write on.
                let now_generation = server.options_generation();
                if now_generation != generation {
                    generation = now_generation;
                    write_deadline = server.options().write_deadline;
                }
                let written = tokio::select! {
                    r = timeout(write_deadline, write_all(&socket, &spare)) => r,
                    // Overflowed while this write was blocked on a full socket: stop now.
                    () = handle.outbound.killed() => Ok(Ok(())),
                };
                match written {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => {
                        trace!(cid = handle.id, error = %err, "write failed");
                        handle.outbound.close(CloseReason::Normal);
                        break;
                    }
                    Err(_) => {
                        info!(
                            "{peer} - cid:{} - Slow Consumer Detected: WriteDeadline of {:?} Exceeded",
                            handle.id, write_deadline
                        );
                        server
                            .counters()
                            .slow_consumers
                            .fetch_add(1, Ordering::Relaxed);
                        handle.outbound.close(CloseReason::SlowConsumer);
                        break;
                    }
                }
                if spare.capacity() > SHRINK_ABOVE {
                    spare = BytesMut::new();
                }
            }
            Take::Idle => handle.outbound.wait().await,
            Take::Closed(CloseReason::SlowConsumer) => {
                info!(
                    "{peer} - cid:{} - Slow Consumer Detected: MaxPending of {max_pending} Exceeded",
                    handle.id
                );
                server
                    .counters()
                    .slow_consumers
                    .fetch_add(1, Ordering::Relaxed);
                break;
            }
            Take::Closed(_) => break,
        }
    }
    // Producers stop writing directly; then this task holds the last handle and shuts the
    // socket (a handle still held elsewhere closes it when dropped).
    handle.outbound.detach();
    if let Ok(mut socket) = Arc::try_unwrap(socket) {
        let _ = socket.shutdown().await;
    }
    done.cancel();
}

/// Writes all of `buf` to a socket shared with producers' direct writes
/// ([`super::outbound::Outbound::flush`], which never writes while this runs).
async fn write_all(socket: &WriteHalf, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        socket.writable().await?;
        match socket.try_write(buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
