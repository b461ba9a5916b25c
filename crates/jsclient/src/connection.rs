//! The connection task: owns the socket, the subscriptions and the reconnect loop.
//!
//! ```text
//!  Client / Subscriber handles ──Command──▶ Handler ──PUB/SUB/UNSUB/PING──▶ socket
//!                                            │  ◀──INFO/MSG/PING/PONG/-ERR──
//!  Subscriber ◀──mpsc(Message)── subs[sid] ◀─┘
//! ```
//!
//! States: `Connected` → (EOF, IO error, stale keepalive) → `Disconnected` → (round of attempts
//! over the URL list with back-off) → `Connected` again, re-sending every `SUB` with its sid,
//! the remaining auto-unsubscribe count, the request mux subscription, then the publishes
//! buffered meanwhile, then a `PING` for the flushes that waited. `Closed` after a drain, after
//! every handle was dropped, or after `max_reconnects` failed rounds.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use jsproto::headers::Headers;
use jsproto::wire::{self, ClientCodec, Connect, Info, ServerOp};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{timeout, Instant};
use tokio_util::codec::FramedRead;
use tracing::{debug, info, trace, warn};

use crate::client::{Client, Message};
use crate::error::ConnectError;
use crate::options::{ConnectOptions, ServerAddr};

/// The state of the connection, as seen by [`Client::connection_state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// Handshake done; commands go straight to the server.
    Connected,
    /// Lost the server; reconnecting. Publishes are buffered, subscriptions are kept.
    Disconnected,
    /// Drained, dropped or gave up reconnecting: every call fails with
    /// [`ClientError::Closed`](crate::ClientError::Closed).
    Closed,
}

/// Any byte stream the client can speak NATS over (TCP, or an in-memory pipe in tests).
pub(crate) trait Transport: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Transport for T {}

pub(crate) type Io = Box<dyn Transport>;

/// Opens a transport to a server address.
pub(crate) type Connector =
    Arc<dyn Fn(ServerAddr) -> BoxFuture<'static, io::Result<Io>> + Send + Sync>;

/// Plain TCP with `TCP_NODELAY`.
pub(crate) fn tcp_connector() -> Connector {
    Arc::new(|addr: ServerAddr| {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(addr.host_port()).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Io)
        })
    })
}

/// Reserved sid of the request/reply mux subscription (`<inbox>.*`); user sids start at 1.
pub(crate) const MUX_SID: u64 = 0;

/// What a `Client` or `Subscriber` asks of the connection task.
pub(crate) enum Command {
    Publish {
        subject: String,
        reply: Option<String>,
        headers: Option<Bytes>,
        payload: Bytes,
    },
    Subscribe {
        sid: u64,
        subject: String,
        queue: Option<String>,
        tx: mpsc::Sender<Message>,
    },
    Unsubscribe {
        sid: u64,
        max: Option<u64>,
    },
    /// `UNSUB` now, end the subscriber's stream once the server confirmed (PONG).
    DrainSubscription {
        sid: u64,
    },
    Request {
        subject: String,
        token: String,
        headers: Option<Bytes>,
        payload: Bytes,
        tx: oneshot::Sender<Message>,
    },
    Flush {
        tx: oneshot::Sender<()>,
    },
    Drain {
        tx: oneshot::Sender<()>,
    },
}

/// Done when the `PONG` answering a given `PING` arrives.
enum PongAction {
    Notify(oneshot::Sender<()>),
    RemoveSubscription(u64),
    Close(oneshot::Sender<()>),
}

struct Subscription {
    subject: String,
    queue: Option<String>,
    tx: mpsc::Sender<Message>,
    /// Auto-unsubscribe after this many deliveries in total.
    max: Option<u64>,
    delivered: u64,
}

struct Conn {
    reader: FramedRead<ReadHalf<Io>, ClientCodec>,
    writer: WriteHalf<Io>,
    wbuf: BytesMut,
}

