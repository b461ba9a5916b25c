//! One client connection: a reader task that decodes and applies ops, a writer task that drains
//! the connection's outbound buffer.
//!
//! ```text
//!  socket ──read──▶ ServerCodec ──ClientOp──▶ apply ──route──▶ Router ──encode──▶ Outbound(s)
//!  socket ◀──one write per burst── writer task ◀──────────── Outbound (this connection's)
//! ```
//!
//! Protocol rules follow nats-server as recorded in `shared/reference/nats-protocol.md`:
//! verbose `+OK`, the `-ERR` texts and which of them close the connection, PING/PONG keepalive
//! with `ping_interval`/`ping_max`, slow consumers closed without an `-ERR`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::FutureExt;
use jsproto::subject::{is_valid_publish_subject, is_valid_subject};
use jsproto::wire::{encode_err, ClientOp, Connect, Publish, ServerCodec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};
use tokio_util::codec::Decoder;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, trace};

use crate::idle_spin::IdleSpin;
use crate::outbound::{CloseReason, Take};
use crate::router::{ClientHandle, RouteScratch, RoutedMsg, SubscribeOutcome};
use crate::server::Server;

/// nats-server sends its first PING this long after a client connects (when the ping interval
/// is longer), so dead peers are found early; later PINGs follow `ping_interval`.
const FIRST_PING: Duration = Duration::from_secs(2);

/// Ops a client's reader applies between looks at the clock, the shutdown signal and its
/// receivers' buffers, when the client never lets it wait. Larger batches cost receivers fewer
/// wake-ups and writes: at 1024, async-nats spent 0.93 µs CPU per message received in the
/// `core-pub` bench, at 4096 0.82 µs (≈ 0.5 MiB of 100-byte messages per flush).
const CHECK_EVERY_OPS: u32 = 4096;

/// nats-server pings a client at least this often, busy or not, to measure its round trip.
const RTT_MEASUREMENT_INTERVAL: Duration = Duration::from_secs(3600);

/// The longest a client's reader pauses, per read, for receivers it filled past three
/// quarters of their `max_pending` (nats-server's `stallTotalAllowed`, 10 ms).
const STALL_LIMIT: Duration = Duration::from_millis(10);

/// A connection's read buffer, sized to its client's traffic as nats-server sizes its own: it
/// starts at 512 bytes, doubles (up to 64 KiB) when a read fills it, and halves (down to 64
/// bytes) after two reads in a row that fill less than half of it. A busy publisher's ops are
/// then read 64 KiB per syscall, and a connection that waits holds no buffer at all.
#[derive(Debug)]
struct ReadBuffer {
    bytes: BytesMut,
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
    fn read_now(
        &mut self,
        half: &mut tokio::net::tcp::OwnedReadHalf,
    ) -> Option<std::io::Result<usize>> {
        self.read(half).now_or_never()
    }

