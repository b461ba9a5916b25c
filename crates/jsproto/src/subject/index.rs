//! The subscription index: a trie of subject tokens.

use std::collections::HashMap;

/// The trie's token maps hash with foldhash: several times faster than the standard SipHash on
/// short tokens, and seeded per process, so clients cannot predict collisions.
type TokenMap<V> = HashMap<Box<[u8]>, V, foldhash::fast::RandomState>;

use super::{
    is_valid_queue_group, is_valid_subject, tokens, SubjectError, FULL_WILDCARD, SEPARATOR,
    SINGLE_WILDCARD,
};

/// The subscription index: finds every subscription matching a published subject.
///
/// It is a trie keyed by subject token, the same design as nats-server's sublist (without its
/// result cache). Each level maps literal tokens to child nodes and has at most one `*` child
/// and one `>` child; each node holds the plain subscriptions and the queue subscriptions (by
/// group name) whose subject ends there:
///
/// ```text
///            root level
///        "orders"     *
///           |         |
///         level      level ── "new": [plain: c]
///     "new"   >
///       |     |
///  [plain: a] [queue "g": b]
///
///  a = orders.new, b = orders.> in group g, c = *.new
/// ```
///
/// A lookup ([`find`](Self::find)) walks one branch per matching token kind at each level, so it
/// costs O(depth × wildcard branching + matches), independent of the total number of
/// subscriptions. `T` identifies one subscription (for the server, something like a connection
/// id and a sid); it is cloned into the results, so keep it cheap to clone.
///
/// The same value may be inserted several times, under the same or different subjects: each
/// insertion is a separate subscription and yields its own entry from `find`, as each matching
/// subscription of one connection gets its own `MSG` from nats-server (`nats-protocol.md` §6).
///
/// Literal tokens are hashed with std's randomly keyed hasher, as tokens come from peers.
///
/// There is deliberately no result cache (nats-server's sublist has one). Measured with 100k
/// subscriptions (50k `_INBOX.<id>.*`, 50k `orders.<n>.<id>`, a few wildcards and groups), an
/// optimised `find` of a 3–5 token subject took about 110 ns; a perfect cache hit (one hash of
/// the subject plus copying the result, with no lock, no miss and no invalidation) about 40 ns.
/// The ~70 ns saved per publish do not pay for a lock on the `&self` lookup path and
/// invalidation on every insert and remove.
#[derive(Debug, Clone)]
pub struct SubjectIndex<T> {
    root: Level<T>,
    len: usize,
}

/// One level of the trie: the children for the next token.
#[derive(Debug, Clone)]
struct Level<T> {
    literal: TokenMap<Node<T>>,
    single_wildcard: Option<Box<Node<T>>>,
    /// A `>` node never has children: `>` is always the last token.
    full_wildcard: Option<Box<Node<T>>>,
}

/// The subscriptions whose subject ends at this node, and the level below it.
#[derive(Debug, Clone)]
struct Node<T> {
    next: Level<T>,
    plain: Vec<T>,
    /// (group name, members). Few groups share one subject, so a Vec searched linearly beats a
    /// map here. No entry is ever empty.
    queues: Vec<(Box<[u8]>, Vec<T>)>,
}

impl<T> Default for Level<T> {
    fn default() -> Self {
        Self {
            literal: TokenMap::default(),
            single_wildcard: None,
            full_wildcard: None,
        }
    }
}

impl<T> Default for Node<T> {
    fn default() -> Self {
        Self {
            next: Level::default(),
            plain: Vec::new(),
            queues: Vec::new(),
        }
    }
}

impl<T> Level<T> {
    fn is_empty(&self) -> bool {
        self.literal.is_empty() && self.single_wildcard.is_none() && self.full_wildcard.is_none()
    }

    /// The child for `token`, created if missing.
    fn child_or_insert(&mut self, token: &[u8]) -> &mut Node<T> {
        match token {
            SINGLE_WILDCARD => self.single_wildcard.get_or_insert_with(Box::default),
            FULL_WILDCARD => self.full_wildcard.get_or_insert_with(Box::default),
            literal => {
                // `entry` would need an owned key, allocating on every insert.
                if !self.literal.contains_key(literal) {
                    self.literal.insert(literal.into(), Node::default());
                }
                self.literal.get_mut(literal).expect("inserted just above")
            }
        }
    }
}