/// Connects once (or in the background with `retry_on_initial_connect`) and spawns the task.
pub(crate) async fn connect(
    opts: ConnectOptions,
    servers: Vec<ServerAddr>,
    connector: Connector,
) -> Result<Client, ConnectError> {
    if servers.is_empty() {
        return Err(ConnectError::NoServers);
    }
    let mut first = None;
    let mut last_err = None;
    for (i, server) in servers.iter().enumerate() {
        match connect_one(&opts, server, &connector).await {
            Ok(ok) => {
                first = Some((i, ok));
                break;
            }
            Err(e) => {
                debug!(server = %server.host_port(), error = %e, "connect failed");
                last_err = Some(e);
            }
        }
    }
    let (next_server, conn, info) = match first {
        Some((i, (conn, info))) => (i, Some(conn), info),
        None if opts.retry_on_initial_connect => (0, None, Info::default()),
        None => return Err(last_err.expect("at least one server was tried")),
    };
    let (cmd_tx, cmd_rx) = mpsc::channel(opts.command_capacity);
    let state0 = if conn.is_some() {
        State::Connected
    } else {
        State::Disconnected
    };
    let (state_tx, state_rx) = watch::channel(state0);
    let (info_tx, info_rx) = watch::channel(Arc::new(info));
    let client = Client::new(cmd_tx, info_rx, state_rx, &opts);
    let mux_prefix = client.mux_prefix().to_owned();
    let mut handler = Handler {
        opts,
        servers,
        next_server,
        connector,
        conn,
        subs: HashMap::new(),
        mux_prefix,
        mux_subscribed: false,
        requests: HashMap::new(),
        pongs: VecDeque::new(),
        pings_outstanding: 0,
        offline: BytesMut::new(),
        offline_pong_actions: Vec::new(),
        state_tx,
        info_tx,
        cmd_rx,
        closing: None,
    };
    if handler.conn.is_some() {
        info!(server = %handler.servers[next_server].host_port(), "connected");
    } else {
        handler.next_server = 0;
    }
    tokio::spawn(handler.run());
    Ok(client)
}

/// One attempt: open the transport, then `INFO` → `CONNECT`+`PING` → `PONG`.
async fn connect_one(
    opts: &ConnectOptions,
    addr: &ServerAddr,
    connector: &Connector,
) -> Result<(Conn, Info), ConnectError> {
    let host_port = addr.host_port();
    let attempt = async {
        let io = connector(addr.clone())
            .await
            .map_err(|source| ConnectError::Io {
                addr: host_port.clone(),
                source,
            })?;
        handshake(io, opts, addr).await
    };
    timeout(opts.connection_timeout, attempt)
        .await
        .map_err(|_| ConnectError::TimedOut {
            addr: host_port.clone(),
        })?
}

