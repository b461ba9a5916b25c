//! Test certificates, made with rcgen: a CA, a server certificate for `127.0.0.1` and
//! `localhost`, client certificates with chosen subjects and names, as PEM files in a
//! temporary directory; and the `tls { }` block that serves them.

use std::path::PathBuf;

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
