//! `tls { verify_and_map: true }`: the client certificate, not the CONNECT, names the user
//! (nats-server's `checkClientTLSCertSubject` in `server/auth.go`). The names a certificate
//! offers, and in which order they are tried, are in [`crate::tls::identity`].
//!
//! As in nats-server, mapping replaces the user/password check for the `users` list (a mapped
//! user needs no password, and a password sent is not looked at), while nkey users still sign
//! the nonce and a block without a `users` list (a token, a single user) is checked as without
//! TLS.

use jsproto::wire::Connect;
use std::sync::Arc;

use super::{Authenticator, ConnectionType, Failure, Identity};
use crate::tls::identity::{dn_equal, dn_reordered, parse_dn, CertNames};

impl Authenticator {
    /// Whether a CONNECT is decided by the client certificate under `verify_and_map`:
    /// authentication is required, there is a `users` list, and the client is not an nkey
    /// user (which are decided by their signature first, as in nats-server).
    pub fn maps_certs(&self, c: &Connect) -> bool {
        let nkey_given = c.nkey.as_deref().is_some_and(|n| !n.is_empty());
        let nkey_user = nkey_given && !self.nkeys.is_empty();
        self.required && !self.users.is_empty() && !nkey_user
    }

    /// The user of the `users` list that the client certificate `cert` names (`None`: the
    /// client sent none, which `verify` has already refused at the handshake), among the
    /// users allowed on a connection of type `kind` (as nats-server's lookup skips the
    /// others).
    ///
    /// # Errors
    /// [`Failure`] when no user matches (an authorization violation for the connection).
    pub fn authenticate_cert(
        &self,
        cert: Option<&CertNames>,
        kind: ConnectionType,
    ) -> Result<Identity, Failure> {
        let cert = cert.ok_or(Failure("no client certificate"))?;
        let found = |name: &str| {
            self.users
                .get(name)
                .filter(|u| kind.allowed_by(&u.config.connection_types))
        };
        let literal = cert
            .emails
            .iter()
            .chain(&cert.dns_names)
            .chain(&cert.uris)
            .find_map(|n| found(n));
        let entry = literal
            .or_else(|| {
                let candidates: Vec<_> = self
                    .users
                    .values()
                    .filter(|u| kind.allowed_by(&u.config.connection_types))
                    .filter_map(|u| Some((u, parse_dn(&u.config.user)?)))
                    .collect();
                candidates
                    .iter()
                    .find(|(_, dn)| dn_equal(dn, &cert.dn))
                    .or_else(|| candidates.iter().find(|(_, dn)| dn_reordered(dn, &cert.dn)))
                    .map(|(u, _)| *u)
            })
            .or_else(|| {
                (!cert.domain_components.is_empty())
                    .then(|| found(&format!("{},{}", cert.subject, cert.domain_components)))
                    .flatten()
            })
            .or_else(|| found(&cert.subject))
            .ok_or(Failure("no user for the client certificate"))?;
        if entry.config.proxy_required {
            return Err(Failure("a trusted proxy is required"));
        }
        Ok(Identity {
            perms: entry.perms.clone(),
            label: format!("user:{}", entry.config.user),
            account: Arc::clone(&entry.account),
        })
    }
}
