//! Accounts: each one its own subject space (a [`Router`] of its own) and, when enabled, its
//! own JetStream with its own limits, as nats-server's accounts (`server/accounts.go`).
//!
//! A server without an `accounts` block has one account, the global account `$G`, which holds
//! every client and, with JetStream on, every stream. With accounts configured, a client
//! works in the account of the user it logged in as (the `authorization` block's users stay
//! in `$G`); messages never cross from one account to another, and each account with
//! `jetstream` enabled has its own streams, stored under `<store_dir>/jetstream/<ACCOUNT>/`.

pub mod crossing;
#[cfg(test)]
mod graph_tests;
pub mod imports;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use imports::{Responses, ServiceImport, StreamImport, SubjectMap};

use jsproto::api::account::AccountLimits;

use crate::auth::accounts::{ClientLimits, ShareKind, GLOBAL_ACCOUNT};
use crate::auth::config::AuthOptions;
use crate::jetstream::JsStats;
use crate::router::{Counters, Router};

/// One account: its name, its router and its JetStream settings.
pub struct Account {
    name: Arc<str>,
    router: Router,
    jetstream: Option<AccountLimits>,
    js_stats: OnceLock<Arc<JsStats>>,
    limits: ClientLimits,
    /// Clients logged into the account now.
    connections: AtomicUsize,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account").field("name", &self.name).finish()
    }
}

impl Account {
    fn new(
        name: &str,
        counters: &Arc<Counters>,
        jetstream: Option<AccountLimits>,
        limits: ClientLimits,
    ) -> Self {
        Account {
            name: Arc::from(name),
            router: Router::with_counters(Arc::clone(counters)),
            jetstream,
            js_stats: OnceLock::new(),
            limits,
            connections: AtomicUsize::new(0),
        }
    }

    /// The account's client `limits`.
    pub fn limits(&self) -> &ClientLimits {
        &self.limits
    }

    /// Counts a client logging in; false (and not counted) when the account already has
    /// `max_connections` clients.
    pub fn add_connection(&self) -> bool {
        let max = self.limits.connections().unwrap_or(usize::MAX);
        self.connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// A client counted by [`Account::add_connection`] is gone.
    pub fn remove_connection(&self) {
        let _ = self
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// The account's name (`$G` for the global account).
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The router of the account's subject space.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The account's JetStream limits when JetStream is enabled for it (all `-1`: no
    /// limits), `None` when it is not. Only meaningful when the server runs JetStream.
    pub fn jetstream_limits(&self) -> Option<&AccountLimits> {
        self.jetstream.as_ref()
    }

    /// The account's JetStream usage counters, once its JetStream runs.
    pub fn jetstream_stats(&self) -> Option<&Arc<JsStats>> {
        self.js_stats.get()
    }

    /// Called once by JetStream when it starts for this account.
    pub fn set_jetstream_stats(&self, stats: Arc<JsStats>) {
        let _ = self.js_stats.set(stats);
    }
}

/// Every account of a server, by name; the global account is always there.
#[derive(Debug)]
pub struct Accounts {
    by_name: BTreeMap<Arc<str>, Arc<Account>>,
    global: Arc<Account>,
}

impl Accounts {
    /// The accounts of `auth` (its `accounts` block) plus the global account, every router
    /// counting into `counters`.
    ///
    /// JetStream, as nats-server decides it: with no accounts configured, the global account
    /// has it (without limits); otherwise exactly the accounts whose `jetstream` is enabled.
    pub fn new(auth: &AuthOptions, counters: &Arc<Counters>) -> Self {
        let global_js = auth.accounts.is_empty().then(AccountLimits::default);
        let global = Arc::new(Account::new(
            GLOBAL_ACCOUNT,
            counters,
            global_js,
            ClientLimits::default(),
        ));
        let mut by_name = BTreeMap::new();
        by_name.insert(Arc::clone(global.name()), Arc::clone(&global));
        for a in &auth.accounts {
            let account = Arc::new(Account::new(
                &a.name,
                counters,
                a.jetstream.clone(),
                a.limits,
            ));
            by_name.insert(Arc::clone(account.name()), account);
        }
        let accounts = Accounts { by_name, global };
        accounts.wire_imports(auth);
        accounts
    }

    /// Subscribes the internal handlers of every import ([`imports`]); the config checks
    /// ([`crate::auth::accounts::parse_accounts`]) made sure each names a defined account and
    /// lies within one of its exports.
    fn wire_imports(&self, auth: &AuthOptions) {
        for a in &auth.accounts {
            let importer = self.get(&a.name).expect("configured account");
            for i in &a.imports {
                let exporter = self.get(&i.account).expect("checked by the config");
                let export = auth
                    .accounts
                    .iter()
                    .find(|e| e.name == i.account)
                    .and_then(|e| {
                        e.exports.iter().find(|x| {
                            x.kind == i.kind
                                && jsproto::subject::is_subset(
                                    i.subject.as_bytes(),
                                    x.subject.as_bytes(),
                                )
                        })
                    })
                    .expect("checked by the config");
                match i.kind {
                    ShareKind::Stream => {
                        let map = if i.local == i.subject {
                            SubjectMap::Same
                        } else {
                            SubjectMap::new(&i.subject, &i.local).unwrap_or_else(|| {
                                let prefix = i.local.strip_suffix(&i.subject).unwrap_or_default();
                                SubjectMap::prefix(prefix.trim_end_matches('.'))
                            })
                        };
                        let handler = Arc::new(StreamImport {
                            to: Arc::clone(importer),
                            map,
                        });
                        exporter
                            .router()
                            .subscribe_internal(i.subject.as_bytes(), None, handler)
                            .expect("import subjects are checked");
                    }
                    ShareKind::Service => {
                        let responses = Arc::new(Responses::new(
                            Arc::clone(importer),
                            export.response,
                            export.threshold,
                        ));
                        exporter
                            .router()
                            .subscribe_internal(
                                &responses.subscription(),
                                None,
                                Arc::clone(&responses) as Arc<dyn crate::router::InternalHandler>,
                            )
                            .expect("response subjects are valid");
                        let handler = Arc::new(ServiceImport {
                            exporter: Arc::clone(exporter),
                            map: SubjectMap::new(&i.local, &i.subject).expect("checked"),
                            responses,
                        });
                        importer
                            .router()
                            .subscribe_internal(i.local.as_bytes(), None, handler)
                            .expect("import subjects are checked");
                    }
                }
            }
        }
    }

    /// The global account `$G`.
    pub fn global(&self) -> &Arc<Account> {
        &self.global
    }

    /// The account named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Account>> {
        self.by_name.get(name)
    }

    /// Every account, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Account>> {
        self.by_name.values()
    }
}
