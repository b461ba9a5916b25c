//! Test certificates, made with rcgen: a CA, a server certificate for `127.0.0.1` and
//! `localhost`, client certificates with chosen subjects and names, as PEM files in a
//! temporary directory; the `tls { }` block that serves them; async-nats clients that trust
//! them.

use std::path::PathBuf;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};

/// A test CA and the files of what it signed, in a temporary directory.
pub struct Pki {
    dir: tempfile::TempDir,
    pub ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A certificate and its key, as PEM files.
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    pub fn new() -> Pki {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "jsserver test CA");
        let ca = params.self_signed(&ca_key).expect("CA cert");
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write CA");
        Pki { dir, ca, ca_key }
    }

    /// The CA's PEM file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server's certificate: `127.0.0.1` and `localhost`.
    pub fn server(&self) -> Pair {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .expect("server params");
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign("server", params)
    }

    /// A client certificate with `subject` (written most general first, as in the
    /// certificate: `[(O, "Acme"), (CN, "bob")]`) and `sans`.
    pub fn client(&self, name: &str, subject: &[(DnType, &str)], sans: Vec<SanType>) -> Pair {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        for (ty, value) in subject {
            params.distinguished_name.push(ty.clone(), *value);
        }
        params.subject_alt_names = sans;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(name, params)
    }

    pub fn sign(&self, name: &str, params: CertificateParams) -> Pair {
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("sign");
        let pair = Pair {
            cert: self.dir.path().join(format!("{name}-cert.pem")),
            key: self.dir.path().join(format!("{name}-key.pem")),
        };
        std::fs::write(&pair.cert, cert.pem()).expect("write cert");
        std::fs::write(&pair.key, key.serialize_pem()).expect("write key");
        pair
    }
}

/// A `tls { }` block with the server's pair and `extra` lines.
pub fn tls_block(server: &Pair, extra: &str) -> String {
    format!(
        "tls {{\n  cert_file: {:?}\n  key_file: {:?}\n{extra}}}\n",
        server.cert.display().to_string(),
        server.key.display().to_string()
    )
}

/// async-nats options trusting `pki`'s CA, TLS required, no reconnects.
pub fn tls_client(pki: &Pki) -> async_nats::ConnectOptions {
    async_nats::ConnectOptions::new()
        .add_root_certificates(pki.ca_file())
        .require_tls(true)
        .max_reconnects(Some(0))
}

/// Connects with `opts` to `server`: the client, or why not; panics when neither comes
/// within 10 s.
pub async fn tls_connect(
    server: &super::TestServer,
    opts: async_nats::ConnectOptions,
) -> Result<async_nats::Client, async_nats::ConnectError> {
    tokio::time::timeout(Duration::from_secs(10), opts.connect(server.url()))
        .await
        .expect("connect answered in time")
}

/// Publishes on `subject` and reads it back through a subscription of the same client.
pub async fn round_trip(client: &async_nats::Client, subject: &str) {
    use futures_util::StreamExt;
    let mut sub = client
        .subscribe(subject.to_owned())
        .await
        .expect("subscribe");
    client
        .publish(subject.to_owned(), "hello".into())
        .await
        .expect("publish");
    let msg = tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("message in time")
        .expect("subscription open");
    assert_eq!(&msg.payload[..], b"hello");
}
