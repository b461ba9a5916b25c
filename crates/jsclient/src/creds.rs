//! Credentials files (`.creds`, as `nsc` writes them): a user JWT and the user's nkey seed,
//! each between marker lines.
//!
//! ```text
//! -----BEGIN NATS USER JWT-----
//! eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ...
//! ------END NATS USER JWT------
//!
//! ************************* IMPORTANT *************************
//! NKEY Seed printed below can be used to sign and prove identity.
//! NKEYs are sensitive and should be treated as secrets.
//!
//! -----BEGIN USER NKEY SEED-----
//! SUAIO3FHUX5PNV2LQIIP7TZ3N4L7TX3W53MQGEIVYFIGA635OZCKEYHFLM
//! ------END USER NKEY SEED------
//! ```
//!
//! Read as the `nats` CLI reads them (nats.go with the nats-io/jwt library): a block is a
//! line that ends in at least three dashes after a run of at least three dashes (what is
//! between, `BEGIN NATS USER JWT`, is not checked), the next line made only of letters,
//! digits, `_`, `-`, `.` and `=`, and a line that starts and ends with at least three
//! dashes. The first block holds the JWT, the second the seed; without a second block, the
//! seed is the first line that starts with `SO`, `SA` or `SU` (blanks around it ignored,
//! where nats.go keeps them and fails). Lines may end in `\r\n`. Stricter than nats.go, which sends the whole file as the JWT when it has no
//! block: a file without a block holding a JWT is an error here.

use crate::options::NkeySeed;

/// The user JWT and seed of a creds file.
#[derive(Debug, Clone)]
pub(crate) struct UserCreds {
    /// The user JWT, sent in CONNECT (`jwt`).
    pub(crate) jwt: String,
    /// The user's seed (`SU...`), which signs the INFO nonce (`sig`); checked when read.
    pub(crate) seed: NkeySeed,
}

/// Why a creds file's text is not usable: one clause for the user, never the seed.
pub(crate) fn parse(text: &str) -> Result<UserCreds, String> {
    let blocks = blocks(text);
    let jwt = blocks.first().filter(|v| is_jwt_shaped(v)).ok_or_else(|| {
        "no user JWT (expected between -----BEGIN NATS USER JWT----- and \
             ------END NATS USER JWT------ lines)"
            .to_owned()
    })?;
    let seed = match blocks.get(1) {
        Some(seed) => Some(*seed),
        None => text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("SO") || l.starts_with("SA") || l.starts_with("SU")),
    };
    let seed = seed.ok_or_else(|| {
        "no nkey seed (expected between -----BEGIN USER NKEY SEED----- and \
         ------END USER NKEY SEED------ lines)"
            .to_owned()
    })?;
    // Only the kind of key is named (its first two letters), never the seed.
    if !seed.starts_with("SU") {
        let kind = match seed.get(..2) {
            Some("SO") => "an operator seed (SO...)",
            Some("SA") => "an account seed (SA...)",
            Some("SN") => "a server seed (SN...)",
            Some("SC") => "a cluster seed (SC...)",
            Some("SX") => "a curve seed (SX...)",
            _ => "not an nkey seed",
        };
        return Err(format!(
            "the nkey seed is not a user seed: {kind}, a user seed starts with SU"
        ));
    }
    if let Err(e) = nkeys::KeyPair::from_seed(seed) {
        return Err(format!("the user seed is not valid: {e}"));
    }
    Ok(UserCreds {
        jwt: (*jwt).to_owned(),
        seed: NkeySeed(seed.to_owned()),
    })
}

/// The values of the decorated blocks, in order (nats-io/jwt's `userConfigRE`:
/// `\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}(\r?\n|\z)))`, matched
/// line by line).
fn blocks(text: &str) -> Vec<&str> {
    // Lines without their `\n` and one `\r` before it (the pattern's `\r?\n`).
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    // `split` yields a last piece after the final `\n`; a closing marker may end the text
    // without a newline, but an opening marker or a value needs its `\n`.
    let complete = |i: usize| i + 1 < lines.len();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 2 < lines.len() {
        let (open, value, close) = (lines[i], lines[i + 1], lines[i + 2]);
        if complete(i) && opens(open) && complete(i + 1) && is_value(value) && closes(close) {
            found.push(value);
            i += 3;
        } else {
            i += 1;
        }
    }
    found
}

/// `[-]{3,}.*[-]{3,}` at the end of the line, starting anywhere in it.
fn opens(line: &str) -> bool {
    line.ends_with("---")
        && line
            .find("---")
            .is_some_and(|first| first + 6 <= line.len())
}

