//! TLS for client connections, as nats-server's (`server/opts.go` `parseTLS` and
//! `GenTLSConfig`, `server/server.go` `createClient`): rustls with the ring provider.
//!
//! - [`config`]: the `tls { }` block and the `--tls*` flags, as [`TlsOptions`].
//! - [`identity`]: what a client certificate names (emails, DNS names, URIs, subject), for
//!   `verify_and_map`.
//! - this module: [`TlsOptions::build`], which loads the PEM files into a rustls server
//!   configuration, with nats-server's error texts.
//!
//! The handshake itself and the bridge that carries a TLS client's bytes to the connection
//! code are in `connection::tls`.

pub mod config;
pub mod identity;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;

/// nats-server's `TLS_TIMEOUT`: how long a client has to complete the handshake, 2 s.
pub const DEFAULT_TLS_TIMEOUT: Duration = Duration::from_secs(2);

/// TLS settings of the client listener (`tls { }` or the `--tls*` flags).
#[derive(Clone)]
pub struct TlsOptions {
    /// PEM certificate chain the server presents (`cert_file`, `--tlscert`).
    pub cert_file: String,
    /// PEM private key of that certificate (`key_file`, `--tlskey`): PKCS#8, PKCS#1 (RSA) or
    /// SEC1 (EC).
    pub key_file: String,
    /// PEM certificates of the authorities client certificates must chain to (`ca_file`,
    /// `--tlscacert`); without it, `verify` uses the system's roots, as Go's TLS does.
    pub ca_file: Option<String>,
    /// Clients must present a certificate that verifies (`verify`, `verify_and_map`,
    /// `--tlsverify`); INFO then says `tls_verify`.
    pub verify: bool,
    /// The client certificate names the user of the `authorization` block
    /// (`verify_and_map`; see [`identity`]).
    pub map: bool,
    /// Handshake time limit (`timeout`, seconds or a duration). Default
    /// [`DEFAULT_TLS_TIMEOUT`]. It also makes the default auth timeout one second longer
    /// than this, as nats-server's.
    pub timeout: Duration,
    /// The server starts the handshake before it sends INFO (`handshake_first`, also `first`
    /// or `immediate`); clients must be configured for it.
    pub handshake_first: bool,
    /// Also accept plain-text clients (top-level `allow_non_tls`): INFO then says
    /// `tls_available` instead of `tls_required`, and the first byte a client sends tells
    /// which it speaks. `handshake_first` overrides it.
    pub allow_non_tls: bool,
    /// The rustls configuration, loaded by [`TlsOptions::build`] (`None` before).
    pub(crate) server_config: Option<Arc<rustls::ServerConfig>>,
    /// The same certificate without client certificates, for HTTPS monitoring
    /// (`https_port`), as nats-server's.
    pub(crate) monitor_config: Option<Arc<rustls::ServerConfig>>,
    /// For routes (`cluster { tls }`): the dialing side's configuration, presenting the
    /// same certificate and checking the peer's against `ca_file` and the route URL's host
    /// ([`TlsOptions::build_route`]).
    pub(crate) client_config: Option<Arc<rustls::ClientConfig>>,
    /// A hash of the certificate, key and CA files' bytes as [`TlsOptions::build`] read
    /// them: a reload that re-reads changed files at the same paths serves them, and says so
    /// ([`TlsOptions::serves_same`]).
    pub(crate) files_hash: Option<u64>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            cert_file: String::new(),
            key_file: String::new(),
            ca_file: None,
            verify: false,
            map: false,
            timeout: DEFAULT_TLS_TIMEOUT,
            handshake_first: false,
            allow_non_tls: false,
            server_config: None,
            monitor_config: None,
            client_config: None,
            files_hash: None,
        }
    }
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field("ca_file", &self.ca_file)
            .field("verify", &self.verify)
            .field("map", &self.map)
            .field("timeout", &self.timeout)
            .field("handshake_first", &self.handshake_first)
            .field("allow_non_tls", &self.allow_non_tls)
            .field("loaded", &self.server_config.is_some())
            .finish()
    }
}

impl PartialEq for TlsOptions {
    /// The settings; whether the files are loaded yet does not count.
    fn eq(&self, other: &Self) -> bool {
        self.cert_file == other.cert_file
            && self.key_file == other.key_file
            && self.ca_file == other.ca_file
            && self.verify == other.verify
            && self.map == other.map
            && self.timeout == other.timeout
            && self.handshake_first == other.handshake_first
            && self.allow_non_tls == other.allow_non_tls
    }
}

impl Eq for TlsOptions {}

impl TlsOptions {
    /// Whether a client would meet the same server: the same certificate, key and CA files
    /// with the same contents, and the same `verify`. What a reload compares to decide
    /// whether the TLS configuration changed (nats-server's `Reloaded: tls = enabled`); the
    /// handshake `timeout`, `handshake_first`, `verify_and_map` and `allow_non_tls` are
    /// compared on their own.
    pub fn serves_same(&self, other: &TlsOptions) -> bool {
        self.cert_file == other.cert_file
            && self.key_file == other.key_file
            && self.ca_file == other.ca_file
            && self.verify == other.verify
            && self.files_hash == other.files_hash
    }

    /// Whether plain-text clients are accepted too (`allow_non_tls` without
    /// `handshake_first`).
    pub fn plain_allowed(&self) -> bool {
        self.allow_non_tls && !self.handshake_first
    }

    /// The rustls configuration (after [`TlsOptions::build`]).
    pub(crate) fn server_config(&self) -> Option<&Arc<rustls::ServerConfig>> {
        self.server_config.as_ref()
    }