impl<T> Node<T> {
    fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.queues.is_empty() && self.next.is_empty()
    }
}

impl<T: Clone + PartialEq> SubjectIndex<T> {
    /// Creates an empty index. Does not allocate.
    pub fn new() -> Self {
        Self {
            root: Level::default(),
            len: 0,
        }
    }

    /// Adds the subscription `value` on `subject`, in `queue_group` if given.
    ///
    /// `subject` may contain wildcards. Inserting an equal value again adds a second, separate
    /// subscription. O(depth); allocates the nodes of new tokens.
    ///
    /// # Errors
    ///
    /// [`SubjectError::Invalid`] if `subject` fails [`is_valid_subject`](super::is_valid_subject)
    /// (the server answers `-ERR 'Invalid Subject'`), [`SubjectError::InvalidQueueGroup`] if the
    /// group name is empty or contains whitespace. The index is unchanged on error.
    pub fn insert(
        &mut self,
        subject: &[u8],
        queue_group: Option<&[u8]>,
        value: T,
    ) -> Result<(), SubjectError> {
        if !is_valid_subject(subject) {
            return Err(SubjectError::Invalid);
        }
        if queue_group.is_some_and(|name| !is_valid_queue_group(name)) {
            return Err(SubjectError::InvalidQueueGroup);
        }
        let mut subject_tokens = tokens(subject);
        let first = subject_tokens
            .next()
            .expect("split yields at least one token");
        let mut node = self.root.child_or_insert(first);
        for token in subject_tokens {
            node = node.next.child_or_insert(token);
        }
        match queue_group {
            None => node.plain.push(value),
            Some(name) => match node.queues.iter_mut().find(|(group, _)| **group == *name) {
                Some((_, members)) => members.push(value),
                None => node.queues.push((name.into(), vec![value])),
            },
        }
        self.len += 1;
        Ok(())
    }

    /// Removes one subscription equal to `value` on exactly `subject` and `queue_group`.
    ///
    /// The subject is compared as written (removing `foo.*` does not touch `foo.bar`). Nodes
    /// left without subscriptions or children are pruned, so the index's size follows its
    /// contents. Returns whether a subscription was removed; an invalid subject just returns
    /// `false`. O(depth + subscriptions on that exact subject and group).
    pub fn remove(&mut self, subject: &[u8], queue_group: Option<&[u8]>, value: &T) -> bool {
        let removed = remove_in_level(&mut self.root, subject, queue_group, value);
        if removed {
            self.len -= 1;
        }
        removed
    }

    /// The number of subscriptions (each insertion counts once). O(1).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index holds no subscription. O(1).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills `out` with every subscription matching the literal `subject`.
    ///
    /// `out` is cleared first. It then holds the plain subscriptions, and for each distinct queue
    /// group name the members from every matching node merged into one group: `q.x` and `q.*`
    /// subscribed in group `G` form one group `G` for `q.x`, as in nats-server's sublist. Picking
    /// one member per group is the caller's job. The order of the entries is unspecified.
    ///
    /// `subject` should be a valid publish subject; its tokens are compared literally, so a
    /// wildcard token in it only matches wildcard subscriptions (see [`matches`](super::matches())).
    ///
    /// Cost: O(depth × wildcard branching + matches), plus a linear search per merged group
    /// over the groups found so far. Reusing `out` keeps its buffers, so in steady state `find`
    /// does not allocate.
    pub fn find(&self, subject: &[u8], out: &mut Matches<T>) {
        out.clear();
        collect_level(&self.root, subject, out);
    }
}

impl<T: Clone + PartialEq> Default for SubjectIndex<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Splits off the first token; the rest is `None` when `subject` had a single token.
fn split_first_token(subject: &[u8]) -> (&[u8], Option<&[u8]>) {
    match subject.iter().position(|&b| b == SEPARATOR) {
        Some(at) => (&subject[..at], Some(&subject[at + 1..])),
        None => (subject, None),
    }
}

