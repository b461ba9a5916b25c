//! TLS for the client (rustls, ring provider), as the NATS clients do it: the server's `INFO`
//! comes in plain text and says `tls_required`; the client then starts the handshake on the
//! same socket, and sends `CONNECT` over TLS. With [`ConnectOptions::tls_first`] the client
//! starts the handshake at once (for servers with `tls { handshake_first: true }`).
//!
//! The server's certificate is verified against [`ConnectOptions::add_root_certificates`]
//! (else the system's authorities) for the URL's host name or IP address; a client
//! certificate is presented when [`ConnectOptions::add_client_certificate`] gave one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::connection::Io;
use crate::error::ConnectError;
use crate::options::ConnectOptions;

/// TLS settings of [`ConnectOptions`].
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsSettings {
    /// Use TLS even if the server does not ask for it (and fail if it does not offer it).
    pub(crate) required: bool,
    /// Start the handshake before reading `INFO`.
    pub(crate) first: bool,
    /// PEM files of the authorities to trust (none: the system's).
    pub(crate) roots: Vec<PathBuf>,
    /// PEM certificate chain and key to present.
    pub(crate) client: Option<(PathBuf, PathBuf)>,
}

impl TlsSettings {
    /// Whether the options ask for TLS whatever the server says.
    pub(crate) fn wanted(&self) -> bool {
        self.required || self.first || !self.roots.is_empty() || self.client.is_some()
    }
}

fn tls_err(what: impl std::fmt::Display) -> ConnectError {
    ConnectError::Tls(what.to_string())
}

fn read(path: &Path) -> Result<Vec<u8>, ConnectError> {
    std::fs::read(path).map_err(|e| tls_err(format!("{}: {e}", path.display())))
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, ConnectError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_err(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(tls_err(format!("{}: no certificate found", path.display())));
    }
    Ok(certs)
}

/// The rustls client configuration for `opts`.
fn client_config(opts: &ConnectOptions) -> Result<Arc<rustls::ClientConfig>, ConnectError> {
    let tls = &opts.tls;
    let mut roots = rustls::RootCertStore::empty();
    if tls.roots.is_empty() {
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    }
    for path in &tls.roots {
        for cert in certs(path)? {
            roots
                .add(cert)
                .map_err(|e| tls_err(format!("{}: {e}", path.display())))?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(tls_err)?
    .with_root_certificates(roots);
    let config = match &tls.client {
        Some((cert, key)) => {
            let chain = certs(cert)?;
            let key = PrivateKeyDer::from_pem_slice(&read(key)?)
                .map_err(|e| tls_err(format!("{}: {e}", key.display())))?;
            builder.with_client_auth_cert(chain, key).map_err(tls_err)?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Runs the TLS handshake over `io` for server `host`; returns the encrypted stream.
///
/// # Errors
/// [`ConnectError::Tls`]: unreadable certificate files, a host that is not a valid server
/// name, or a failed handshake (the server's certificate does not verify, or the server
/// refused ours).
pub(crate) async fn upgrade(io: Io, opts: &ConnectOptions, host: &str) -> Result<Io, ConnectError> {
    let config = client_config(opts)?;
    let name = ServerName::try_from(host.to_owned()).map_err(tls_err)?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, io)
        .await
        .map_err(|e| tls_err(format!("handshake with {host}: {e}")))?;
    Ok(Box::new(stream))
}