    /// The configuration for HTTPS monitoring (after [`TlsOptions::build`]): the same
    /// certificate, no client certificates asked for.
    pub fn monitor_config(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.monitor_config.clone()
    }

    /// Loads the certificate, key and CA files into the rustls configuration: TLS 1.2 and
    /// 1.3 (nats-server's minimum is 1.2), and with `verify` a client certificate chaining
    /// to `ca_file` required.
    ///
    /// # Errors
    /// nats-server's texts where it has them: `missing 'key_file' in TLS configuration`,
    /// `error parsing X509 certificate/key pair: ...`, `failed to parse root ca
    /// certificate`; the file's name with the reason for a file that cannot be read.
    pub fn build(&mut self) -> Result<(), String> {
        match (self.cert_file.is_empty(), self.key_file.is_empty()) {
            (false, true) => return Err("missing 'key_file' in TLS configuration".into()),
            (true, false) => return Err("missing 'cert_file' in TLS configuration".into()),
            // nats-server would start and fail every handshake; refuse instead.
            (true, true) => return Err("missing 'cert_file' in TLS configuration".into()),
            (false, false) => {}
        }
        let pair_err = |e: String| format!("error parsing X509 certificate/key pair: {e}");
        let certs = read_certs(&self.cert_file).map_err(pair_err)?;
        if certs.is_empty() {
            return Err(pair_err(format!(
                "{}: no certificate PEM data found",
                self.cert_file
            )));
        }
        let key = read_file(&self.key_file).and_then(|pem| {
            PrivateKeyDer::from_pem_slice(&pem)
                .map_err(|e| format!("{}: no private key PEM data found ({e})", self.key_file))
        });
        let key = key.map_err(pair_err)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: &[&rustls::SupportedProtocolVersion] =
            &[&rustls::version::TLS13, &rustls::version::TLS12];
        let monitor = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| pair_err(e.to_string()))?;
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .map_err(|e| e.to_string())?;
        let builder = if self.verify {
            let roots = match &self.ca_file {
                Some(ca) => ca_roots(ca)?,
                None => system_roots(),
            };
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("client certificate verification: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        } else {
            if let Some(ca) = &self.ca_file {
                // Checked as nats-server checks it, though nothing is verified against it.
                ca_roots(ca)?;
            }
            builder.with_no_client_auth()
        };
        let config = builder
            .with_single_cert(certs, key)
            .map_err(|e| pair_err(e.to_string()))?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for path in [
            Some(&self.cert_file),
            Some(&self.key_file),
            self.ca_file.as_ref(),
        ] {
            // The files were just read whole; one that vanished since hashes as empty.
            let bytes = path.map(|p| std::fs::read(p).unwrap_or_default());
            std::hash::Hash::hash(&bytes, &mut hasher);
        }
        self.files_hash = Some(std::hash::Hasher::finish(&hasher));
        self.server_config = Some(Arc::new(config));
        self.monitor_config = Some(Arc::new(monitor));
        Ok(())
    }
}

impl TlsOptions {
    /// [`TlsOptions::build`] for routes (`cluster { tls }`), plus the dialing side: the same
    /// certificate presented as a client certificate (a route certificate serves both ends,
    /// as nats-server's), and the accepting server's checked against `ca_file` (the system's
    /// roots without it) for the host of the route URL dialed.
    ///
    /// # Errors
    /// As [`TlsOptions::build`].
    pub fn build_route(&mut self) -> Result<(), String> {
        self.build()?;
        let certs = read_certs(&self.cert_file)?;
        let key = read_file(&self.key_file).and_then(|pem| {
            PrivateKeyDer::from_pem_slice(&pem).map_err(|e| format!("{}: {e}", self.key_file))
        })?;
        let roots = match &self.ca_file {
            Some(ca) => ca_roots(ca)?,
            None => system_roots(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("error parsing X509 certificate/key pair: {e}"))?;
        self.client_config = Some(Arc::new(config));
        Ok(())
    }

    /// The dialing side's configuration (after [`TlsOptions::build_route`]).
    pub(crate) fn client_config(&self) -> Option<&Arc<rustls::ClientConfig>> {
        self.client_config.as_ref()
    }
}

/// The file's bytes; the error as nats-server words it (`open PATH: no such file or
/// directory`).
fn read_file(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(Path::new(path))
        .map_err(|e| format!("open {path}: {}", crate::os_error::go_error(&e)))
}

/// Every certificate in a PEM file.
fn read_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_file(path)?;
    CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{path}: {e}"))
}

/// The authorities of `ca_file`.
fn ca_roots(path: &str) -> Result<RootCertStore, String> {
    let certs = read_certs(path).map_err(|_| "failed to parse root ca certificate".to_string())?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err("failed to parse root ca certificate".into());
    }
    Ok(roots)
}

/// The system's authorities (for `verify` without `ca_file`); those that do not load are
/// skipped, as Go's system pool skips them.
fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_names_what_is_missing_as_nats_server() {
        let mut t = TlsOptions {
            cert_file: "a.pem".into(),
            ..TlsOptions::default()
        };
        assert_eq!(
            t.build().unwrap_err(),
            "missing 'key_file' in TLS configuration"
        );
        t.cert_file.clear();
        t.key_file = "a.key".into();
        assert_eq!(
            t.build().unwrap_err(),
            "missing 'cert_file' in TLS configuration"
        );
        t.cert_file = "/nonexistent/cert.pem".into();
        let err = t.build().unwrap_err();
        assert!(
            err.starts_with("error parsing X509 certificate/key pair: open /nonexistent/cert.pem:"),
            "{err}"
        );
    }
}