    /// Reads what arrives before `until`, yielding to the runtime between looks (each turn
    /// of the runtime polls socket readiness and runs the other ready tasks): `None` when
    /// nothing came in time. Reads the clock once per turn.
    async fn spin_read(
        &mut self,
        half: &mut tokio::net::tcp::OwnedReadHalf,
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
    async fn read(&mut self, half: &mut tokio::net::tcp::OwnedReadHalf) -> std::io::Result<usize> {
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
    fn idle(&mut self) {
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

/// What a client told us in CONNECT, kept for `/connz`.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    /// CONNECT `name`.
    pub name: String,
    /// CONNECT `lang`.
    pub lang: String,
    /// CONNECT `version`.
    pub version: String,
}

/// A live connection as the server's registry sees it (for `/connz` and shutdown).
#[derive(Debug)]
pub struct Connection {
    /// The routing side: id, outbound buffer, counters, subscriptions.
    pub handle: Arc<ClientHandle>,
    /// The peer's address.
    pub peer: SocketAddr,
    /// When the connection was accepted.
    pub start: SystemTime,
    /// Filled in by CONNECT.
    pub info: Mutex<ClientInfo>,
    /// Unix time in nanoseconds of the last op received.
    pub last_activity_ns: AtomicU64,
}

/// Serves one accepted socket until it closes; registers and unregisters it with `server`.
pub async fn serve(server: Arc<Server>, socket: TcpStream, peer: SocketAddr, id: u64) {
    let _ = socket.set_nodelay(true);
    let opts = server.options();
    let conn = Arc::new(Connection {
        handle: Arc::new(ClientHandle::new(id, opts.max_pending)),
        peer,
        start: SystemTime::now(),
        info: Mutex::new(ClientInfo::default()),
        last_activity_ns: AtomicU64::new(unix_nanos(SystemTime::now())),
    });
    let live = server.register(Arc::clone(&conn));
    debug!(cid = id, %peer, "client connection created");

    let (read_half, write_half) = socket.into_split();
    let write_half = Arc::new(write_half);
    conn.handle.outbound.attach(Arc::clone(&write_half));
    let done = CancellationToken::new();
    let info = server.info_for(id, peer);
    conn.handle
        .outbound
        .push(|buf| jsproto::wire::encode_info(buf, &info));
    if live > opts.max_connections {
        // As nats-server: the INFO, then the error, then the close.
        conn.handle
            .outbound
            .push(|buf| encode_err(buf, "maximum connections exceeded"));
        conn.handle.outbound.close(CloseReason::ProtocolError);
        let handle = Arc::clone(&conn.handle);
        write_loop(
            Arc::clone(&server),
            handle,
            peer,
            write_half,
            opts.write_deadline,
            done,
        )
        .await;
        server.unregister(id);
        return;
    }

    let writer = tokio::spawn(write_loop(
        Arc::clone(&server),
        Arc::clone(&conn.handle),
        peer,
        write_half,
        opts.write_deadline,
        done.clone(),
    ));

    let mut reader = Reader {
        server: Arc::clone(&server),
        conn: Arc::clone(&conn),
        connected: false,
        connect: Connect::default(),
        // nats-server treats a client as verbose until its CONNECT says otherwise.
        verbose: true,
        pedantic: false,
        no_responders: false,
        pings_out: 0,
        active_since_ping: false,
        last_ping_sent: None,
        scratch: RouteScratch::default(),
    };
    let reason = reader.run(read_half, &done).await;
    // Messages routed by this client's last ops still need their receivers woken.
    reader.scratch.flush_wakes();
    server.router().remove_connection(&conn.handle);
    conn.handle.outbound.close(reason);
    let _ = writer.await;
    server.unregister(id);
    debug!(cid = id, %peer, ?reason, "client connection closed");
}

/// The reading side of one connection and the per-connection protocol state.
struct Reader {
    server: Arc<Server>,
    conn: Arc<Connection>,
    connected: bool,
    /// The options of every CONNECT so far, merged ([`Connect::merge`]).
    connect: Connect,
    verbose: bool,
    pedantic: bool,
    no_responders: bool,
    pings_out: u32,
    active_since_ping: bool,
    /// When the last PING went out; `None` before the first.
    last_ping_sent: Option<Instant>,
    scratch: RouteScratch,
}

/// What applying one op asks the reader loop to do.
enum Flow {
    Continue,
    Close(CloseReason),
}

impl Reader {
    async fn run(
        &mut self,
        mut read_half: tokio::net::tcp::OwnedReadHalf,
        done: &CancellationToken,
    ) -> CloseReason {
        let opts = self.server.options();
        let mut codec = ServerCodec::new(jsproto::wire::Limits {
            max_control_line: opts.max_control_line,
            max_payload: opts.max_payload,
        });
        let mut buf = ReadBuffer::default();
        let ping_interval = opts.ping_interval.max(Duration::from_millis(10));
        let mut next_ping = Instant::now() + FIRST_PING.min(ping_interval);
        let shutdown = self.server.shutdown_token();
        // Made once and polled on every wait: a fresh sleep and two fresh cancellation waits
        // per wait registered a timer and two waiters each time (1.3k instructions per
        // wake-up in callgrind).
        let done_wait = done.cancelled();
        let shutdown_wait = shutdown.cancelled();
        let ping_timer = tokio::time::sleep_until(next_ping);
        tokio::pin!(done_wait, shutdown_wait, ping_timer);
        let mut since_check = 0u32;
        let mut spin = IdleSpin::new();
        let mut ops_since_wait = 0u32;
        loop {
            // Apply every complete op in the buffer.
            let mut applied = false;
            loop {
                match codec.decode(&mut buf.bytes) {
                    Ok(Some(op)) => {
                        applied = true;
                        ops_since_wait = ops_since_wait.saturating_add(1);
                        if let Flow::Close(reason) = self.apply(op) {
                            return reason;
                        }
                        // A client that keeps sending never needs a PING (it proves itself
                        // alive) and never lets the loop wait; look at the clock and wake the
                        // receivers now and then all the same.
                        since_check += 1;
                        if since_check >= CHECK_EVERY_OPS {
                            since_check = 0;
                            self.scratch.flush_and_stall(STALL_LIMIT).await;
                            if done.is_cancelled() || shutdown.is_cancelled() {
                                return CloseReason::Normal;
                            }
                            if Instant::now() >= next_ping {
                                next_ping = Instant::now() + ping_interval;
                                ping_timer.as_mut().reset(next_ping);
                                if let Flow::Close(reason) = self.on_ping_timer() {
                                    return reason;
                                }
                            }
                        }
                    }
                    Ok(None) => break,
                    Err(err) => {
                        debug!(cid = self.conn.handle.id, error = %err, "protocol error");
                        if let Some(text) = err.err_text() {
                            self.send_err(text);
                        }
                        return CloseReason::ProtocolError;
                    }
                }
            }
            if self.scratch.has_stalled() {
                // A receiver is behind (three quarters of its max_pending unwritten): wait for
                // it before reading more, whatever the count of ops since the last flush.
                self.scratch.flush_and_stall(STALL_LIMIT).await;
            }
            if applied {
                // One clock read per read, not per op: `last_activity` (connz) is as fresh as
                // the last read, and a clock read cost as much as routing a message.
                self.active_since_ping = true;
                self.conn
                    .last_activity_ns
                    .store(unix_nanos(SystemTime::now()), Ordering::Relaxed);
            }
            // Read more without waiting when the socket has it. Only when we would wait are
            // the writers of the connections we delivered to woken: a burst read from this
            // client costs each receiver one wake-up and one write, as nats-server flushes its
            // pending clients after each read.
            if let Some(read) = buf.read_now(&mut read_half) {
                match self.closed_by(read) {
                    Some(reason) => return reason,
                    None => continue,
                }
            }
            self.scratch.flush_and_stall(STALL_LIMIT).await;
            // A client that answers within microseconds (a worker acking and pulling again)
            // is read without blocking: see `idle_spin`.
            let ops = std::mem::take(&mut ops_since_wait);
            let now = std::time::Instant::now();
            if spin.should_spin(IdleSpin::since_epoch(now), ops) {
                if let Some(read) = buf.spin_read(&mut read_half, now + IdleSpin::BUDGET).await {
                    match self.closed_by(read) {
                        Some(reason) => return reason,
                        None => continue,
                    }
                }
            }
            buf.idle();
            tokio::select! {
                biased;
                () = &mut done_wait => return CloseReason::Normal,
                () = &mut shutdown_wait => return CloseReason::Normal,
                () = &mut ping_timer => {
                    next_ping = Instant::now() + ping_interval;
                    ping_timer.as_mut().reset(next_ping);
                    if let Flow::Close(reason) = self.on_ping_timer() {
                        return reason;
                    }
                }
                read = buf.read(&mut read_half) => {
                    if let Some(reason) = self.closed_by(read) {
                        return reason;
                    }
                }
            }
        }
    }

    /// What a read's result means for the connection: `Some` to close it (end of stream, or
    /// a read error, logged), `None` when bytes arrived.
    fn closed_by(&self, read: std::io::Result<usize>) -> Option<CloseReason> {
        match read {
            Ok(0) => Some(CloseReason::Normal),
            Ok(_) => None,
            Err(e) => {
                debug!(cid = self.conn.handle.id, error = %e, "read error");
                Some(CloseReason::Normal)
            }
        }
    }

    fn on_ping_timer(&mut self) -> Flow {
        // nats-server delays its PING while the client is sending: traffic proves it alive.
        // ... unless it is time to measure the round trip: nats-server's first PING always
        // goes out, then one at least every hour (`DEFAULT_RTT_MEASUREMENT_INTERVAL`).
        let need_rtt = self
            .last_ping_sent
            .is_none_or(|at| at.elapsed() > RTT_MEASUREMENT_INTERVAL);
        if std::mem::take(&mut self.active_since_ping) && self.pings_out == 0 && !need_rtt {
            return Flow::Continue;
        }
        if self.pings_out + 1 > self.server.options().ping_max {
            debug!(cid = self.conn.handle.id, "stale connection");
            self.send_err("Stale Connection");
            return Flow::Close(CloseReason::ProtocolError);
        }
        self.pings_out += 1;
        self.last_ping_sent = Some(Instant::now());
        self.push(b"PING\r\n");
        Flow::Continue
    }

    fn apply(&mut self, op: ClientOp) -> Flow {
        if tracing::enabled!(tracing::Level::TRACE) {
            // `-V`: every op received, in nats-server's `<<- [OP args]` form.
            trace!(
                "{} - cid:{} - <<- [{}]",
                self.conn.peer,
                self.conn.handle.id,
                describe(&op)
            );
        }
        match op {
            ClientOp::Pub(publish) => return self.on_pub(publish),
            ClientOp::Ping => {
                self.push(b"PONG\r\n");
            }
            ClientOp::Pong => self.pings_out = 0,
            ClientOp::Sub {
                subject,
                queue_group,
                sid,
            } => {
                return self.on_sub(subject, queue_group, sid);
            }
            ClientOp::Unsub { sid, max_msgs } => {
                self.server
                    .router()
                    .unsubscribe(&self.conn.handle, &sid, max_msgs);
                self.ok();
            }
            ClientOp::Connect(connect) => return self.on_connect(*connect),
        }
        Flow::Continue
    }

    fn on_connect(&mut self, later: Connect) -> Flow {
        // As nats-server: every CONNECT is applied over the options the connection has.
        self.connect.merge(later);
        let connect = self.connect.clone();
        if let Some(protocol) = connect.protocol {
            if !(0..=1).contains(&protocol) {
                self.send_err("invalid client protocol");
                return Flow::Close(CloseReason::ProtocolError);
            }
        }
        if connect.no_responders() && !connect.headers() {
            self.send_err("no responders requires headers support");
            return Flow::Close(CloseReason::ProtocolError);
        }
        self.connected = true;
        self.verbose = connect.verbose();
        self.pedantic = connect.pedantic();
        self.no_responders = connect.no_responders();
        self.conn
            .handle
            .set_connect_flags(connect.headers(), connect.echo());
        {
            let mut info = self.conn.info.lock().expect("info lock poisoned");
            info.name = connect.name.clone().unwrap_or_default();
            info.lang = connect.lang.clone().unwrap_or_default();
            info.version = connect.version.clone().unwrap_or_default();
        }
        debug!(cid = self.conn.handle.id, name = ?connect.name, lang = ?connect.lang, "CONNECT");
        self.ok();
        Flow::Continue
    }

    fn on_sub(&mut self, subject: Bytes, queue_group: Option<Bytes>, sid: Bytes) -> Flow {
        let queue_ok = queue_group.as_ref().is_none_or(|q| is_valid_queue_name(q));
        if !is_valid_subject(&subject) || !queue_ok {
            self.send_err("Invalid Subject");
            return Flow::Continue;
        }
        match self
            .server
            .router()
            .subscribe(&self.conn.handle, subject, queue_group, sid)
        {
            Ok(SubscribeOutcome::Added | SubscribeOutcome::DuplicateSid) => self.ok(),
            Err(_) => self.send_err("Invalid Subject"),
        }
        Flow::Continue
    }

    fn on_pub(&mut self, publish: Publish) -> Flow {
        let handle = Arc::clone(&self.conn.handle);
        if publish.headers.is_some() && !handle.headers() {
            // HPUB without CONNECT `headers:true`: nats-server closes with no -ERR.
            return Flow::Close(CloseReason::ProtocolError);
        }
        if !is_valid_publish_subject(&publish.subject) {
            if self.pedantic {
                self.send_err("Invalid Publish Subject");
            }
            // An empty token or a stray dot can match nothing: nats-server drops the message.
            // A wildcard token is routed literally (after the pedantic -ERR).
            if !is_valid_subject(&publish.subject) {
                return Flow::Continue;
            }
        }
        let msg = RoutedMsg {
            subject: &publish.subject,
            reply: publish.reply.as_ref(),
            headers: publish.headers.as_ref(),
            payload: &publish.payload,
        };
        // nats-server acknowledges a verbose PUB before it routes the message.
        self.ok();
        handle.counters.count_in(msg.size());
        let router = self.server.router();
        router.counters.count_in(msg.size());
        let interest = router.route(Some(&handle), msg, &mut self.scratch);
        if !interest && self.no_responders {
            if let Some(reply) = &publish.reply {
                self.no_responders_reply(&publish.subject, reply);
            }
        }
        Flow::Continue
    }

    /// The `503` status nats-server sends to a requester whose subject nobody subscribes to.
    fn no_responders_reply(&mut self, subject: &Bytes, reply: &Bytes) {
        let mut block = BytesMut::with_capacity(40 + subject.len());
        block.extend_from_slice(b"NATS/1.0 503\r\nNats-Subject: ");
        block.extend_from_slice(subject);
        block.extend_from_slice(b"\r\n\r\n");
        let headers = block.freeze();
        let msg = RoutedMsg {
            subject: reply,
            reply: None,
            headers: Some(&headers),
            payload: &Bytes::new(),
        };
        let mut scratch = RouteScratch::default();
        self.server.router().route(None, msg, &mut scratch);
        scratch.flush_wakes();
    }

    fn ok(&self) {
        if self.verbose {
            self.push(b"+OK\r\n");
        }
    }

    fn push(&self, bytes: &[u8]) {
        self.conn
            .handle
            .outbound
            .push(|buf| buf.extend_from_slice(bytes));
    }

    fn send_err(&self, text: &str) {
        self.conn.handle.outbound.push(|buf| encode_err(buf, text));
    }
}

/// A one-line rendering of a client op for trace logs (payloads are not shown).
fn describe(op: &ClientOp) -> String {
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    match op {
        ClientOp::Connect(c) => format!("CONNECT {}", serde_json::to_string(c).unwrap_or_default()),
        ClientOp::Pub(p) => {
            let reply = p
                .reply
                .as_ref()
                .map(|r| format!(" {}", text(r)))
                .unwrap_or_default();
            match &p.headers {
                Some(h) => format!(
                    "HPUB {}{reply} {} {}",
                    text(&p.subject),
                    h.len(),
                    h.len() + p.payload.len()
                ),
                None => format!("PUB {}{reply} {}", text(&p.subject), p.payload.len()),
            }
        }
        ClientOp::Sub {
            subject,
            queue_group,
            sid,
        } => match queue_group {
            Some(q) => format!("SUB {} {} {}", text(subject), text(q), text(sid)),
            None => format!("SUB {} {}", text(subject), text(sid)),
        },
        ClientOp::Unsub { sid, max_msgs } => match max_msgs {
            Some(max) => format!("UNSUB {} {max}", text(sid)),
            None => format!("UNSUB {}", text(sid)),
        },
        ClientOp::Ping => "PING".to_owned(),
        ClientOp::Pong => "PONG".to_owned(),
    }
}

/// A queue group name is one token of visible characters (nats-server rejects whitespace).
fn is_valid_queue_name(q: &[u8]) -> bool {
    !q.is_empty() && !q.iter().any(|b| b.is_ascii_whitespace())
}

/// Drains the connection's outbound buffer to the socket, one write per burst, until closed.
async fn write_loop(
    server: Arc<Server>,
    handle: Arc<ClientHandle>,
    peer: SocketAddr,
    socket: Arc<OwnedWriteHalf>,
    write_deadline: Duration,
    done: CancellationToken,
) {
    let mut spare = BytesMut::new();
    let max_pending = server.options().max_pending;
    loop {
        match handle.outbound.take(&mut spare) {
            Take::Write => {
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
                            .router()
                            .counters
                            .slow_consumers
                            .fetch_add(1, Ordering::Relaxed);
                        handle.outbound.close(CloseReason::SlowConsumer);
                        break;
                    }
                }
                if spare.capacity() > crate::outbound::SHRINK_ABOVE {
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
                    .router()
                    .counters
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
/// ([`crate::outbound::Outbound::flush`], which never writes while this runs).
async fn write_all(socket: &OwnedWriteHalf, mut buf: &[u8]) -> std::io::Result<()> {
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

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected loopback pair: our read half and the peer that writes to it.
    async fn pair() -> (tokio::net::tcp::OwnedReadHalf, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (sock, _) = listener.accept().await.unwrap();
        (sock.into_split().0, peer)
    }

    /// Reads until `want` bytes arrived in all.
    async fn read_all(
        buf: &mut ReadBuffer,
        half: &mut tokio::net::tcp::OwnedReadHalf,
        want: usize,
    ) {
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