/// Adds to `out` every match of `subject` (the not yet consumed tokens) below `level`.
///
/// Recursion depth is bounded by the trie's depth, i.e. by the longest subscribed subject.
fn collect_level<T: Clone>(level: &Level<T>, subject: &[u8], out: &mut Matches<T>) {
    let (token, rest) = split_first_token(subject);
    if let Some(node) = &level.full_wildcard {
        // At least one token remains here: `token` itself.
        out.add_node(node);
    }
    if let Some(node) = &level.single_wildcard {
        collect_node(node, rest, out);
    }
    if let Some(node) = level.literal.get(token) {
        collect_node(node, rest, out);
    }
}

fn collect_node<T: Clone>(node: &Node<T>, rest: Option<&[u8]>, out: &mut Matches<T>) {
    match rest {
        None => out.add_node(node),
        Some(rest) => collect_level(&node.next, rest, out),
    }
}

/// Removes one subscription below `level`, pruning the child it went through if left empty.
fn remove_in_level<T: PartialEq>(
    level: &mut Level<T>,
    subject: &[u8],
    queue_group: Option<&[u8]>,
    value: &T,
) -> bool {
    let (token, rest) = split_first_token(subject);
    match token {
        SINGLE_WILDCARD | FULL_WILDCARD => {
            let slot = if token == SINGLE_WILDCARD {
                &mut level.single_wildcard
            } else {
                &mut level.full_wildcard
            };
            let Some(node) = slot.as_deref_mut() else {
                return false;
            };
            let removed = remove_in_node(node, rest, queue_group, value);
            if removed && node.is_empty() {
                *slot = None;
            }
            removed
        }
        literal => {
            let Some(node) = level.literal.get_mut(literal) else {
                return false;
            };
            let removed = remove_in_node(node, rest, queue_group, value);
            if removed && node.is_empty() {
                level.literal.remove(literal);
            }
            removed
        }
    }
}

fn remove_in_node<T: PartialEq>(
    node: &mut Node<T>,
    rest: Option<&[u8]>,
    queue_group: Option<&[u8]>,
    value: &T,
) -> bool {
    if let Some(rest) = rest {
        return remove_in_level(&mut node.next, rest, queue_group, value);
    }
    match queue_group {
        None => remove_first(&mut node.plain, value),
        Some(name) => {
            let Some(at) = node.queues.iter().position(|(group, _)| **group == *name) else {
                return false;
            };
            let removed = remove_first(&mut node.queues[at].1, value);
            if node.queues[at].1.is_empty() {
                node.queues.remove(at);
            }
            removed
        }
    }
}

/// Removes the first element equal to `value`, keeping the order of the others.
fn remove_first<T: PartialEq>(values: &mut Vec<T>, value: &T) -> bool {
    match values.iter().position(|v| v == value) {
        Some(at) => {
            values.remove(at);
            true
        }
        None => false,
    }
}

/// The result of [`SubjectIndex::find`]: plain subscriptions and queue groups.
///
/// Meant to be kept and reused across lookups: [`clear`](Self::clear) keeps every buffer's
/// capacity (including the group name buffers and member lists), so a reused `Matches` stops
/// allocating once it has seen the largest result.
#[derive(Debug, Clone)]
pub struct Matches<T> {
    plain: Vec<T>,
    /// Group slots; only the first `groups_len` are in use. Slots past it are kept, emptied,
    /// for their capacity.
    groups: Vec<(Vec<u8>, Vec<T>)>,
    groups_len: usize,
}

impl<T> Matches<T> {
    /// Creates an empty result. Does not allocate.
    pub fn new() -> Self {
        Self {
            plain: Vec::new(),
            groups: Vec::new(),
            groups_len: 0,
        }
    }

    /// The plain (non-queue) subscriptions; every one of them gets a copy of the message.
    pub fn plain(&self) -> &[T] {
        &self.plain
    }

    /// The queue groups as `(group name, members)`, one entry per distinct group name, each with
    /// at least one member; one member of each should get a copy of the message.
    pub fn groups(&self) -> impl Iterator<Item = (&[u8], &[T])> {
        self.groups[..self.groups_len]
            .iter()
            .map(|(name, members)| (&name[..], &members[..]))
    }

