//! A connection's reader task: decodes the client's ops and applies them, and runs the
//! PING/PONG keepalive.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use jsproto::subject::{is_routable_subject, is_valid_publish_subject, is_valid_subject};
use jsproto::wire::{encode_err, ClientOp, Connect, Publish, ServerCodec};
use tokio::time::Instant;
use tokio_util::codec::Decoder;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, trace};

use super::idle_spin::IdleSpin;
use super::outbound::CloseReason;
use super::read_buffer::ReadBuffer;
use super::transport::ReadHalf;
use super::{unix_nanos, Connection};
use crate::account::Account;
use crate::auth::perms::{ClientPerms, Replies};
use crate::auth::{self, ConnectionType, Failure, Identity};
use crate::router::{DeliveryPerms, RouteScratch, RoutedMsg, SubscribeOutcome};
use crate::server::Server;
use crate::tls::identity::CertNames;

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

/// The reading side of one connection and the per-connection protocol state.
pub(super) struct Reader {
    server: Arc<Server>,
    conn: Arc<Connection>,
    /// The account the client works in: whose router its subscriptions and messages use.
    account: Arc<Account>,
    /// The connection's [`Connection::perms_generation`] when `perms` were last taken.
    perms_generation: u64,
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
    /// The nonce the INFO carried (empty without nkeys): what an nkey user signs.
    nonce: String,
    /// Authentication is required and no CONNECT came yet: the first op must be CONNECT,
    /// within the auth timeout.
    awaiting_connect: bool,
    /// The authenticated user's permissions; `None`: everything is allowed (and nothing is
    /// checked).
    perms: Option<Arc<ClientPerms>>,
    /// With `allow_responses`: the reply subjects this connection may publish to.
    replies: Option<Arc<Replies>>,
    /// `user:NAME`, `nkey:KEY` or `token`, for log lines, once authenticated.
    user_label: String,
    /// With `verify_and_map`: the names of the client's (verified) certificate, which pick its
    /// user.
    cert: Option<Arc<CertNames>>,
}

/// What applying one op asks the reader loop to do.
enum Flow {
    Continue,
    Close(CloseReason),
}

impl Reader {
    /// A reader for `conn`, before its client's CONNECT.
    pub(super) fn new(
        server: Arc<Server>,
        conn: Arc<Connection>,
        nonce: Option<String>,
        cert: Option<Arc<CertNames>>,
    ) -> Self {
        let awaiting_connect = server.auth().required();
        Self {
            account: conn.account(),
            perms_generation: 0,
            server,
            conn,
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
            nonce: nonce.unwrap_or_default(),
            awaiting_connect,
            perms: None,
            replies: None,
            user_label: String::new(),
            cert,
        }
    }

