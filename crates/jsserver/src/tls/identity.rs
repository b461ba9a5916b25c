//! What a client certificate names, for `verify_and_map` (nats-server's
//! `checkClientTLSCertSubject` in `server/auth.go`).
//!
//! A verified client certificate maps to the user of the `authorization` block whose `user` is,
//! tried in this order: one of its email addresses, one of its DNS names, one of its URIs
//! (subject alternative names); then a user whose name, read as a distinguished name (RFC
//! 4514: `CN=alice,OU=ops,O=Acme`), has the certificate subject's attributes in the same order
//! or, failing that, in any order of its parts; then the subject written as Go's
//! `pkix.Name.String` writes it (most specific part first, only C, ST, L, STREET, POSTALCODE,
//! O, OU, CN and SERIALNUMBER), with the domain components (`DC=...`) appended, and then
//! without them.

use x509_cert::der::asn1::{Any, ObjectIdentifier};
use x509_cert::der::{Decode, Tag, Tagged};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::Certificate;

/// An attribute of a distinguished name: its type (upper case short name, e.g. `CN`, or the
/// dotted OID) and its value.
pub type Attribute = (String, String);

/// The names a client certificate offers for `verify_and_map`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertNames {
    /// Email addresses among the subject alternative names.
    pub emails: Vec<String>,
    /// DNS names among the subject alternative names.
    pub dns_names: Vec<String>,
    /// URIs among the subject alternative names.
    pub uris: Vec<String>,
    /// The subject's relative distinguished names, most specific first (`CN` before `O`),
    /// every attribute kept.
    pub dn: Vec<Vec<Attribute>>,
    /// The subject as Go's `pkix.Name.String` writes it: `CN=alice,OU=ops,O=Acme`.
    pub subject: String,
    /// The domain components (`DC=example,DC=com`), in certificate order; empty if none.
    pub domain_components: String,
}

const OID_SUBJECT_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");
const OID_DC: ObjectIdentifier = ObjectIdentifier::new_unwrap("0.9.2342.19200300.100.1.25");
const OID_EMAIL: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.1");
const OID_UID: ObjectIdentifier = ObjectIdentifier::new_unwrap("0.9.2342.19200300.100.1.1");

/// The attributes Go's `pkix.Name` keeps, in the order `ToRDNSequence` writes them, with
/// their short names.
const GO_NAME_ORDER: [(&str, &str); 9] = [
    ("2.5.4.6", "C"),
    ("2.5.4.8", "ST"),
    ("2.5.4.7", "L"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.17", "POSTALCODE"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.3", "CN"),
    ("2.5.4.5", "SERIALNUMBER"),
];

/// An attribute type's short name as RFC 4514 (and LDAP DN parsers) know it, else its OID.
fn type_name(oid: &ObjectIdentifier) -> String {
    let dotted = oid.to_string();
    if let Some((_, name)) = GO_NAME_ORDER.iter().find(|(o, _)| *o == dotted) {
        return (*name).to_owned();
    }
    match *oid {
        OID_DC => "DC".into(),
        OID_UID => "UID".into(),
        OID_EMAIL => "EMAILADDRESS".into(),
        _ => dotted,
    }
}

/// A string attribute value's text; `None` for other ASN.1 types.
fn value_text(value: &Any) -> Option<String> {
    match value.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::TeletexString => {
            String::from_utf8(value.value().to_vec()).ok()
        }
        _ => None,
    }
}