    /// The members of the group `name`, if it matched. O(groups).
    pub fn group(&self, name: &[u8]) -> Option<&[T]> {
        self.groups()
            .find(|(group, _)| *group == name)
            .map(|(_, members)| members)
    }

    /// Whether nothing matched: no plain subscription and no group.
    pub fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.groups_len == 0
    }

    /// Empties the result, keeping every buffer's capacity.
    pub fn clear(&mut self) {
        self.plain.clear();
        for (name, members) in &mut self.groups[..self.groups_len] {
            name.clear();
            members.clear();
        }
        self.groups_len = 0;
    }

    /// The member list for group `name`, reusing a spare slot when a new group appears.
    fn group_members(&mut self, name: &[u8]) -> &mut Vec<T> {
        let at = match self.groups[..self.groups_len]
            .iter()
            .position(|(group, _)| group == name)
        {
            Some(at) => at,
            None => {
                if self.groups_len == self.groups.len() {
                    self.groups.push((Vec::new(), Vec::new()));
                }
                let at = self.groups_len;
                self.groups[at].0.extend_from_slice(name);
                self.groups_len += 1;
                at
            }
        };
        &mut self.groups[at].1
    }
}

impl<T: Clone> Matches<T> {
    fn add_node(&mut self, node: &Node<T>) {
        self.plain.extend_from_slice(&node.plain);
        for (name, members) in &node.queues {
            self.group_members(name).extend_from_slice(members);
        }
    }
}