async fn handshake(
    io: Io,
    opts: &ConnectOptions,
    addr: &ServerAddr,
) -> Result<(Conn, Info), ConnectError> {
    let io = if opts.tls.first {
        crate::tls::upgrade(io, opts, &addr.host).await?
    } else {
        io
    };
    let (r, mut writer) = tokio::io::split(io);
    let mut reader = FramedRead::new(r, ClientCodec::new());
    let mut info = match reader.next().await {
        Some(Ok(ServerOp::Info(info))) => *info,
        Some(Ok(op)) => {
            return Err(ConnectError::Protocol(format!(
                "expected INFO first, got {op:?}"
            )))
        }
        Some(Err(e)) => return Err(e.into()),
        None => return Err(ConnectError::Closed),
    };
    let tls = opts.tls.first || addr.tls || opts.tls.wanted() || info.tls_required;
    if tls && !opts.tls.first {
        if !info.tls_required && !info.tls_available {
            return Err(ConnectError::Tls(
                "TLS is required by the client, and the server does not offer it".into(),
            ));
        }
        // The server sends nothing after INFO until the handshake: nothing is buffered.
        if !reader.read_buffer().is_empty() {
            return Err(ConnectError::Protocol(
                "bytes after INFO before the TLS handshake".into(),
            ));
        }
        let io = reader.into_inner().unsplit(writer);
        let io = crate::tls::upgrade(io, opts, &addr.host).await?;
        let (r, w) = tokio::io::split(io);
        reader = FramedRead::new(r, ClientCodec::new());
        writer = w;
    }
    let (user, pass, token) = match (&opts.user, &opts.token) {
        (Some(u), _) => (Some(u.clone()), opts.pass.clone(), None),
        (None, Some(t)) => (None, None, Some(t.clone())),
        (None, None) => match (&addr.user, &addr.pass) {
            (Some(u), p) => (Some(u.clone()), p.clone(), None),
            (None, Some(t)) => (None, None, Some(t.clone())),
            (None, None) => (None, None, None),
        },
    };
    let (nkey, sig) = match &opts.nkey {
        Some(seed) => {
            let pair = nkeys::KeyPair::from_seed(&seed.0)
                .map_err(|e| ConnectError::InvalidNkey(e.to_string()))?;
            // Signed as nats.go signs it: the nonce's bytes, the signature in unpadded
            // URL-safe base64.
            let sig = match &info.nonce {
                Some(nonce) => {
                    let raw = pair
                        .sign(nonce.as_bytes())
                        .map_err(|e| ConnectError::InvalidNkey(e.to_string()))?;
                    Some(base64::Engine::encode(
                        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                        raw,
                    ))
                }
                None => None,
            };
            (Some(pair.public_key()), sig)
        }
        None => (None, None),
    };
    // A creds file: the JWT, and the nonce signed with its seed, as nats.go sends them (the
    // empty nonce signed when the server sends none); no `nkey` (the JWT names the user).
    let (jwt, sig) = match &opts.creds {
        Some(creds) => {
            let pair = nkeys::KeyPair::from_seed(&creds.seed.0)
                .map_err(|e| ConnectError::InvalidNkey(e.to_string()))?;
            let raw = pair
                .sign(info.nonce.as_deref().unwrap_or_default().as_bytes())
                .map_err(|e| ConnectError::InvalidNkey(e.to_string()))?;
            let sig =
                base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, raw);
            (Some(creds.jwt.clone()), Some(sig))
        }
        None => (None, sig),
    };
    let connect = Connect {
        verbose: Some(false),
        pedantic: Some(false),
        tls_required: Some(tls),
        echo: Some(opts.echo),
        headers: Some(true),
        no_responders: Some(true),
        protocol: Some(1),
        name: opts.name.clone(),
        lang: Some("rust-jsclient".to_owned()),
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        user,
        pass,
        auth_token: token,
        jwt,
        nkey,
        sig,
    };
    let mut buf = BytesMut::new();
    wire::encode_connect(&mut buf, &connect);
    wire::encode_ping(&mut buf);
    writer
        .write_all(&buf)
        .await
        .map_err(|source| ConnectError::Io {
            addr: addr.host_port(),
            source,
        })?;
    loop {
        match reader.next().await {
            Some(Ok(ServerOp::Pong)) => break,
            Some(Ok(ServerOp::Info(new))) => info = *new,
            Some(Ok(ServerOp::Ping)) => {
                let _ = writer.write_all(b"PONG\r\n").await;
            }
            Some(Ok(ServerOp::Err(text))) => {
                return Err(if text.eq_ignore_ascii_case("Authorization Violation") {
                    ConnectError::AuthorizationViolation
                } else {
                    ConnectError::Server(text)
                })
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => return Err(ConnectError::Closed),
        }
    }
    if info.max_payload > 0 {
        reader.decoder_mut().set_max_payload(
            usize::try_from(info.max_payload)
                .unwrap_or(usize::MAX)
                .max(1024 * 1024),
        );
    }
    Ok((
        Conn {
            reader,
            writer,
            wbuf: BytesMut::with_capacity(64 * 1024),
        },
        info,
    ))
}

struct Handler {
    opts: ConnectOptions,
    servers: Vec<ServerAddr>,
    /// Index of the server to try first on the next reconnect round.
    next_server: usize,
    connector: Connector,
    conn: Option<Conn>,
    subs: HashMap<u64, Subscription>,
    mux_prefix: String,
    mux_subscribed: bool,
    requests: HashMap<String, oneshot::Sender<Message>>,
    /// One entry per `PING` in flight, in order.
    pongs: VecDeque<Vec<PongAction>>,
    pings_outstanding: usize,
    /// Publishes encoded while disconnected, sent after the reconnect.
    offline: BytesMut,
    /// PONG actions that wait for the next connection.
    offline_pong_actions: Vec<PongAction>,
    state_tx: watch::Sender<State>,
    info_tx: watch::Sender<Arc<Info>>,
    cmd_rx: mpsc::Receiver<Command>,
    /// Set by a drain: notified once the connection is closed.
    closing: Option<oneshot::Sender<()>>,
}

/// Commands handled per wake-up before the write buffer is flushed.
const COMMAND_BATCH: usize = 256;

