//! Subjects: validation, wildcard matching and the subscription index.
//!
//! A subject is raw bytes (`&[u8]`, usually a slice of a [`bytes::Bytes`] from the wire codec)
//! made of tokens separated by `.`. Two tokens are wildcards, and only when they are a whole
//! token:
//!
//! * `*` matches exactly one token;
//! * `>` matches one or more trailing tokens and may only be the last token.
//!
//! `a*` or `a>` are ordinary literal tokens. The rules are those of nats-server, confirmed on the
//! wire (`nats-protocol.md` §6 and §9):
//!
//! | subject      | [`is_valid_subject`] (SUB, filters) | [`is_valid_publish_subject`] (PUB) |
//! |--------------|-------------------------------------|------------------------------------|
//! | `foo.bar`    | yes                                 | yes                                |
//! | `foo.*`      | yes                                 | no                                 |
//! | `foo.>`, `>` | yes                                 | no                                 |
//! | `a*.b>`      | yes (literal tokens)                | yes                                |
//! | `foo..bar`, `.a`, `a.`, empty | no                 | no                                 |
//! | `a.>.b`, `>.a` | no                                | no                                 |
//! | `a b`, `a\tb`, `a\r`, `a\n` | no                   | no                                 |
//!
//! nats-server checks a publish subject only for `pedantic` connections (`-ERR 'Invalid Publish
//! Subject'`, and the message still goes on). Whether a published message reaches anyone is
//! [`is_routable_subject`]: `a.>.b` or `>.a` are routed (their `>` and `*` tokens are compared
//! literally, so `a.>.b` reaches `a.>`, `a.*.b` and `>`), while a subject with an empty token
//! (`a..b`, `.a`, `a.`) reaches no one.
//!
//! [`matches`](matches()), [`is_subset`] and [`overlaps`] compare subjects token by token in O(tokens),
//! without allocating. [`SubjectIndex`] is the trie that routes a published subject to every
//! matching subscription in time proportional to the subject's depth and the number of matches,
//! not to the number of subscriptions.

mod index;

pub use index::{Matches, SubjectIndex};

/// The token separator.
const SEPARATOR: u8 = b'.';
/// The single-token wildcard, as a whole token.
const SINGLE_WILDCARD: &[u8] = b"*";
/// The trailing multi-token wildcard, as a whole token.
const FULL_WILDCARD: &[u8] = b">";

/// Why a subject or queue group was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubjectError {
    /// The subject breaks the rules of [`is_valid_subject`]; the server answers
    /// `-ERR 'Invalid Subject'` and keeps the connection open.
    #[error("invalid subject")]
    Invalid,
    /// The queue group name is empty or contains whitespace. The wire codec splits arguments on
    /// whitespace, so this is a caller bug rather than something a peer can send.
    #[error("invalid queue group name")]
    InvalidQueueGroup,
}

/// Splits a subject into its `.`-separated tokens.
///
/// Empty tokens are kept, so `a..b` yields `a`, ``, `b` and the empty subject yields one empty
/// token. Never allocates.
pub fn tokens(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|&b| b == SEPARATOR)
}

/// Returns whether `s` is a valid subject for SUB, stream subjects and consumer filters.
///
/// Valid means: at least one token, every token non-empty, no whitespace (space, tab, CR, LF)
/// anywhere, and `>` only as the last token. `*` and `>` are wildcards only as whole tokens, so
/// `a*` is a valid literal token. Same rules as nats-server (`nats-protocol.md` §6). O(len).
pub fn is_valid_subject(s: &[u8]) -> bool {
    // One pass over the bytes (routing checks every PUB's subject): a token ends at each `.`.
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        if b == SEPARATOR {
            // Empty token, or anything after a `>` token.
            if i == start || &s[start..i] == FULL_WILDCARD {
                return false;
            }
            start = i + 1;
        } else if is_whitespace(b) {
            return false;
        }
    }
    start < s.len()
}

/// Returns whether `s` is a valid literal subject: [`is_valid_subject`] and no wildcard token.
///
/// This is what a publish subject should be. nats-server itself only enforces it for `pedantic`
/// connections (`-ERR 'Invalid Publish Subject'`); otherwise a wildcard token in a publish
/// subject is matched as a literal token. O(len), one pass.
pub fn is_valid_publish_subject(s: &[u8]) -> bool {
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        if b == SEPARATOR {
            if !is_literal_token(&s[start..i]) {
                return false;
            }
            start = i + 1;
        } else if is_whitespace(b) {
            return false;
        }
    }
    is_literal_token(&s[start..])
}

