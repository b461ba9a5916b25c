//! `jsserver`: a JetStream server speaking the NATS client protocol.
//!
//! Layout:
//! - [`cli`], [`conf`], [`options`]: nats-server's flags and config file, merged into
//!   [`options::ServerOptions`] (flags win).
//! - [`auth`]: who may connect (users, passwords, tokens, nkeys) and what they may publish and
//!   subscribe to.
//! - [`tls`]: the `tls { }` block and `--tls*` flags, their certificates loaded for rustls,
//!   and what a client certificate names (`verify_and_map`).
//! - [`logging`]: log lines in nats-server's format; [`os_error`]: OS errors in Go's words.
//! - [`server`]: shared state, the accept loop, shutdown and lame-duck mode.
//! - [`signal`]: `--signal` (sending one to a running server) and the signals it traps;
//!   [`reload`]: what SIGHUP does with the config file.
//! - [`connection`]: one task pair per connection (reader applies ops, writer drains output),
//!   its read buffer, the reader's spin-before-block policy, and the bounded per-connection
//!   output buffer ([`connection::outbound`], slow-consumer detection).
//! - [`router`]: the subscription index every message goes through, client or internal.
//! - [`monitor`]: the HTTP monitoring endpoint.
//! - [`websocket`]: the `websocket { }` block (the listener itself is in [`connection`]).
//! - [`cluster`]: routes to the other servers of a cluster, interest propagation and
//!   message forwarding (core NATS; JetStream is not replicated).
//!
//! The pure protocol code (codec, subjects) lives in `jsproto`; this crate does the IO.

#![warn(missing_docs)]

pub mod account;
pub mod auth;
pub mod cli;
pub mod cluster;
pub mod conf;
pub mod connection;
pub mod jetstream;
pub mod logging;
pub mod monitor;
pub mod options;
pub mod os_error;
pub mod reload;
pub mod router;
pub mod server;
pub mod signal;
pub mod store;
pub mod system;
pub mod tls;
pub mod websocket;