impl Handler {
    async fn run(mut self) {
        let period = self.opts.ping_interval;
        let mut ping = tokio::time::interval_at(Instant::now() + period, period);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.conn.is_none() {
                if !self.reconnect().await {
                    break;
                }
                if self.closing.is_some() {
                    break;
                }
                ping.reset();
                if !self.write_out().await {
                    self.disconnected("write failed");
                }
                continue;
            }
            let conn = self.conn.as_mut().expect("checked above");
            let mut fatal = None;
            tokio::select! {
                op = conn.reader.next() => match op {
                    Some(Ok(op)) => self.handle_op(op),
                    Some(Err(e)) => fatal = Some(format!("protocol error: {e}")),
                    None => fatal = Some("server closed the connection".to_owned()),
                },
                cmd = self.cmd_rx.recv() => match cmd {
                    Some(cmd) => {
                        self.handle_command(cmd);
                        for _ in 0..COMMAND_BATCH {
                            match self.cmd_rx.try_recv() {
                                Ok(cmd) => self.handle_command(cmd),
                                Err(_) => break,
                            }
                        }
                    }
                    None => {
                        // Every handle is gone: send what is queued and close.
                        self.write_out().await;
                        break;
                    }
                },
                _ = ping.tick() => {
                    if self.pings_outstanding >= self.opts.max_pings_outstanding {
                        fatal = Some("stale connection: PINGs unanswered".to_owned());
                    } else {
                        self.pings_outstanding += 1;
                        self.ping(Vec::new());
                    }
                }
            }
            if let Some(reason) = fatal {
                self.disconnected(&reason);
                continue;
            }
            if !self.write_out().await {
                self.disconnected("write failed");
                continue;
            }
            if self.closing.is_some() && self.subs.is_empty() && self.pongs.is_empty() {
                break;
            }
        }
        self.close().await;
    }

    /// Writes the buffered output; false if the socket failed.
    async fn write_out(&mut self) -> bool {
        let Some(conn) = self.conn.as_mut() else {
            return true;
        };
        if conn.wbuf.is_empty() {
            return true;
        }
        trace!(bytes = conn.wbuf.len(), "write");
        let ok = conn.writer.write_all(&conn.wbuf).await.is_ok();
        conn.wbuf.clear();
        ok
    }

    async fn close(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            let _ = conn.writer.write_all(&conn.wbuf).await;
            let _ = conn.writer.shutdown().await;
        }
        self.subs.clear();
        self.requests.clear();
        self.cmd_rx.close();
        self.state_tx.send_replace(State::Closed);
        if let Some(tx) = self.closing.take() {
            let _ = tx.send(());
        }
        debug!("connection closed");
    }

    fn disconnected(&mut self, reason: &str) {
        warn!(reason, "disconnected");
        self.conn = None;
        self.pings_outstanding = 0;
        for actions in self.pongs.drain(..) {
            self.offline_pong_actions.extend(actions);
        }
        self.state_tx.send_replace(State::Disconnected);
    }

    /// Rounds of attempts over the server list until one succeeds. Keeps taking commands while
    /// waiting. False when the client should close (gave up, or every handle dropped).
    async fn reconnect(&mut self) -> bool {
        let mut round = 0usize;
        loop {
            let n = self.servers.len();
            for k in 0..n {
                let i = (self.next_server + k) % n;
                let server = self.servers[i].clone();
                match connect_one(&self.opts, &server, &self.connector).await {
                    Ok((conn, info)) => {
                        info!(server = %server.host_port(), "reconnected");
                        self.next_server = i;
                        self.info_tx.send_replace(Arc::new(info));
                        self.connected(conn);
                        return true;
                    }
                    Err(e) => debug!(server = %server.host_port(), error = %e, "reconnect failed"),
                }
            }
            self.next_server = (self.next_server + 1) % n;
            round += 1;
            if self.opts.max_reconnects.is_some_and(|max| round >= max) {
                warn!(rounds = round, "giving up reconnecting");
                return false;
            }
            let deadline = Instant::now() + self.backoff(round);
            let sleep = tokio::time::sleep_until(deadline);
            tokio::pin!(sleep);
            loop {
                let room = self.offline.len() < self.opts.reconnect_buffer_size;
                tokio::select! {
                    () = &mut sleep => break,
                    cmd = self.cmd_rx.recv(), if room => match cmd {
                        Some(cmd) => self.handle_command(cmd),
                        None => return false,
                    },
                }
                if self.closing.is_some() {
                    return true;
                }
            }
        }
    }

    fn backoff(&self, round: usize) -> Duration {
        let base = self.opts.reconnect_delay;
        let exp = base.saturating_mul(1u32 << round.min(16).saturating_sub(1));
        let d = exp.min(self.opts.max_reconnect_delay);
        let jitter = d.mul_f64(rand::random::<f64>() * 0.1);
        d + jitter
    }

    /// A fresh connection: re-send subscriptions, then the buffered publishes, then a PING.
    fn connected(&mut self, mut conn: Conn) {
        // Commands queued during the attempt still belong before the reconnect's PING.
        while self.offline.len() < self.opts.reconnect_buffer_size {
            match self.cmd_rx.try_recv() {
                Ok(cmd) => self.handle_command(cmd),
                Err(_) => break,
            }
        }
        let buf = &mut conn.wbuf;
        let mut sids: Vec<_> = self.subs.keys().copied().collect();
        sids.sort_unstable();
        for sid in sids {
            let sub = &self.subs[&sid];
            let sid_text = sid.to_string();
            wire::encode_sub(
                buf,
                sub.subject.as_bytes(),
                sub.queue.as_deref().map(str::as_bytes),
                sid_text.as_bytes(),
            );
            if let Some(max) = sub.max {
                wire::encode_unsub(
                    buf,
                    sid_text.as_bytes(),
                    Some(max.saturating_sub(sub.delivered)),
                );
            }
        }
        if self.mux_subscribed {
            let subject = format!("{}.*", self.mux_prefix);
            wire::encode_sub(
                buf,
                subject.as_bytes(),
                None,
                MUX_SID.to_string().as_bytes(),
            );
        }
        buf.extend_from_slice(&self.offline.split());
        self.conn = Some(conn);
        let actions = std::mem::take(&mut self.offline_pong_actions);
        self.ping(actions);
        self.state_tx.send_replace(State::Connected);
    }

    fn ping(&mut self, actions: Vec<PongAction>) {
        if let Some(conn) = self.conn.as_mut() {
            wire::encode_ping(&mut conn.wbuf);
            self.pongs.push_back(actions);
        } else {
            self.offline_pong_actions.extend(actions);
        }
    }

    fn handle_op(&mut self, op: ServerOp) {
        match op {
            ServerOp::Msg(m) => self.on_msg(m),
            ServerOp::Ping => {
                if let Some(conn) = self.conn.as_mut() {
                    wire::encode_pong(&mut conn.wbuf);
                }
            }
            ServerOp::Pong => {
                self.pings_outstanding = 0;
                for action in self.pongs.pop_front().unwrap_or_default() {
                    match action {
                        PongAction::Notify(tx) => {
                            let _ = tx.send(());
                        }
                        PongAction::RemoveSubscription(sid) => {
                            self.subs.remove(&sid);
                        }
                        PongAction::Close(tx) => self.closing = Some(tx),
                    }
                }
            }
            ServerOp::Info(info) => {
                self.info_tx.send_replace(Arc::new(*info));
            }
            ServerOp::Ok => {}
            ServerOp::Err(text) => warn!(error = %text, "server error"),
        }
    }

    fn on_msg(&mut self, m: jsproto::wire::Message) {
        let Some(sid) = std::str::from_utf8(&m.sid)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return;
        };
        let message = to_message(m);
        if sid == MUX_SID {
            let token = message
                .subject
                .strip_prefix(self.mux_prefix.as_str())
                .and_then(|t| t.strip_prefix('.'));
            if let Some(tx) = token.and_then(|t| self.requests.remove(t)) {
                let _ = tx.send(message);
            }
            return;
        }
        let Some(sub) = self.subs.get_mut(&sid) else {
            return;
        };
        sub.delivered += 1;
        let done = sub.max.is_some_and(|max| sub.delivered >= max);
        match sub.tx.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                warn!(sid, subject = %sub.subject, "slow consumer: message dropped");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.subs.remove(&sid);
                if let Some(conn) = self.conn.as_mut() {
                    wire::encode_unsub(&mut conn.wbuf, sid.to_string().as_bytes(), None);
                }
                return;
            }
        }
        if done {
            // The server unsubscribed by itself after `max` deliveries.
            self.subs.remove(&sid);
        }
    }

    fn out(&mut self) -> &mut BytesMut {
        match self.conn.as_mut() {
            Some(conn) => &mut conn.wbuf,
            None => &mut self.offline,
        }
    }

    fn handle_command(&mut self, cmd: Command) {
        match cmd {
            Command::Publish {
                subject,
                reply,
                headers,
                payload,
            } => wire::encode_pub(
                self.out(),
                subject.as_bytes(),
                reply.as_deref().map(str::as_bytes),
                headers.as_deref(),
                &payload,
            ),
            Command::Subscribe {
                sid,
                subject,
                queue,
                tx,
            } => {
                if let Some(conn) = self.conn.as_mut() {
                    wire::encode_sub(
                        &mut conn.wbuf,
                        subject.as_bytes(),
                        queue.as_deref().map(str::as_bytes),
                        sid.to_string().as_bytes(),
                    );
                }
                self.subs.insert(
                    sid,
                    Subscription {
                        subject,
                        queue,
                        tx,
                        max: None,
                        delivered: 0,
                    },
                );
            }
            Command::Unsubscribe { sid, max } => {
                let remove = match (self.subs.get_mut(&sid), max) {
                    (None, _) => return,
                    (Some(sub), Some(max)) if sub.delivered < max => {
                        sub.max = Some(max);
                        false
                    }
                    _ => true,
                };
                if remove {
                    self.subs.remove(&sid);
                }
                if let Some(conn) = self.conn.as_mut() {
                    wire::encode_unsub(&mut conn.wbuf, sid.to_string().as_bytes(), max);
                }
            }
            Command::DrainSubscription { sid } => {
                if !self.subs.contains_key(&sid) {
                    return;
                }
                if let Some(conn) = self.conn.as_mut() {
                    wire::encode_unsub(&mut conn.wbuf, sid.to_string().as_bytes(), None);
                    self.ping(vec![PongAction::RemoveSubscription(sid)]);
                } else {
                    self.subs.remove(&sid);
                }
            }
            Command::Request {
                subject,
                token,
                headers,
                payload,
                tx,
            } => {
                if !self.mux_subscribed {
                    self.mux_subscribed = true;
                    if let Some(conn) = self.conn.as_mut() {
                        let mux = format!("{}.*", self.mux_prefix);
                        wire::encode_sub(&mut conn.wbuf, mux.as_bytes(), None, b"0");
                    }
                }
                if self.requests.len() > 1024 {
                    // Forget requests whose caller gave up (timed out or dropped the future).
                    self.requests.retain(|_, tx| !tx.is_closed());
                }
                let reply = format!("{}.{token}", self.mux_prefix);
                self.requests.insert(token, tx);
                wire::encode_pub(
                    self.out(),
                    subject.as_bytes(),
                    Some(reply.as_bytes()),
                    headers.as_deref(),
                    &payload,
                );
            }
            Command::Flush { tx } => self.ping(vec![PongAction::Notify(tx)]),
            Command::Drain { tx } => {
                debug!(subscriptions = self.subs.len(), "draining");
                let sids: Vec<u64> = self.subs.keys().copied().collect();
                if self.conn.is_some() {
                    let mut actions: Vec<PongAction> = sids
                        .iter()
                        .map(|&sid| PongAction::RemoveSubscription(sid))
                        .collect();
                    for sid in &sids {
                        wire::encode_unsub(self.out(), sid.to_string().as_bytes(), None);
                    }
                    actions.push(PongAction::Close(tx));
                    self.ping(actions);
                } else {
                    self.subs.clear();
                    self.closing = Some(tx);
                }
            }
        }
    }
}

/// Converts a decoded `MSG`/`HMSG` into the user-facing message.
fn to_message(m: jsproto::wire::Message) -> Message {
    let headers = m.headers.as_ref().and_then(|h| match Headers::parse(h) {
        Ok(h) => Some(h),
        Err(e) => {
            warn!(error = %e, "ignoring an unparsable header block");
            None
        }
    });
    let length = m.payload.len() + m.headers.as_ref().map_or(0, Bytes::len);
    Message {
        subject: String::from_utf8_lossy(&m.subject).into_owned(),
        reply: m.reply.map(|r| String::from_utf8_lossy(&r).into_owned()),
        status: headers.as_ref().and_then(Headers::status),
        description: headers
            .as_ref()
            .and_then(|h| h.description().map(str::to_owned)),
        headers,
        payload: m.payload,
        length,
    }
}