/// Returns whether a message published to `s` can reach a subscription: `s` is not empty and
/// no token of it is empty. Wildcard tokens anywhere are allowed (they are compared literally
/// when routing, see [`matches`](matches())). This is nats-server's rule for a published
/// subject (its sublist matches nothing for an empty token); whitespace cannot occur, the wire
/// codec splits arguments on it. O(len).
pub fn is_routable_subject(s: &[u8]) -> bool {
    !s.is_empty() && tokens(s).all(|token| !token.is_empty())
}

/// A non-empty token that is not a wildcard.
fn is_literal_token(token: &[u8]) -> bool {
    !token.is_empty() && !is_wildcard(token)
}

/// Returns whether no token of `s` is a wildcard (`*` or `>` as a whole token).
///
/// Does not check validity: `a..b` is literal (and invalid). O(len).
pub fn is_literal(s: &[u8]) -> bool {
    tokens(s).all(|token| !is_wildcard(token))
}

/// Returns whether the literal `subject` matches `filter`, which may contain wildcards.
///
/// `foo.*` matches `foo.bar` but not `foo` or `foo.bar.baz`; `foo.>` matches `foo.bar` and
/// `foo.bar.baz` but not `foo`; `>` matches everything (`nats-protocol.md` §6). Tokens of
/// `subject` are compared as literal bytes, so a publish to `foo.*` matches the filters `foo.*`
/// and `foo.>` but not `foo.bar`, as with nats-server. Both arguments are expected to be valid;
/// for invalid ones the answer is the token-by-token comparison, without panicking.
/// O(tokens), no allocation.
pub fn matches(filter: &[u8], subject: &[u8]) -> bool {
    let mut subject_tokens = tokens(subject);
    for filter_token in tokens(filter) {
        let Some(subject_token) = subject_tokens.next() else {
            return false;
        };
        match filter_token {
            FULL_WILDCARD => return true,
            SINGLE_WILDCARD => {}
            literal if literal != subject_token => return false,
            _ => {}
        }
    }
    subject_tokens.next().is_none()
}

/// Returns whether every literal subject matched by `sub` is also matched by `sup`.
///
/// Examples: `orders.new` ⊂ `orders.*`, `orders.*.x` ⊂ `orders.>`, `a.>` ⊂ `>`, every filter ⊂
/// itself; but `orders.*` ⊄ `orders.new` and `orders.>` ⊄ `orders.*`. Both arguments are
/// expected to be valid subjects (see [`is_valid_subject`]). O(tokens), no allocation.
pub fn is_subset(sub: &[u8], sup: &[u8]) -> bool {
    let mut sub_tokens = tokens(sub);
    for sup_token in tokens(sup) {
        let Some(sub_token) = sub_tokens.next() else {
            return false;
        };
        match (sub_token, sup_token) {
            // `sub` has at least one more token here, so all its subjects have one.
            (_, FULL_WILDCARD) => return true,
            (FULL_WILDCARD, _) => return false,
            (_, SINGLE_WILDCARD) => {}
            (SINGLE_WILDCARD, _) => return false,
            (sub_literal, sup_literal) if sub_literal != sup_literal => return false,
            _ => {}
        }
    }
    sub_tokens.next().is_none()
}

/// Returns whether some literal subject is matched by both `a` and `b`.
///
/// Examples: `orders.*` and `*.new` overlap (`orders.new`), `a.>` and `a.b.*` overlap, `a.*` and
/// `a.*.c` do not, `a.b` and `a.c` do not. Used to refuse streams whose subjects overlap. Both
/// arguments are expected to be valid subjects. Symmetric. O(tokens), no allocation.
pub fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let mut a_tokens = tokens(a);
    let mut b_tokens = tokens(b);
    loop {
        match (a_tokens.next(), b_tokens.next()) {
            (None, None) => return true,
            (None, Some(_)) | (Some(_), None) => return false,
            (Some(FULL_WILDCARD), Some(_)) | (Some(_), Some(FULL_WILDCARD)) => return true,
            (Some(SINGLE_WILDCARD), Some(_)) | (Some(_), Some(SINGLE_WILDCARD)) => {}
            (Some(a_literal), Some(b_literal)) if a_literal != b_literal => return false,
            (Some(_), Some(_)) => {}
        }
    }
}

