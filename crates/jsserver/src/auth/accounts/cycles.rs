//! Import cycles refused at start-up, as nats-server refuses them: it adds a config's
//! imports one by one, stream imports first, and refuses one that closes a loop with those
//! added before it (`checkStreamImportsForCycles`, `checkServiceImportsForCycles` in its
//! `server/accounts.go`), with `import forms a cycle`.
//!
//! The search is nats-server's, step for step, including what it leaves alone: it starts
//! from the exporting account with the importer marked as seen, follows the exporter's own
//! imports of the same kind whose subjects collide with the one in hand, and calls it a
//! cycle when one of them leads to an account already seen. An account importing its own
//! export is not caught (nothing of its own is added yet when its first import is checked),
//! and neither is a loop whose subjects do not collide as the search compares them; such
//! configs start, and the router bounds them at run time ([`crate::account::crossing`]).
//! nats-server adds the accounts in a random order (Go map iteration), so a few configs
//! (an account importing its own export that a third account imports too) are refused on
//! some starts only; here the order is the file's, always the same. A stream import that
//! repeats one of the same account (same exporter, same subject) is refused too, as
//! nats-server refuses it when adding (`stream import already exists`).

use std::collections::{BTreeMap, BTreeSet};

use jsproto::subject::{is_subset, overlaps};

use super::{AccountConfig, Import, ShareKind};

/// How many accounts one search may mark before it gives up (nats-server's
/// `MaxAccountCycleSearchDepth`): every step of the search marks one more, so its depth is
/// bounded by this too.
const MAX_SEARCH_DEPTH: usize = 1024;

/// Why an import is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    /// It closes a loop of imports (nats-server's `ErrImportFormsCycle`).
    FormsCycle,
    /// The search marked [`MAX_SEARCH_DEPTH`] accounts (nats-server's `ErrCycleSearchDepth`).
    SearchDepth,
    /// The account already imports this stream subject from this exporter (nats-server's
    /// `ErrStreamImportDuplicate`).
    Duplicate,
}

impl std::fmt::Display for AddError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AddError::FormsCycle => "import forms a cycle",
            AddError::SearchDepth => "search cycle depth exhausted",
            AddError::Duplicate => "stream import already exists",
        })
    }
}

/// The imports added so far, each under its importing account, in the order added.
pub struct Added<'a> {
    accounts: &'a [AccountConfig],
    by_importer: BTreeMap<&'a str, Vec<&'a Import>>,
}

impl<'a> Added<'a> {
    /// None added yet, of `accounts`.
    pub fn new(accounts: &'a [AccountConfig]) -> Self {
        Added {
            accounts,
            by_importer: BTreeMap::new(),
        }
    }

    /// Adds `import` of the account `importer` unless it closes a loop with the imports
    /// added before it (or, a stream import, repeats one). Its exporter is one of the
    /// accounts (checked before).
    ///
    /// # Errors
    /// [`AddError`], and the import is not added.
    pub fn add(&mut self, importer: &'a str, import: &'a Import) -> Result<(), AddError> {
        let exporter = import.account.as_str();
        let seen = || BTreeSet::from([importer]);
        match import.kind {
            // The subject in the importer's space first, then the exporter's, as nats-server.
            ShareKind::Stream => {
                self.search(ShareKind::Stream, exporter, &import.local, &mut seen())?;
                self.search(ShareKind::Stream, exporter, &import.subject, &mut seen())?;
                if self
                    .imports(importer, ShareKind::Stream)
                    .any(|i| i.account == import.account && i.subject == import.subject)
                {
                    return Err(AddError::Duplicate);
                }
            }
            ShareKind::Service => {
                self.search(ShareKind::Service, exporter, &import.local, &mut seen())?
            }
        }
        self.by_importer.entry(importer).or_default().push(import);
        Ok(())
    }

    /// The imports of `kind` added to `account`.
    fn imports(&self, account: &str, kind: ShareKind) -> impl Iterator<Item = &'a Import> + '_ {
        self.by_importer
            .get(account)
            .into_iter()
            .flatten()
            .copied()
            .filter(move |i| i.kind == kind)
    }

    /// nats-server's `checkStreamImportsForCycles` (`kind` stream) and
    /// `checkServiceImportsForCycles` (service): does `subject`, arriving at `account`, go on
    /// through `account`'s imports of `kind` whose subjects collide with it to an account
    /// already `seen`? A stream goes on only when one of `account`'s stream exports covers it,
    /// and is compared with the imports' subjects in `account`'s space; a service (a subject
    /// of the importer) with the imports' exporter-side subjects, as nats-server compares
    /// them.
    fn search(
        &self,
        kind: ShareKind,
        account: &'a str,
        subject: &'a str,
        seen: &mut BTreeSet<&'a str>,
    ) -> Result<(), AddError> {
        if seen.len() >= MAX_SEARCH_DEPTH {
            return Err(AddError::SearchDepth);
        }
        if kind == ShareKind::Stream && !self.exports_stream(account, subject) {
            return Ok(());
        }
        for si in self.imports(account, kind) {
            let compared = match kind {
                ShareKind::Stream => &si.local,
                ShareKind::Service => &si.subject,
            };
            if !overlaps(subject.as_bytes(), compared.as_bytes()) {
                continue;
            }
            if seen.contains(si.account.as_str()) {
                return Err(AddError::FormsCycle);
            }
            seen.insert(account);
            let next = if is_subset(si.local.as_bytes(), subject.as_bytes()) {
                &si.local
            } else {
                subject
            };
            self.search(kind, &si.account, next, seen)?;
        }
        Ok(())
    }