impl<T> Default for Matches<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(subs: &[(&str, Option<&str>, u32)]) -> SubjectIndex<u32> {
        let mut index = SubjectIndex::new();
        for &(subject, group, value) in subs {
            index
                .insert(subject.as_bytes(), group.map(str::as_bytes), value)
                .unwrap();
        }
        index
    }

    /// Plain values sorted, and groups as (name, sorted members) sorted by name.
    fn found(index: &SubjectIndex<u32>, subject: &str) -> (Vec<u32>, Vec<(String, Vec<u32>)>) {
        let mut out = Matches::new();
        index.find(subject.as_bytes(), &mut out);
        let mut plain = out.plain().to_vec();
        plain.sort_unstable();
        let mut groups: Vec<_> = out
            .groups()
            .map(|(name, members)| {
                let mut members = members.to_vec();
                members.sort_unstable();
                (String::from_utf8(name.to_vec()).unwrap(), members)
            })
            .collect();
        groups.sort();
        (plain, groups)
    }

    fn plain_only(index: &SubjectIndex<u32>, subject: &str) -> Vec<u32> {
        let (plain, groups) = found(index, subject);
        assert!(
            groups.is_empty(),
            "unexpected groups for {subject}: {groups:?}"
        );
        plain
    }

    fn node_count(level: &Level<u32>) -> usize {
        let children = level
            .literal
            .values()
            .chain(level.single_wildcard.as_deref())
            .chain(level.full_wildcard.as_deref());
        children.map(|node| 1 + node_count(&node.next)).sum()
    }

    #[test]
    fn plain_and_wildcard_subscriptions() {
        let index = index(&[
            (">", None, 1),
            ("foo", None, 2),
            ("foo.bar", None, 3),
            ("foo.*", None, 4),
            ("foo.>", None, 5),
            ("*.bar", None, 6),
            ("foo.bar.baz", None, 7),
            ("*.*.baz", None, 8),
            ("foo.*.>", None, 9),
        ]);
        assert_eq!(index.len(), 9);
        assert_eq!(plain_only(&index, "foo"), [1, 2]);
        assert_eq!(plain_only(&index, "foo.bar"), [1, 3, 4, 5, 6]);
        assert_eq!(plain_only(&index, "foo.baz"), [1, 4, 5]);
        assert_eq!(plain_only(&index, "foo.bar.baz"), [1, 5, 7, 8, 9]);
        assert_eq!(plain_only(&index, "nope"), [1]);
        assert_eq!(plain_only(&index, "x.bar"), [1, 6]);
        // A literal `*` token in a publish only meets wildcard subscriptions.
        assert_eq!(plain_only(&index, "foo.*"), [1, 4, 5]);
        // `a*` is a literal token.
        assert_eq!(plain_only(&index, "foo*"), [1]);
    }

    #[test]
    fn no_match_is_empty() {
        let index = index(&[("foo.bar", None, 1), ("foo.*", Some("g"), 2)]);
        let mut out = Matches::new();
        index.find(b"bar.foo", &mut out);
        assert!(out.is_empty());
        index.find(b"foo", &mut out);
        assert!(out.is_empty());
        index.find(b"foo.bar.baz", &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn same_value_under_two_matching_subjects_yields_two_entries() {
        let index = index(&[
            ("orders.*", None, 7),
            ("orders.>", None, 7),
            ("orders.new", None, 7),
        ]);
        assert_eq!(plain_only(&index, "orders.new"), [7, 7, 7]);
        assert_eq!(plain_only(&index, "orders.old"), [7, 7]);
    }

    #[test]
    fn same_subscription_twice_counts_twice() {
        let mut index = index(&[("a", None, 1), ("a", None, 1)]);
        assert_eq!(index.len(), 2);
        assert_eq!(plain_only(&index, "a"), [1, 1]);
        assert!(index.remove(b"a", None, &1));
        assert_eq!(plain_only(&index, "a"), [1]);
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn queue_groups_merge_by_name_across_nodes() {
        let index = index(&[
            ("q.x", Some("G"), 1),
            ("q.*", Some("G"), 2),
            ("q.>", Some("G"), 3),
            ("q.x", Some("H"), 4),
            ("q.*", Some("H"), 5),
            ("q.x", None, 6),
            ("q.y", Some("G"), 7),
        ]);
        let (plain, groups) = found(&index, "q.x");
        assert_eq!(plain, [6]);
        assert_eq!(
            groups,
            [
                ("G".to_owned(), vec![1, 2, 3]),
                ("H".to_owned(), vec![4, 5])
            ]
        );

        let (plain, groups) = found(&index, "q.y");
        assert!(plain.is_empty());
        assert_eq!(
            groups,
            [("G".to_owned(), vec![2, 3, 7]), ("H".to_owned(), vec![5])]
        );

        let (plain, groups) = found(&index, "q.y.z");
        assert!(plain.is_empty());
        assert_eq!(groups, [("G".to_owned(), vec![3])]);
    }

    #[test]
    fn plain_and_queue_subscription_of_one_value_both_match() {
        let index = index(&[("foo", None, 1), ("foo", Some("g"), 1)]);
        let mut out = Matches::new();
        index.find(b"foo", &mut out);
        assert_eq!(out.plain(), [1]);
        assert_eq!(out.group(b"g"), Some(&[1][..]));
        assert_eq!(out.group(b"h"), None);
    }

    #[test]
    fn remove_stops_matches_and_prunes() {
        let mut index = index(&[
            ("a.b.c", None, 1),
            ("a.*.c", Some("g"), 2),
            ("a.>", None, 3),
            ("a.b", None, 4),
        ]);
        assert_eq!(node_count(&index.root), 6); // a, a.b, a.b.c, a.*, a.*.c, a.>
                                                // Wrong value, group, or subject: nothing removed.
        assert!(!index.remove(b"a.b.c", None, &9));
        assert!(!index.remove(b"a.b.c", Some(b"g"), &1));
        assert!(!index.remove(b"a.*.c", None, &2));
        assert!(!index.remove(b"a.b.x", None, &1));
        assert!(!index.remove(b"a..c", None, &1));
        assert_eq!(index.len(), 4);

        assert!(index.remove(b"a.b.c", None, &1));
        assert!(!index.remove(b"a.b.c", None, &1));
        let (plain, groups) = found(&index, "a.b.c");
        assert_eq!(plain, [3]);
        assert_eq!(groups, [("g".to_owned(), vec![2])]);
        assert_eq!(node_count(&index.root), 5); // a.b.c pruned, a.b keeps value 4

        assert!(index.remove(b"a.*.c", Some(b"g"), &2));
        assert_eq!(plain_only(&index, "a.b.c"), [3]);
        assert_eq!(node_count(&index.root), 3); // a.* and a.*.c pruned

        assert!(index.remove(b"a.>", None, &3));
        assert!(plain_only(&index, "a.b.c").is_empty());
        assert_eq!(plain_only(&index, "a.b"), [4]);
        assert_eq!(node_count(&index.root), 2);

        assert!(index.remove(b"a.b", None, &4));
        assert!(index.is_empty());
        assert!(index.root.is_empty());
    }

    #[test]
    fn remove_keeps_nodes_that_still_have_children() {
        let mut index = index(&[("a", None, 1), ("a.b", None, 2)]);
        assert!(index.remove(b"a", None, &1));
        assert_eq!(plain_only(&index, "a.b"), [2]);
        assert_eq!(node_count(&index.root), 2);
        assert!(index.remove(b"a.b", None, &2));
        assert_eq!(node_count(&index.root), 0);
    }

    #[test]
    fn insert_rejects_invalid_subjects_and_groups() {
        let mut index = SubjectIndex::new();
        for subject in [
            &b""[..],
            b"foo..bar",
            b".a",
            b"a.",
            b"a.>.b",
            b">.a",
            b"a b",
            b"a\tb",
        ] {
            assert_eq!(index.insert(subject, None, 1), Err(SubjectError::Invalid));
        }
        assert_eq!(
            index.insert(b"a", Some(b""), 1),
            Err(SubjectError::InvalidQueueGroup)
        );
        assert_eq!(
            index.insert(b"a", Some(b"g h"), 1),
            Err(SubjectError::InvalidQueueGroup)
        );
        assert!(index.is_empty());
        assert!(index.root.is_empty());
    }

    #[test]
    fn matches_reuse_keeps_capacity() {
        let index = index(&[
            ("a.*", None, 1),
            ("a.b", None, 2),
            ("a.b", Some("g1"), 3),
            ("a.*", Some("g2"), 4),
            ("a.>", Some("g1"), 5),
        ]);
        let mut out = Matches::new();
        index.find(b"a.b", &mut out);
        let plain_capacity = out.plain.capacity();
        let group_capacities: Vec<_> = out
            .groups
            .iter()
            .map(|(n, m)| (n.capacity(), m.capacity()))
            .collect();
        assert_eq!(out.groups().count(), 2);

        index.find(b"a.c", &mut out); // smaller result
        assert_eq!(out.plain(), [1]);
        assert_eq!(out.group(b"g1"), Some(&[5][..]));
        assert_eq!(out.group(b"g2"), Some(&[4][..]));

        index.find(b"a.b", &mut out);
        assert_eq!(out.plain.capacity(), plain_capacity);
        let again: Vec<_> = out
            .groups
            .iter()
            .map(|(n, m)| (n.capacity(), m.capacity()))
            .collect();
        assert_eq!(again, group_capacities);
        out.clear();
        assert!(out.is_empty());
        assert_eq!(out.groups().count(), 0);
    }

    proptest::proptest! {
        /// Removing every subscription, in any order, leaves no node behind.
        #[test]
        fn removing_everything_prunes_every_node(
            subs in proptest::collection::vec(
                (
                    proptest::collection::vec(
                        proptest::sample::select(vec!["a", "b", "*", ">"]), 1..=4),
                    proptest::option::of(proptest::sample::select(vec!["g", "h"])),
                    0u32..3,
                ),
                1..30,
            ),
            order in proptest::collection::vec(proptest::prelude::any::<usize>(), 30),
        ) {
            let mut subs: Vec<(String, Option<&str>, u32)> = subs
                .into_iter()
                .filter_map(|(tokens, group, value)| {
                    let subject = tokens.join(".");
                    is_valid_subject(subject.as_bytes()).then_some((subject, group, value))
                })
                .collect();
            let mut index = SubjectIndex::new();
            for (subject, group, value) in &subs {
                index.insert(subject.as_bytes(), group.map(str::as_bytes), *value).unwrap();
            }
            for pick in order {
                if subs.is_empty() {
                    break;
                }
                let (subject, group, value) = subs.remove(pick % subs.len());
                proptest::prop_assert!(
                    index.remove(subject.as_bytes(), group.map(str::as_bytes), &value)
                );
            }
            proptest::prop_assert_eq!(index.len(), 0);
            proptest::prop_assert_eq!(node_count(&index.root), 0);
        }
    }
}