/// Whitespace as nats-server's subject check sees it: the bytes that separate protocol arguments
/// and end control lines.
fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_wildcard(token: &[u8]) -> bool {
    token == SINGLE_WILDCARD || token == FULL_WILDCARD
}

/// A queue group name is one protocol argument: non-empty, no whitespace.
fn is_valid_queue_group(name: &[u8]) -> bool {
    !name.is_empty() && !name.iter().any(|&b| is_whitespace(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The rules as written, token by token: the oracle for the one-pass versions.
    fn valid_by_tokens(s: &[u8]) -> bool {
        let mut after_full_wildcard = false;
        for token in tokens(s) {
            if after_full_wildcard || token.is_empty() || token.iter().any(|&b| is_whitespace(b)) {
                return false;
            }
            after_full_wildcard = token == FULL_WILDCARD;
        }
        true
    }

    proptest! {
        #[test]
        fn one_pass_validation_agrees_with_the_token_rules(
            s in proptest::collection::vec(
                prop::sample::select(vec![b'a', b'b', b'.', b'*', b'>', b' ', b'\t', b'\r', b'\n']),
                0..12,
            )
        ) {
            let valid = valid_by_tokens(&s);
            prop_assert_eq!(is_valid_subject(&s), valid);
            prop_assert_eq!(is_valid_publish_subject(&s), valid && is_literal(&s));
        }
    }

    #[test]
    fn validation_table() {
        // (subject, is_valid_subject, is_valid_publish_subject, is_literal)
        let table: &[(&[u8], bool, bool, bool)] = &[
            (b"foo", true, true, true),
            (b"foo.bar", true, true, true),
            (b"$JS.API.INFO", true, true, true),
            (b"_INBOX.abc.123", true, true, true),
            (b"foo.*", true, false, false),
            (b"*", true, false, false),
            (b">", true, false, false),
            (b"foo.>", true, false, false),
            (b"*.*.>", true, false, false),
            (b"foo.*.bar", true, false, false),
            (b"a*", true, true, true),
            (b"a>", true, true, true),
            (b"*a.b>.>c", true, true, true),
            (b"**", true, true, true),
            (b"", false, false, true),
            (b".", false, false, true),
            (b"foo..bar", false, false, true),
            (b".a", false, false, true),
            (b"a.", false, false, true),
            (b"a.>.b", false, false, false),
            (b">.a", false, false, false),
            (b">.>", false, false, false),
            (b"a.>.", false, false, false),
            (b"a b", false, false, true),
            (b"a\tb", false, false, true),
            (b"a\r", false, false, true),
            (b"\na", false, false, true),
            (b"a. b", false, false, true),
            (b" ", false, false, true),
        ];
        for &(subject, valid, publish, literal) in table {
            let shown = String::from_utf8_lossy(subject);
            assert_eq!(
                is_valid_subject(subject),
                valid,
                "is_valid_subject({shown:?})"
            );
            assert_eq!(
                is_valid_publish_subject(subject),
                publish,
                "is_valid_publish_subject({shown:?})"
            );
            assert_eq!(is_literal(subject), literal, "is_literal({shown:?})");
        }
    }

    #[test]
    fn routable_subjects_are_those_without_an_empty_token() {
        for s in [
            &b"a"[..],
            b"a.b",
            b"a.>.b",
            b">.a",
            b">",
            b"*.*",
            b"a.*.>.*",
            b"a*",
        ] {
            assert!(is_routable_subject(s), "{}", String::from_utf8_lossy(s));
        }
        for s in [&b""[..], b".", b"..", b"a..b", b".a", b"a.", b"a.>."] {
            assert!(!is_routable_subject(s), "{}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn tokens_keeps_empty_tokens() {
        let collect = |s: &'static [u8]| tokens(s).collect::<Vec<_>>();
        assert_eq!(collect(b"a.bc.d"), [&b"a"[..], b"bc", b"d"]);
        assert_eq!(collect(b"a..b"), [&b"a"[..], b"", b"b"]);
        assert_eq!(collect(b""), [&b""[..]]);
    }

    #[test]
    fn matching_table() {
        // (filter, subject, matches)
        let table: &[(&[u8], &[u8], bool)] = &[
            (b"foo", b"foo", true),
            (b"foo", b"bar", false),
            (b"foo", b"foo.bar", false),
            (b"foo.bar", b"foo", false),
            (b"foo.*", b"foo", false),
            (b"foo.*", b"foo.bar", true),
            (b"foo.*", b"foo.bar.baz", false),
            (b"foo.>", b"foo", false),
            (b"foo.>", b"foo.bar", true),
            (b"foo.>", b"foo.bar.baz", true),
            (b">", b"foo", true),
            (b">", b"foo.bar.baz", true),
            (b"*", b"foo", true),
            (b"*", b"foo.bar", false),
            (b"*.bar", b"foo.bar", true),
            (b"*.bar", b"foo.baz", false),
            (b"*.*", b"foo.bar", true),
            (b"*.>", b"foo", false),
            (b"*.>", b"foo.bar", true),
            (b"foo.*.baz", b"foo.bar.baz", true),
            (b"foo.*.baz", b"foo.bar.qux", false),
            // `a*` is a literal token.
            (b"a*", b"a*", true),
            (b"a*", b"ab", false),
            // A wildcard token in a publish subject is matched literally.
            (b"foo.*", b"foo.*", true),
            (b"foo.bar", b"foo.*", false),
            (b"foo.>", b"foo.>", true),
        ];
        for &(filter, subject, expected) in table {
            assert_eq!(
                matches(filter, subject),
                expected,
                "matches({:?}, {:?})",
                String::from_utf8_lossy(filter),
                String::from_utf8_lossy(subject)
            );
        }
    }

    #[test]
    fn subset_table() {
        // (sub, sup, is_subset)
        let table: &[(&[u8], &[u8], bool)] = &[
            (b"orders.new", b"orders.new", true),
            (b"orders.new", b"orders.*", true),
            (b"orders.new", b"orders.>", true),
            (b"orders.new", b">", true),
            (b"orders.*.x", b"orders.>", true),
            (b"orders.*", b"orders.*", true),
            (b"orders.*", b"orders.>", true),
            (b"orders.*", b"*.*", true),
            (b"orders.>", b"orders.>", true),
            (b"orders.>", b">", true),
            (b"orders.*.>", b"orders.>", true),
            (b">", b">", true),
            (b"orders.*", b"orders.new", false),
            (b"orders.>", b"orders.*", false),
            (b"orders.>", b"orders.*.>", false),
            (b"orders", b"orders.>", false),
            (b"orders.new", b"orders", false),
            (b"orders", b"orders.new", false),
            (b"orders.new", b"orders.old", false),
            (b">", b"*", false),
            (b"*", b">", true),
            (b"*.*", b"*", false),
        ];
        for &(sub, sup, expected) in table {
            assert_eq!(
                is_subset(sub, sup),
                expected,
                "is_subset({:?}, {:?})",
                String::from_utf8_lossy(sub),
                String::from_utf8_lossy(sup)
            );
        }
    }

    #[test]
    fn overlap_table() {
        // (a, b, overlaps); checked both ways round.
        let table: &[(&[u8], &[u8], bool)] = &[
            (b"a.b", b"a.b", true),
            (b"a.b", b"a.c", false),
            (b"a.b", b"a.b.c", false),
            (b"orders.*", b"*.new", true),
            (b"orders.*", b"orders.new", true),
            (b"orders.*", b"orders.>", true),
            (b"a.>", b"a.b.*", true),
            (b"a.>", b"a", false),
            (b"a.>", b"b.>", false),
            (b"a.*", b"a.*.c", false),
            (b"*.b", b"a.*", true),
            (b"*.b", b"*.c", false),
            (b">", b"anything.at.all", true),
            (b">", b"*", true),
            (b"*", b"a.b", false),
            (b"a.*.c", b"a.b.*", true),
        ];
        for &(a, b, expected) in table {
            let shown = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
            assert_eq!(overlaps(a, b), expected, "overlaps{shown:?}");
            assert_eq!(overlaps(b, a), expected, "overlaps{shown:?} reversed");
        }
    }
}