    /// Reads and applies the client's ops until the connection is to close (end of stream,
    /// protocol error, stale connection, `done` or the server's shutdown): returns why.
    pub(super) async fn run(
        &mut self,
        mut read_half: ReadHalf,
        done: &CancellationToken,
    ) -> CloseReason {
        let mut generation = self.server.options_generation();
        let opts = self.server.options();
        let mut codec = ServerCodec::new(codec_limits(&opts));
        let mut buf = ReadBuffer::default();
        let mut ping_interval = opts.ping_interval.max(Duration::from_millis(10));
        drop(opts);
        let mut next_ping = Instant::now() + FIRST_PING.min(ping_interval);
        let shutdown = self.server.shutdown_token();
        // Made once and polled on every wait: a fresh sleep and two fresh cancellation waits
        // per wait registered a timer and two waiters each time (1.3k instructions per
        // wake-up in callgrind).
        let done_wait = done.cancelled();
        let shutdown_wait = shutdown.cancelled();
        let ping_timer = tokio::time::sleep_until(next_ping);
        // Only polled while authentication waits for the CONNECT.
        let auth_timer = tokio::time::sleep(self.server.auth().timeout());
        tokio::pin!(done_wait, shutdown_wait, ping_timer, auth_timer);
        let mut since_check = 0u32;
        let mut spin = IdleSpin::new();
        let mut ops_since_wait = 0u32;
        loop {
            // A reload put new options in force: take its limits and PING interval (as
            // nats-server's reload updates every client's `mpay`, `mcl` and ping timer).
            let now_generation = self.server.options_generation();
            if now_generation != generation {
                generation = now_generation;
                let opts = self.server.options();
                codec.set_limits(codec_limits(&opts));
                let interval = opts.ping_interval.max(Duration::from_millis(10));
                if interval != ping_interval {
                    ping_interval = interval;
                    next_ping = Instant::now() + ping_interval;
                    ping_timer.as_mut().reset(next_ping);
                }
            }
            // Apply every complete op in the buffer.
            let mut applied = false;
            loop {
                if self.awaiting_connect {
                    // As nats-server's parser: with authentication required, an op that does
                    // not start with `C` before the CONNECT is a violation (garbage too), unless
                    // a no_auth_user takes the client.
                    if let Some(&first) = buf.bytes.first() {
                        if first != b'C' && first != b'c' {
                            if let Flow::Close(reason) = self.before_connect() {
                                return reason;
                            }
                        }
                    }
                }
                match codec.decode(&mut buf.bytes) {
                    Ok(Some(op)) => {
                        applied = true;
                        ops_since_wait = ops_since_wait.saturating_add(1);
                        let flow = match op {
                            ClientOp::Connect(connect) => {
                                self.trace_op(|| describe_connect(&connect));
                                self.on_connect(*connect).await
                            }
                            op => self.apply(op),
                        };
                        if let Flow::Close(reason) = flow {
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
                () = &mut auth_timer, if self.awaiting_connect => {
                    debug!(cid = self.conn.handle.id, "authentication timeout");
                    self.send_err("Authentication Timeout");
                    return CloseReason::ProtocolError;
                }
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

    /// Wakes the writers of the connections this client's last ops delivered to.
    pub(super) fn flush_wakes(&mut self) {
        self.scratch.flush_wakes();
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

    /// `-V`: an op received, in nats-server's `<<- [OP args]` form.
    fn trace_op(&self, describe: impl FnOnce() -> String) {
        if tracing::enabled!(tracing::Level::TRACE) {
            trace!(
                "{} - cid:{} - <<- [{}]",
                self.conn.peer,
                self.conn.handle.id,
                describe()
            );
        }
    }

    fn apply(&mut self, op: ClientOp) -> Flow {
        self.trace_op(|| describe(&op));
        match op {
            ClientOp::Pub(publish) => return self.on_pub(publish),
            ClientOp::Ping => {
                self.push(b"PONG\r\n");
                if self.connected && self.connect.protocol.is_some_and(|p| p >= 1) {
                    self.conn
                        .async_info
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
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
                self.account
                    .router()
                    .unsubscribe(&self.conn.handle, &sid, max_msgs);
                self.ok();
            }
            // Taken by the read loop (it may wait for a bcrypt check).
            ClientOp::Connect(_) => unreachable!("CONNECT is applied by on_connect"),
        }
        Flow::Continue
    }

    /// The first op is not a CONNECT while authentication is required: the `no_auth_user`
    /// takes the client if it can, else it is an authorization violation.
    fn before_connect(&mut self) -> Flow {
        self.awaiting_connect = false;
        match self.server.auth().before_connect(self.conn.kind) {
            Some(identity) => {
                // As nats-server: this counts as the CONNECT (a later one drops subscriptions).
                self.connected = true;
                if !self.set_identity(identity) || !self.logged_in() {
                    return self.account_full();
                }
                Flow::Continue
            }
            None => {
                self.auth_violation(None, Failure("no CONNECT first"));
                Flow::Close(CloseReason::ProtocolError)
            }
        }
    }

    /// Decides the (merged) CONNECT's credentials; a bcrypt check runs off this task.
    async fn authenticate(&self, connect: &Connect) -> Result<Identity, Failure> {
        let auth = self.server.auth();
        let kind = self.conn.kind;
        // verify_and_map is the client port's (the WebSocket listener refuses it).
        if kind == ConnectionType::Standard
            && self.server.options().tls.as_ref().is_some_and(|t| t.map)
            && auth.maps_certs(connect)
        {
            return auth.authenticate_cert(self.cert.as_deref(), kind);
        }
        if !auth.may_be_slow(connect) {
            return auth.authenticate(connect, &self.nonce, kind);
        }
        let _slot = auth.slow_checks().acquire().await;
        let (c, nonce, a) = (connect.clone(), self.nonce.clone(), Arc::clone(&auth));
        tokio::task::spawn_blocking(move || a.authenticate(&c, &nonce, kind))
            .await
            .unwrap_or(Err(Failure("authentication task failed")))
    }

    /// Takes on who the client authenticated as; false when that moves an already logged-in
    /// client into an account with no room for it.
    fn set_identity(&mut self, identity: Identity) -> bool {
        if *self.account.name() != identity.account {
            // Subscriptions of the old account are gone already (a repeated CONNECT drops
            // them), so nothing of the client stays in the old subject space.
            // Users come from the same config as the accounts: every one's account exists.
            let account = self
                .server
                .accounts()
                .get(&identity.account)
                .expect("a user's account is configured");
            if self.conn.is_logged_in() {
                if !account.add_connection() {
                    return false;
                }
                self.account.remove_connection();
            }
            self.account = Arc::clone(account);
            self.conn.set_account(Arc::clone(account));
        }
        self.replies = identity.perms.as_ref().and_then(Replies::for_perms);
        self.perms = identity.perms;
        let shown = match identity.label.split_once(':') {
            Some(("user" | "nkey", who)) => who.to_owned(),
            _ if identity.label == "token" => "[REDACTED]".to_owned(),
            _ => String::new(),
        };
        self.conn
            .info
            .lock()
            .expect("info lock poisoned")
            .authorized_user = shown;
        self.user_label = identity.label;
        true
    }

    /// Logs a refused login (without its secret, within the log budget) and sends
    /// `-ERR 'Authorization Violation'`; the caller closes the connection.
    fn auth_violation(&self, connect: Option<&Connect>, why: Failure) {
        let auth = self.server.auth();
        if let Some(suppressed) = auth.may_log() {
            if suppressed > 0 {
                error!("{suppressed} more authentication failures or permission violations were not logged");
            }
            let (peer, cid) = (self.conn.peer, self.conn.handle.id);
            match connect.and_then(auth::describe_credentials) {
                Some(who) => error!("{peer} - cid:{cid} - authentication error - {who}"),
                None => error!("{peer} - cid:{cid} - authentication error"),
            }
            debug!(cid, reason = why.0, "authentication failed");
        }
        self.send_err("Authorization Violation");
    }

    /// An account limit reached: logged and answered as a permission violation (nats-server's
    /// `"<account>/<user>" - <log>` line, within the same log budget) with `-ERR '<err>'`.
    fn limit_violation(&self, err: &str, log: &str) {
        self.permission_violation(err, log);
    }

    /// Logs a permission violation (within the log budget) and sends its `-ERR`; the
    /// connection stays open.
    fn permission_violation(&self, err: &str, log: &str) {
        if let Some(suppressed) = self.server.auth().may_log() {
            if suppressed > 0 {
                error!("{suppressed} more authentication failures or permission violations were not logged");
            }
            error!(
                "{} - cid:{} - \"{}/{}\" - {log}",
                self.conn.peer,
                self.conn.handle.id,
                self.account.name(),
                self.user_label
            );
        }
        self.send_err(err);
    }

    async fn on_connect(&mut self, later: Connect) -> Flow {
        // As nats-server: every CONNECT is applied over the options the connection has, and a
        // repeated CONNECT drops the connection's subscriptions (it may authenticate as someone
        // else; nats-server 2.15.1 clears them whatever the credentials).
        if self.connected {
            self.account.router().remove_connection(&self.conn.handle);
        }
        self.connect.merge(later);
        let connect = self.connect.clone();
        self.conn.set_login(&connect);
        if self.server.auth().required() {
            // Any CONNECT stops the auth timer, as nats-server's; each one is decided anew.
            self.awaiting_connect = false;
            match self.authenticate(&connect).await {
                Ok(identity) => {
                    if !self.set_identity(identity) {
                        return self.account_full();
                    }
                }
                Err(why) => {
                    self.auth_violation(Some(&connect), why);
                    return Flow::Close(CloseReason::ProtocolError);
                }
            }
        }
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
        if !self.logged_in() {
            return self.account_full();
        }
        self.ok();
        Flow::Continue
    }

    /// The client is in (once): it counts in its account's connections, and the system
    /// account hears of it. False when the account has no room for it.
    fn logged_in(&self) -> bool {
        if !self.conn.log_in() {
            return true;
        }
        if !self.account.add_connection() {
            self.conn.log_out();
            return false;
        }
        if let Some(system) = self.server.system() {
            system.client_connected(&self.server, &self.conn);
        }
        true
    }

    /// The account's `max_connections` is reached: nats-server's error, then the close.
    fn account_full(&self) -> Flow {
        let text = "maximum account active connections exceeded";
        error!("{} - cid:{} - {text}", self.conn.peer, self.conn.handle.id);
        self.send_err(text);
        Flow::Close(CloseReason::ProtocolError)
    }

    /// Takes the permissions a config reload gave the client, if one did since last time.
    fn sync_perms(&mut self) {
        let g = self.conn.perms_generation();
        if g != self.perms_generation {
            self.perms_generation = g;
            (self.perms, self.replies) = self.conn.reloaded_perms();
        }
    }

    fn on_sub(&mut self, subject: Bytes, queue_group: Option<Bytes>, sid: Bytes) -> Flow {
        self.sync_perms();
        // Permissions first, as nats-server (also for the reserved `_sys_` group).
        let queue = queue_group.as_deref();
        let denied = queue == Some(b"_sys_".as_slice())
            || self
                .perms
                .as_ref()
                .is_some_and(|p| !p.subscribe_allowed(&subject, queue));
        if denied {
            let text = String::from_utf8_lossy(&subject);
            let sid = String::from_utf8_lossy(&sid);
            let (err, log) = match queue {
                Some(q) => {
                    let q = String::from_utf8_lossy(q);
                    (
                        format!(
                            "Permissions Violation for Subscription to {text:?} using queue {q:?}"
                        ),
                        format!(
                            "Subscription Violation - Subject {text:?}, Queue: {q:?}, SID {sid}"
                        ),
                    )
                }
                None => (
                    format!("Permissions Violation for Subscription to {text:?}"),
                    format!("Subscription Violation - Subject {text:?}, SID {sid}"),
                ),
            };
            self.permission_violation(&err, &log);
            return Flow::Continue;
        }
        let opts = self.server.options();
        let max_tokens = usize::from(opts.max_sub_tokens);
        if max_tokens > 0 && subject.split(|&b| b == b'.').count() > max_tokens {
            // nats-server's texts (maxTokensViolation); the connection stays.
            let text = String::from_utf8_lossy(&subject);
            self.permission_violation(
                &format!("Permissions Violation for Subscription to {text:?}, too many tokens"),
                &format!(
                    "Subscription Violation Too Many Tokens - Subject {text:?}, SID {}",
                    String::from_utf8_lossy(&sid)
                ),
            );
            return Flow::Continue;
        }
        let delivery =
            DeliveryPerms::for_sub(self.perms.as_ref(), self.replies.as_ref(), &subject, queue);
        // The lower of the account's and the server's limit, as nats-server's
        // applyAccountLimits (0 or less: none).
        let max_subs = [
            self.account.limits().subscriptions(),
            (opts.max_subscriptions > 0).then_some(opts.max_subscriptions),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(max) = max_subs {
            // At the limit even a SUB that repeats a sid is refused, as by nats-server.
            if self.conn.handle.num_subs() >= max {
                self.limit_violation(
                    "maximum subscriptions exceeded",
                    "maximum subscriptions exceeded",
                );
                return Flow::Continue;
            }
        }
        let queue_ok = queue_group.as_ref().is_none_or(|q| is_valid_queue_name(q));
        if !is_valid_subject(&subject) || !queue_ok {
            self.send_err("Invalid Subject");
            return Flow::Continue;
        }
        match self.account.router().subscribe_with_perms(
            &self.conn.handle,
            subject,
            queue_group,
            sid,
            delivery,
        ) {
            Ok(SubscribeOutcome::Added | SubscribeOutcome::DuplicateSid) => self.ok(),
            Err(_) => self.send_err("Invalid Subject"),
        }
        Flow::Continue
    }

    fn on_pub(&mut self, publish: Publish) -> Flow {
        self.sync_perms();
        let handle = Arc::clone(&self.conn.handle);
        if publish.headers.is_some() && !handle.headers() {
            // HPUB without CONNECT `headers:true`: nats-server closes with no -ERR.
            return Flow::Close(CloseReason::ProtocolError);
        }
        // As nats-server: the subject is only checked for a pedantic connection, and the
        // message goes on after the -ERR.
        if self.pedantic && !is_valid_publish_subject(&publish.subject) {
            self.send_err("Invalid Publish Subject");
        }
        if let Some(max) = self.account.limits().payload() {
            let size = publish.headers.as_ref().map_or(0, |h| h.len()) + publish.payload.len();
            if size > max {
                self.limit_violation(
                    "Maximum Payload Violation",
                    &format!("maximum payload exceeded: {size} vs {max}"),
                );
                return Flow::Close(CloseReason::ProtocolError);
            }
        }
        if let Some(perms) = &self.perms {
            if perms.restricts_publish()
                && !perms.publish_allowed(&publish.subject)
                && !self
                    .replies
                    .as_ref()
                    .is_some_and(|r| r.allow(&publish.subject))
            {
                let text = String::from_utf8_lossy(&publish.subject);
                self.permission_violation(
                    &format!("Permissions Violation for Publish to {text:?}"),
                    &format!("Publish Violation - Subject {text:?}"),
                );
                return Flow::Continue;
            }
        }
        if let Some(reply) = publish.reply.as_ref().filter(|r| is_reserved_reply(r)) {
            let text = String::from_utf8_lossy(reply);
            self.permission_violation(
                &format!("Permissions Violation for Publish with Reply of {text:?}"),
                &format!("Publish Violation - Reply {text:?}"),
            );
            return Flow::Continue;
        }
        let msg = RoutedMsg {
            subject: &publish.subject,
            reply: publish.reply.as_ref(),
            headers: publish.headers.as_ref(),
            payload: &publish.payload,
            hops: 0,
            remote: None,
        };
        // nats-server acknowledges a verbose PUB before it routes the message.
        self.ok();
        handle.counters.count_in(msg.size());
        let router = self.account.router();
        router.counters.count_in(msg.size());
        // Wildcard tokens anywhere are routed as literal tokens (`a.>.b` reaches `a.>` and
        // `a.*.b`); a subject with an empty token reaches no one, so a requester gets
        // no-responders, as from nats-server.
        let interest = is_routable_subject(&publish.subject)
            && router.route(Some(&handle), msg, &mut self.scratch);
        if !interest && self.no_responders {
            if let Some(reply) = &publish.reply {
                self.no_responders_reply(&publish.subject, reply);
            }
        }
        Flow::Continue
    }

    /// The `503` status nats-server sends to a requester whose subject nobody subscribes to.
    fn no_responders_reply(&mut self, subject: &Bytes, reply: &Bytes) {
        let headers = jsproto::headers::no_responders(subject);
        let msg = RoutedMsg {
            subject: reply,
            reply: None,
            headers: Some(&headers),
            payload: &Bytes::new(),
            hops: 0,
            remote: None,
        };
        let mut scratch = RouteScratch::default();
        self.account.router().route(None, msg, &mut scratch);
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
        self.conn.set_last_err(text);
        self.conn.handle.outbound.push(|buf| encode_err(buf, text));
    }
}

/// CONNECT for trace logs, its password and token replaced by `[REDACTED]` (as nats-server).
fn describe_connect(c: &Connect) -> String {
    format!(
        "CONNECT {}",
        serde_json::to_string(&auth::redacted(c)).unwrap_or_default()
    )
}

/// A one-line rendering of a client op for trace logs (payloads are not shown).
fn describe(op: &ClientOp) -> String {
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    match op {
        ClientOp::Connect(c) => describe_connect(c),
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

/// What the codec refuses under `opts`: `max_control_line` and `max_payload`.
fn codec_limits(opts: &crate::options::ServerOptions) -> jsproto::wire::Limits {
    jsproto::wire::Limits {
        max_control_line: opts.max_control_line,
        max_payload: opts.max_payload,
    }
}

/// Reply subjects only the server gives out, refused on a client's publish as nats-server
/// refuses them (`isReservedReply`): a service import's response subjects (`_R_.`, so no
/// client can point one request's responses at another import's), JetStream acks
/// (`$JS.ACK.`) and gateway replies (`_GR_.`).
fn is_reserved_reply(reply: &[u8]) -> bool {
    // `$JS.ACK.` and `_GR_.` only with something after them, as nats-server checks them.
    reply.starts_with(b"_R_.")
        || (reply.len() > 8 && reply.starts_with(b"$JS.ACK."))
        || (reply.len() > 5 && reply.starts_with(b"_GR_."))
}
