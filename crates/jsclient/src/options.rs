//! Connection options: servers, identity, credentials, timeouts and reconnect policy.

use std::time::Duration;

use crate::error::ConnectError;

/// One server address of the URL list: `nats://host:port`, `host:port` or `host` (port 4222).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddr {
    /// Host name or IP address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// `user` from `nats://user:pass@host` (used when the options give no credentials).
    pub user: Option<String>,
    /// `pass` from `nats://user:pass@host`, or the token of `nats://token@host`.
    pub pass: Option<String>,
    /// The URL's scheme is `tls://`: the connection must use TLS.
    pub tls: bool,
}

impl ServerAddr {
    /// Parses one URL: `nats://` (or no scheme), or `tls://` for a connection that must use TLS.
    ///
    /// # Errors
    ///
    /// [`ConnectError::InvalidUrl`] for another scheme, an empty host or a bad port.
    pub fn parse(url: &str) -> Result<ServerAddr, ConnectError> {
        let invalid = || ConnectError::InvalidUrl {
            url: url.to_owned(),
        };
        let rest = url.trim();
        let (tls, rest) = match rest.split_once("://") {
            Some(("nats", rest)) => (false, rest),
            Some(("tls", rest)) => (true, rest),
            Some(_) => return Err(invalid()),
            None => (false, rest),
        };
        let rest = rest.trim_end_matches('/');
        let (userinfo, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let (user, pass) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((user, pass)) => (Some(user.to_owned()), Some(pass.to_owned())),
                None => (None, Some(u.to_owned())),
            },
            None => (None, None),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') => (h, p.parse().map_err(|_| invalid())?),
            _ => (hostport, 4222),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(invalid());
        }
        Ok(ServerAddr {
            host: host.to_owned(),
            port,
            user,
            pass,
            tls,
        })
    }

    /// `host:port`, for `TcpStream::connect` and messages.
    pub fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// An nkey seed: a secret, so never shown by `Debug`.
#[derive(Clone)]
pub(crate) struct NkeySeed(pub(crate) String);

impl std::fmt::Debug for NkeySeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}

/// Options for [`ConnectOptions::connect`], built with chained setters.
///
/// ```no_run
/// # async fn f() -> Result<(), jsclient::ConnectError> {
/// use std::time::Duration;
/// let client = jsclient::ConnectOptions::new()
///     .name("worker-1")
///     .ping_interval(Duration::from_secs(30))
///     .connect("nats://127.0.0.1:4222,nats://127.0.0.1:4223")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub(crate) name: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) pass: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) nkey: Option<NkeySeed>,
    pub(crate) creds: Option<crate::creds::UserCreds>,
    pub(crate) echo: bool,
    pub(crate) connection_timeout: Duration,
    pub(crate) ping_interval: Duration,
    pub(crate) max_pings_outstanding: usize,
    pub(crate) reconnect_delay: Duration,
    pub(crate) max_reconnect_delay: Duration,
    pub(crate) max_reconnects: Option<usize>,
    pub(crate) reconnect_buffer_size: usize,
    pub(crate) retry_on_initial_connect: bool,
    pub(crate) request_timeout: Duration,
    pub(crate) subscription_capacity: usize,
    pub(crate) command_capacity: usize,
    pub(crate) inbox_prefix: String,
    pub(crate) tls: crate::tls::TlsSettings,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            name: None,
            user: None,
            pass: None,
            token: None,
            nkey: None,
            creds: None,
            echo: true,
            connection_timeout: Duration::from_secs(5),
            ping_interval: Duration::from_secs(60),
            max_pings_outstanding: 2,
            reconnect_delay: Duration::from_millis(100),
            max_reconnect_delay: Duration::from_secs(4),
            max_reconnects: None,
            reconnect_buffer_size: 8 * 1024 * 1024,
            retry_on_initial_connect: false,
            request_timeout: Duration::from_secs(10),
            subscription_capacity: 65_536,
            command_capacity: 2048,
            inbox_prefix: "_INBOX".to_owned(),
            tls: crate::tls::TlsSettings::default(),
        }
    }
}