/// A value escaped as Go's `pkix` escapes it in `Name.String`.
fn escape(s: &str) -> String {
    let last = s.chars().count().saturating_sub(1);
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        let esc = match c {
            ',' | '+' | '"' | '\\' | '<' | '>' | ';' => true,
            ' ' => i == 0 || i == last,
            '#' => i == 0,
            _ => false,
        };
        if esc {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl CertNames {
    /// Reads the names of a DER certificate; `None` if it does not parse.
    pub fn from_der(der: &[u8]) -> Option<CertNames> {
        let cert = Certificate::from_der(der).ok()?;
        let tbs = &cert.tbs_certificate;
        let mut names = CertNames::default();
        for ext in tbs.extensions.iter().flatten() {
            if ext.extn_id != OID_SUBJECT_ALT_NAME {
                continue;
            }
            let Ok(san) = SubjectAltName::from_der(ext.extn_value.as_bytes()) else {
                continue;
            };
            for name in san.0 {
                match name {
                    GeneralName::Rfc822Name(s) => names.emails.push(s.to_string()),
                    GeneralName::DnsName(s) => names.dns_names.push(s.to_string()),
                    GeneralName::UniformResourceIdentifier(s) => names.uris.push(s.to_string()),
                    _ => {}
                }
            }
        }
        // Go's pkix.Name: the last value of CN and SERIALNUMBER, every value of the others.
        let mut kept: Vec<Vec<String>> = vec![Vec::new(); GO_NAME_ORDER.len()];
        let mut dcs = Vec::new();
        for rdn in tbs.subject.0.iter() {
            let mut attrs = Vec::new();
            for atv in rdn.0.iter() {
                let text = value_text(&atv.value);
                let dotted = atv.oid.to_string();
                if let (Some(i), Some(t)) = (
                    GO_NAME_ORDER.iter().position(|(o, _)| *o == dotted),
                    text.as_ref(),
                ) {
                    if GO_NAME_ORDER[i].1 == "CN" || GO_NAME_ORDER[i].1 == "SERIALNUMBER" {
                        kept[i] = vec![t.clone()];
                    } else {
                        kept[i].push(t.clone());
                    }
                }
                if atv.oid == OID_DC {
                    if let Some(t) = &text {
                        dcs.push(format!("DC={}", escape(t)));
                    }
                }
                attrs.push((type_name(&atv.oid), text.unwrap_or_default()));
            }
            names.dn.push(attrs);
        }
        names.dn.reverse();
        // ToRDNSequence makes one RDN per kept attribute type; String writes them last first.
        let rdns: Vec<String> = GO_NAME_ORDER
            .iter()
            .zip(&kept)
            .filter(|(_, values)| !values.is_empty())
            .map(|((_, short), values)| {
                values
                    .iter()
                    .map(|v| format!("{short}={}", escape(v)))
                    .collect::<Vec<_>>()
                    .join("+")
            })
            .collect();
        names.subject = rdns.into_iter().rev().collect::<Vec<_>>().join(",");
        names.domain_components = dcs.join(",");
        Some(names)
    }
}

/// Parses a distinguished name in RFC 4514 form (`CN=alice+UID=7,O=Acme`): its relative
/// distinguished names in written order, attribute types in upper case (`emailAddress` as
/// `EMAILADDRESS`), values unescaped (`\,` and `\2C` alike). `None` if it is not one.
pub fn parse_dn(s: &str) -> Option<Vec<Vec<Attribute>>> {
    let mut rdns = Vec::new();
    let mut rdn = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        // Attribute type up to '='.
        let mut ty = String::new();
        let mut equals = false;
        for c in chars.by_ref() {
            if c == '=' {
                equals = true;
                break;
            }
            ty.push(c);
        }
        let ty = ty.trim().to_ascii_uppercase();
        if !equals || ty.is_empty() {
            return None;
        }
        // Value up to an unescaped ',' or '+'.
        let mut value = String::new();
        let mut end = None;
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    let a = chars.next()?;
                    if a.is_ascii_hexdigit() && chars.peek().is_some_and(char::is_ascii_hexdigit) {
                        let b = chars.next()?;
                        let byte = u8::from_str_radix(&format!("{a}{b}"), 16).ok()?;
                        value.push(byte as char);
                    } else {
                        value.push(a);
                    }
                }
                ',' | '+' => {
                    end = Some(c);
                    break;
                }
                c => value.push(c),
            }
        }
        rdn.push((ty, value.trim().to_owned()));
        match end {
            Some('+') => {}
            Some(_) => rdns.push(std::mem::take(&mut rdn)),
            None => {
                rdns.push(rdn);
                return Some(rdns);
            }
        }
    }
}

/// Whether two relative distinguished names hold the same attributes (in any order, types
/// already upper case).
fn rdn_eq(a: &[Attribute], b: &[Attribute]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// Whether `user` (a DN) names the same subject as `cert`: the same relative distinguished
/// names in the same order.
pub fn dn_equal(user: &[Vec<Attribute>], cert: &[Vec<Attribute>]) -> bool {
    user.len() == cert.len() && user.iter().zip(cert).all(|(a, b)| rdn_eq(a, b))
}

/// Whether `user` (a DN) names the same subject as `cert` with its parts in another order.
pub fn dn_reordered(user: &[Vec<Attribute>], cert: &[Vec<Attribute>]) -> bool {
    user.len() == cert.len() && user.iter().all(|a| cert.iter().any(|b| rdn_eq(a, b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_dn_reads_escapes_multi_valued_parts_and_type_case() {
        let dn = parse_dn("cn=Smith\\, J+uid=7, O=Acme\\2C Inc,emailAddress=a@b").unwrap();
        assert_eq!(
            dn,
            vec![
                vec![("CN".into(), "Smith, J".into()), ("UID".into(), "7".into())],
                vec![("O".into(), "Acme, Inc".into())],
                vec![("EMAILADDRESS".into(), "a@b".into())],
            ]
        );
        assert!(parse_dn("alice").is_none());
        assert!(parse_dn("").is_none());
    }

    #[test]
    fn dn_matches_in_order_or_reordered() {
        let cert = parse_dn("CN=alice,OU=ops,O=Acme").unwrap();
        assert!(dn_equal(
            &parse_dn("cn=alice, ou=ops, o=Acme").unwrap(),
            &cert
        ));
        let reordered = parse_dn("O=Acme,CN=alice,OU=ops").unwrap();
        assert!(!dn_equal(&reordered, &cert));
        assert!(dn_reordered(&reordered, &cert));
        assert!(!dn_reordered(&parse_dn("CN=alice,O=Acme").unwrap(), &cert));
    }

    #[test]
    fn go_escapes() {
        assert_eq!(escape("a,b"), "a\\,b");
        assert_eq!(escape(" x "), "\\ x\\ ");
        assert_eq!(escape("#x#"), "\\#x#");
    }
}
