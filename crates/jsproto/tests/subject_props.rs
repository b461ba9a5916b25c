//! Property and exhaustive checks of `jsproto::subject` against naive definitions.
//!
//! * `SubjectIndex::find` equals a scan of every subscription with `matches`, for random
//!   subscription sets and after random insert/remove sequences.
//! * `matches`, `is_subset` and `overlaps` agree with brute force over every filter of up to
//!   three tokens and every literal subject of up to four tokens over a small alphabet.

use std::collections::BTreeMap;

use jsproto::subject::{
    is_literal, is_subset, is_valid_publish_subject, is_valid_subject, matches, overlaps, Matches,
    SubjectIndex,
};
use proptest::prelude::*;

/// Plain values sorted; groups by name with sorted members.
type Normalised = (Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>);

/// A subscription in the model: (subject, queue group, value).
type Sub = (String, Option<String>, u8);

fn normalise(out: &Matches<u8>) -> Normalised {
    let mut plain = out.plain().to_vec();
    plain.sort_unstable();
    let mut groups = BTreeMap::new();
    for (name, members) in out.groups() {
        assert!(!members.is_empty(), "empty group {name:?}");
        let mut members = members.to_vec();
        members.sort_unstable();
        let previous = groups.insert(name.to_vec(), members);
        assert!(previous.is_none(), "group {name:?} listed twice");
    }
    (plain, groups)
}

fn naive_find(subs: &[Sub], subject: &str) -> Normalised {
    let mut plain = Vec::new();
    let mut groups: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (filter, group, value) in subs {
        if !matches(filter.as_bytes(), subject.as_bytes()) {
            continue;
        }
        match group {
            None => plain.push(*value),
            Some(name) => groups
                .entry(name.as_bytes().to_vec())
                .or_default()
                .push(*value),
        }
    }
    plain.sort_unstable();
    groups
        .values_mut()
        .for_each(|members| members.sort_unstable());
    (plain, groups)
}

fn filter() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec!["a", "b", "c", "*"]);
    (prop::collection::vec(token, 1..=4), any::<bool>()).prop_map(|(mut tokens, full)| {
        if full {
            *tokens.last_mut().expect("at least one token") = ">";
        }
        tokens.join(".")
    })
}

fn literal_subject() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec!["a", "b", "c", "d"]);
    prop::collection::vec(token, 1..=5).prop_map(|tokens| tokens.join("."))
}

fn group() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop::sample::select(vec!["g1", "g2", "g3"]).prop_map(str::to_owned))
}

fn sub() -> impl Strategy<Value = Sub> {
    (filter(), group(), 0u8..4)
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Sub),
    /// Remove a random subscription, which may not exist.
    Remove(Sub),
    /// Remove the model's subscription at this index (modulo its length), if any.
    RemoveExisting(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => sub().prop_map(Op::Insert),
        1 => sub().prop_map(Op::Remove),
        2 => any::<usize>().prop_map(Op::RemoveExisting),
    ]
}

fn insert(index: &mut SubjectIndex<u8>, (subject, group, value): &Sub) {
    index
        .insert(
            subject.as_bytes(),
            group.as_deref().map(str::as_bytes),
            *value,
        )
        .expect("generated subjects are valid");
}

fn assert_same_as_naive(index: &SubjectIndex<u8>, model: &[Sub], subjects: &[String]) {
    let mut out = Matches::new();
    for subject in subjects {
        index.find(subject.as_bytes(), &mut out);
        assert_eq!(
            normalise(&out),
            naive_find(model, subject),
            "find({subject:?})"
        );
        assert_eq!(
            out.is_empty(),
            naive_find(model, subject) == Default::default()
        );
    }
}

proptest! {
    #[test]
    fn find_equals_naive_scan(
        subs in prop::collection::vec(sub(), 0..40),
        subjects in prop::collection::vec(literal_subject(), 1..20),
    ) {
        let mut index = SubjectIndex::new();
        for sub in &subs {
            insert(&mut index, sub);
        }
        prop_assert_eq!(index.len(), subs.len());
        assert_same_as_naive(&index, &subs, &subjects);
    }

    #[test]
    fn insert_remove_sequences_match_naive_scan(
        ops in prop::collection::vec(op(), 0..60),
        subjects in prop::collection::vec(literal_subject(), 1..12),
    ) {
        let mut index = SubjectIndex::new();
        let mut model: Vec<Sub> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(sub) => {
                    insert(&mut index, &sub);
                    model.push(sub);
                }
                Op::Remove(sub) => {
                    let position = model.iter().position(|s| *s == sub);
                    let removed = index.remove(
                        sub.0.as_bytes(),
                        sub.1.as_deref().map(str::as_bytes),
                        &sub.2,
                    );
                    prop_assert_eq!(removed, position.is_some(), "remove({:?})", sub);
                    if let Some(at) = position {
                        model.remove(at);
                    }
                }
                Op::RemoveExisting(at) => {
                    if model.is_empty() {
                        continue;
                    }
                    let sub = model.remove(at % model.len());
                    let removed = index.remove(
                        sub.0.as_bytes(),
                        sub.1.as_deref().map(str::as_bytes),
                        &sub.2,
                    );
                    prop_assert!(removed, "remove existing {:?}", sub);
                }
            }
            prop_assert_eq!(index.len(), model.len());
            prop_assert_eq!(index.is_empty(), model.is_empty());
            assert_same_as_naive(&index, &model, &subjects);
        }
    }
}