impl ConnectOptions {
    /// The defaults (see each setter).
    pub fn new() -> Self {
        Self::default()
    }

    /// Client name sent in `CONNECT` (`name`), shown by the server's monitoring. Default none.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// User and password sent in `CONNECT` (`user`, `pass`). Default none.
    pub fn user_and_password(mut self, user: impl Into<String>, pass: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self.pass = Some(pass.into());
        self
    }

    /// Token sent in `CONNECT` (`auth_token`). Default none.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Authenticates with an nkey: `seed` is the user's seed (`SU...`); the client sends its
    /// public key in `CONNECT` (`nkey`) with its signature of the server's `INFO` nonce
    /// (`sig`). The seed is checked when connecting ([`ConnectError::InvalidNkey`]). Default
    /// none.
    pub fn nkey(mut self, seed: impl Into<String>) -> Self {
        self.nkey = Some(NkeySeed(seed.into()));
        self
    }

    /// [`ConnectOptions::nkey`] with the seed read from a file, as the `nats` CLI's `--nkey`:
    /// the first word of the file that starts with `SU` (seed files may hold comments).
    ///
    /// # Errors
    ///
    /// The file cannot be read ([`ConnectError::Io`]) or holds no user seed
    /// ([`ConnectError::InvalidNkey`]).
    pub fn nkey_from_file(self, path: impl AsRef<std::path::Path>) -> Result<Self, ConnectError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConnectError::Io {
            addr: path.display().to_string(),
            source,
        })?;
        let seed = text
            .split_ascii_whitespace()
            .find(|w| w.starts_with("SU"))
            .ok_or_else(|| {
                ConnectError::InvalidNkey(format!("no user seed in {}", path.display()))
            })?;
        Ok(self.nkey(seed))
    }

    /// Authenticates with a user JWT and its nkey seed, read from a credentials file as `nsc`
    /// writes it (`-----BEGIN NATS USER JWT-----` … `------END NATS USER JWT------`, then
    /// `-----BEGIN USER NKEY SEED-----` … `------END USER NKEY SEED------`), as the `nats`
    /// CLI's `--creds`: the client sends the JWT in `CONNECT` (`jwt`) with its signature of
    /// the server's `INFO` nonce (`sig`, unpadded URL-safe base64). The file is read, and the
    /// seed checked, now; a server in operator mode (nats-server with `operator`) checks the
    /// JWT. Not with [`ConnectOptions::nkey`]: `connect` refuses both. Default none.
    ///
    /// # Errors
    ///
    /// [`ConnectError::Credentials`], naming the file, when it cannot be read, holds no user
    /// JWT or no seed, or its seed is not a valid user seed (`SU...`). The seed never shows
    /// in the error, nor in `Debug` output.
    pub fn credentials_file(
        mut self,
        path: impl AsRef<std::path::Path>,
    ) -> Result<Self, ConnectError> {
        let path = path.as_ref();
        let failed = |reason: String| ConnectError::Credentials {
            file: path.display().to_string(),
            reason,
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| failed(format!("cannot read it: {e}")))?;
        self.creds = Some(crate::creds::parse(&text).map_err(failed)?);
        Ok(self)
    }

    /// Uses TLS even if the server's `INFO` does not ask for it (failing with
    /// [`ConnectError::Tls`] if the server does not offer it). A `tls://` URL, a root
    /// certificate or a client certificate implies it; a server that requires TLS gets it
    /// anyway. Default false.
    pub fn require_tls(mut self, required: bool) -> Self {
        self.tls.required = required;
        self
    }

    /// Starts the TLS handshake as soon as the TCP connection is open, before the server's
    /// `INFO` (for a server with `tls { handshake_first: true }`). Default false.
    pub fn tls_first(mut self) -> Self {
        self.tls.first = true;
        self
    }

    /// Trusts the certificate authorities of this PEM file for the server's certificate
    /// (instead of the system's); may be given more than once. Read when connecting.
    pub fn add_root_certificates(mut self, pem_file: impl Into<std::path::PathBuf>) -> Self {
        self.tls.roots.push(pem_file.into());
        self
    }

    /// Presents this client certificate (PEM chain) with its private key (PEM) when the
    /// server asks for one (`tls { verify: true }`). Read when connecting.
    pub fn add_client_certificate(
        mut self,
        cert_file: impl Into<std::path::PathBuf>,
        key_file: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.client = Some((cert_file.into(), key_file.into()));
        self
    }

    /// Whether the server delivers this connection's own publishes to its own subscriptions
    /// (`echo`). Default true.
    pub fn echo(mut self, echo: bool) -> Self {
        self.echo = echo;
        self
    }

    /// How long one connection attempt may take: TCP connect plus `INFO` … `PONG`. Default 5 s.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Interval between the client's keepalive `PING`s. Default 60 s.
    pub fn ping_interval(mut self, interval: Duration) -> Self {
        self.ping_interval = interval;
        self
    }

    /// Unanswered keepalive `PING`s after which the connection is declared stale and a reconnect
    /// starts. Default 2.
    pub fn max_pings_outstanding(mut self, max: usize) -> Self {
        self.max_pings_outstanding = max.max(1);
        self
    }

    /// First delay between reconnect rounds (one round tries every server once); it doubles per
    /// failed round up to [`ConnectOptions::max_reconnect_delay`], plus up to 10 % jitter.
    /// Default 100 ms.
    pub fn reconnect_delay(mut self, delay: Duration) -> Self {
        self.reconnect_delay = delay;
        self
    }

    /// Upper bound of the reconnect back-off. Default 4 s.
    pub fn max_reconnect_delay(mut self, delay: Duration) -> Self {
        self.max_reconnect_delay = delay;
        self
    }

    /// Failed reconnect rounds after which the client gives up and closes; `None` (the default)
    /// retries forever.
    pub fn max_reconnects(mut self, max: Option<usize>) -> Self {
        self.max_reconnects = max;
        self
    }

    /// Bytes of publishes kept while disconnected and sent after the reconnect. When full, the
    /// client stops taking commands, so publishers wait (back-pressure) until it reconnects.
    /// Default 8 MiB.
    pub fn reconnect_buffer_size(mut self, bytes: usize) -> Self {
        self.reconnect_buffer_size = bytes;
        self
    }

    /// If true, [`ConnectOptions::connect`] returns at once even when no server is reachable,
    /// and the client keeps trying in the background. Default false (the first failure of a
    /// whole round is returned).
    pub fn retry_on_initial_connect(mut self, retry: bool) -> Self {
        self.retry_on_initial_connect = retry;
        self
    }

    /// Timeout of [`Client::request`](crate::Client::request). Default 10 s.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Messages buffered per subscription before new ones are dropped (slow consumer, logged at
    /// `warn`). Default 65 536.
    pub fn subscription_capacity(mut self, capacity: usize) -> Self {
        self.subscription_capacity = capacity.max(1);
        self
    }

    /// Prefix of inbox subjects (`<prefix>.<random>`). Default `_INBOX`.
    pub fn inbox_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.inbox_prefix = prefix.into();
        self
    }

    /// Connects to the comma-separated server list `urls` (tried in order, then round robin on
    /// reconnect) and returns the client once the handshake (`INFO` → `CONNECT`+`PING` → `PONG`)
    /// succeeded with one of them.
    ///
    /// # Errors
    ///
    /// The last server's [`ConnectError`] when every server failed once (unless
    /// [`ConnectOptions::retry_on_initial_connect`]), or a URL parse error.
    pub async fn connect(self, urls: impl AsRef<str>) -> Result<crate::Client, ConnectError> {
        if self.creds.is_some() && self.nkey.is_some() {
            return Err(ConnectError::InvalidNkey(
                "an nkey and a credentials file both given: use one".into(),
            ));
        }
        let servers = urls
            .as_ref()
            .split(',')
            .filter(|u| !u.trim().is_empty())
            .map(ServerAddr::parse)
            .collect::<Result<Vec<_>, _>>()?;
        crate::connection::connect(self, servers, crate::connection::tcp_connector()).await
    }
}