    /// One of `account`'s stream exports covers `subject`.
    fn exports_stream(&self, account: &str, subject: &str) -> bool {
        self.accounts
            .iter()
            .filter(|a| a.name == account)
            .flat_map(|a| &a.exports)
            .any(|e| {
                e.kind == ShareKind::Stream && is_subset(subject.as_bytes(), e.subject.as_bytes())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_accounts;

    /// The start-up error of an `accounts` block, if any.
    fn refusal(block: &str) -> Option<String> {
        let map = crate::conf::parse_str(block).expect("config syntax");
        parse_accounts(map.get("accounts").expect("accounts"))
            .err()
            .map(|e| e.to_string())
    }

    fn service(account: &str, subject: &str) -> String {
        format!("{{ service: {{ account: {account}, subject: \"{subject}\" }} }}")
    }

    /// `accounts { NAME: { exports: [..], imports: [..] } ... }`.
    fn block(accounts: &[(&str, &str, Vec<String>)]) -> String {
        let mut text = String::from("accounts {\n");
        for (name, exports, imports) in accounts {
            text += &format!(
                "  {name}: {{ exports: [ {exports} ], imports: [ {} ] }}\n",
                imports.join(", ")
            );
        }
        text + "}\n"
    }

    #[test]
    fn loops_nats_server_refuses() {
        let svc = "{ service: \"svc\" }";
        let both = block(&[
            ("A", svc, vec![service("B", "svc")]),
            ("B", svc, vec![service("A", "svc")]),
        ]);
        let e = refusal(&both).expect("refused");
        assert!(
            e.ends_with("Error adding service import \"svc\": import forms a cycle"),
            "{e}"
        );
        let three = block(&[
            ("A", svc, vec![service("B", "svc")]),
            ("B", svc, vec![service("C", "svc")]),
            ("C", svc, vec![service("A", "svc")]),
        ]);
        assert!(refusal(&three)
            .expect("refused")
            .contains("import forms a cycle"));
        let wild = "{ service: \"svc.>\" }";
        let wildcards = block(&[
            ("A", wild, vec![service("B", "svc.>")]),
            ("B", wild, vec![service("A", "svc.*")]),
        ]);
        let e = refusal(&wildcards).expect("refused");
        assert!(
            e.ends_with("Error adding service import \"svc.*\": import forms a cycle"),
            "{e}"
        );
        let stream = |account: &str| {
            format!("{{ stream: {{ account: {account}, subject: \"ev.>\" }}, prefix: p }}")
        };
        let ev = "{ stream: \">\" }";
        let streams = block(&[("A", ev, vec![stream("B")]), ("B", ev, vec![stream("A")])]);
        let e = refusal(&streams).expect("refused");
        assert!(
            e.ends_with("Error adding stream import \"ev.>\": import forms a cycle"),
            "{e}"
        );
    }

    #[test]
    fn a_stream_imported_twice_is_refused() {
        let twice = block(&[
            ("A", "{ stream: \"ev.>\" }", vec![]),
            (
                "B",
                "",
                vec![
                    "{ stream: { account: A, subject: \"ev.>\" } }".into(),
                    "{ stream: { account: A, subject: \"ev.>\" }, prefix: p }".into(),
                ],
            ),
        ]);
        let e = refusal(&twice).expect("refused");
        assert!(
            e.ends_with("Error adding stream import \"ev.>\": stream import already exists"),
            "{e}"
        );
    }

    #[test]
    fn what_nats_server_lets_start() {
        let svc = "{ service: \"svc\" }, { stream: \"ev.>\" }";
        // An account importing its own export, service and stream.
        let own = block(&[(
            "A",
            svc,
            vec![
                service("A", "svc"),
                "{ stream: { account: A, subject: \"ev.>\" } }".into(),
            ],
        )]);
        assert_eq!(refusal(&own), None);
        // A chain, and imports both ways of subjects that do not collide.
        let chain = block(&[
            ("A", svc, vec![]),
            ("B", svc, vec![service("A", "svc")]),
            ("C", "", vec![service("B", "svc")]),
        ]);
        assert_eq!(refusal(&chain), None);
        let apart = block(&[
            ("A", "{ service: \"a\" }", vec![service("B", "b")]),
            ("B", "{ service: \"b\" }", vec![service("A", "a")]),
        ]);
        assert_eq!(refusal(&apart), None);
    }

    #[test]
    fn a_search_too_deep_is_refused() {
        // N1 imports from N2, ..., each added before the one it leads to: the last import
        // added walks the whole chain.
        let n = super::MAX_SEARCH_DEPTH + 10;
        let accounts: Vec<(String, Vec<String>)> = (0..n)
            .rev()
            .map(|i| {
                let imports = if i + 1 < n {
                    vec![service(&format!("N{}", i + 1), "svc")]
                } else {
                    vec![]
                };
                (format!("N{i}"), imports)
            })
            .collect();
        let accounts: Vec<(&str, &str, Vec<String>)> = accounts
            .iter()
            .map(|(name, imports)| (name.as_str(), "{ service: \"svc\" }", imports.clone()))
            .collect();
        let e = refusal(&block(&accounts)).expect("refused");
        assert!(e.ends_with("search cycle depth exhausted"), "{e}");
    }
}