/// Every valid filter of 1..=3 tokens over `a`, `b`, `*`, with `>` allowed as the last token.
fn all_filters() -> Vec<String> {
    let mut filters = Vec::new();
    let mut prefixes = vec![String::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for prefix in &prefixes {
            for token in ["a", "b", "*", ">"] {
                let filter = if prefix.is_empty() {
                    token.to_owned()
                } else {
                    format!("{prefix}.{token}")
                };
                if token != ">" {
                    next.push(filter.clone());
                }
                filters.push(filter);
            }
        }
        prefixes = next;
    }
    filters
}

/// Every literal subject of 1..=4 tokens over `a`, `b`, `c` (`c` appears in no filter, so a
/// `*` can always be told apart from a literal).
fn all_subjects() -> Vec<String> {
    let mut subjects = Vec::new();
    let mut current = vec![String::new()];
    for _ in 0..4 {
        let mut next = Vec::new();
        for prefix in &current {
            for token in ["a", "b", "c"] {
                next.push(if prefix.is_empty() {
                    token.to_owned()
                } else {
                    format!("{prefix}.{token}")
                });
            }
        }
        subjects.extend(next.iter().cloned());
        current = next;
    }
    subjects
}

/// Matching written as a recursive definition over token lists.
fn reference_matches(filter: &[&str], subject: &[&str]) -> bool {
    match (filter, subject) {
        ([], []) => true,
        ([">"], [_, ..]) => true,
        (["*", filter_rest @ ..], [_, subject_rest @ ..]) => {
            reference_matches(filter_rest, subject_rest)
        }
        ([f, filter_rest @ ..], [s, subject_rest @ ..]) => {
            f == s && reference_matches(filter_rest, subject_rest)
        }
        _ => false,
    }
}

#[test]
fn matches_subset_and_overlaps_agree_with_brute_force() {
    let filters = all_filters();
    let subjects = all_subjects();
    assert_eq!(filters.len(), 4 + 12 + 36);
    assert_eq!(subjects.len(), 3 + 9 + 27 + 81);
    for subject in &subjects {
        assert!(is_valid_publish_subject(subject.as_bytes()), "{subject}");
    }

    // matched[f] = which subjects filter f matches.
    let mut matched = Vec::new();
    for filter in &filters {
        assert!(is_valid_subject(filter.as_bytes()), "{filter}");
        assert_eq!(
            is_literal(filter.as_bytes()),
            !filter.contains(['*', '>']),
            "{filter}"
        );
        let filter_tokens: Vec<&str> = filter.split('.').collect();
        let row: Vec<bool> = subjects
            .iter()
            .map(|subject| {
                let found = matches(filter.as_bytes(), subject.as_bytes());
                let subject_tokens: Vec<&str> = subject.split('.').collect();
                assert_eq!(
                    found,
                    reference_matches(&filter_tokens, &subject_tokens),
                    "matches({filter:?}, {subject:?})"
                );
                found
            })
            .collect();
        matched.push(row);
    }

    for (a, a_matched) in filters.iter().zip(&matched) {
        for (b, b_matched) in filters.iter().zip(&matched) {
            let subset = a_matched
                .iter()
                .zip(b_matched)
                .all(|(&in_a, &in_b)| !in_a || in_b);
            assert_eq!(
                is_subset(a.as_bytes(), b.as_bytes()),
                subset,
                "is_subset({a:?}, {b:?})"
            );
            let overlap = a_matched
                .iter()
                .zip(b_matched)
                .any(|(&in_a, &in_b)| in_a && in_b);
            assert_eq!(
                overlaps(a.as_bytes(), b.as_bytes()),
                overlap,
                "overlaps({a:?}, {b:?})"
            );
        }
    }
}