/// `[-]{3,}.*[-]{3,}` from the start of the line to its end.
fn closes(line: &str) -> bool {
    line.len() >= 6 && line.starts_with("---") && line.ends_with("---")
}

/// `[\w\-.=]+`, Go's `\w` being ASCII letters, digits and `_`.
fn is_value(line: &str) -> bool {
    !line.is_empty()
        && line
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'='))
}

/// Three non-empty parts separated by dots (header, claims, signature).
fn is_jwt_shaped(value: &str) -> bool {
    let parts: Vec<&str> = value.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const JWT: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQSJ9.c2ln";

    fn creds(jwt: &str, seed: &str) -> String {
        format!(
            "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\
             NKEYs are sensitive and should be treated as secrets.\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
             *************************************************************\n"
        )
    }

    /// The seed with its last letter changed: a checksum that does not match.
    fn flip_last(seed: &str) -> String {
        let (head, last) = seed.split_at(seed.len() - 1);
        format!("{head}{}", if last == "A" { "B" } else { "A" })
    }

    #[test]
    fn nsc_format() {
        let seed = nkeys::KeyPair::new_user().seed().unwrap();
        let c = parse(&creds(JWT, &seed)).unwrap();
        assert_eq!(c.jwt, JWT);
        assert_eq!(c.seed.0, seed);
    }

    #[test]
    fn crlf_leading_blanks_and_a_file_ending_in_the_marker() {
        let seed = nkeys::KeyPair::new_user().seed().unwrap();
        let text = format!(
            "  \r\n-----BEGIN NATS USER JWT-----\r\n{JWT}\r\n------END NATS USER JWT------\r\n\
             -----BEGIN USER NKEY SEED-----\r\n{seed}\r\n------END USER NKEY SEED------"
        );
        let c = parse(&text).unwrap();
        assert_eq!(c.jwt, JWT);
        assert_eq!(c.seed.0, seed);
    }

    #[test]
    fn markers_are_dashes_whatever_their_words() {
        let seed = nkeys::KeyPair::new_user().seed().unwrap();
        let text = format!("# x ---jwt---\n{JWT}\n------\n---\n---x---\n{seed}\n---------\n");
        let c = parse(&text).unwrap();
        assert_eq!(c.jwt, JWT);
        assert_eq!(c.seed.0, seed);
    }

    #[test]
    fn values_must_sit_alone_on_their_line() {
        let seed = nkeys::KeyPair::new_user().seed().unwrap();
        // An indented JWT is no block (nats.go does not take it either).
        let text = creds(&format!(" {JWT}"), &seed);
        assert!(parse(&text).unwrap_err().starts_with("no user JWT"));
    }

    #[test]
    fn a_bare_seed_line_after_the_jwt_block() {
        let seed = nkeys::KeyPair::new_user().seed().unwrap();
        let text = format!(
            "-----BEGIN NATS USER JWT-----\n{JWT}\n------END NATS USER JWT------\n\n  {seed}\n"
        );
        assert_eq!(parse(&text).unwrap().seed.0, seed);
    }

    #[test]
    fn errors_say_what_is_missing_and_never_show_the_seed() {
        let user = nkeys::KeyPair::new_user().seed().unwrap();
        let account = nkeys::KeyPair::new_account().seed().unwrap();
        let operator = nkeys::KeyPair::new_operator().seed().unwrap();
        let cases = [
            (String::new(), "no user JWT"),
            (format!("{JWT}\n{user}\n"), "no user JWT"),
            // Only the seed block: it is the first block, and not a JWT.
            (
                format!("-----BEGIN USER NKEY SEED-----\n{user}\n------END USER NKEY SEED------\n"),
                "no user JWT",
            ),
            (
                "-----BEGIN NATS USER JWT-----\nabc.def.ghi\n------END NATS USER JWT------\n"
                    .to_owned(),
                "no nkey seed",
            ),
            (
                creds(JWT, &account),
                "the nkey seed is not a user seed: an account seed (SA...)",
            ),
            (
                creds(JWT, &operator),
                "the nkey seed is not a user seed: an operator seed (SO...)",
            ),
            (
                creds(JWT, "NOTASEED"),
                "the nkey seed is not a user seed: not an nkey seed",
            ),
            (creds(JWT, &flip_last(&user)), "the user seed is not valid"),
        ];
        for (text, want) in cases {
            let err = parse(&text).unwrap_err();
            assert!(err.starts_with(want), "{err:?} for {text:?}");
            for secret in [&user, &account, &operator] {
                assert!(!err.contains(&secret[2..]), "seed in {err:?}");
            }
        }
    }
}
