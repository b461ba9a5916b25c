//! `jsserver`: a JetStream server speaking the NATS client protocol.
//!
//! Layout:
//! - [`cli`], [`conf`], [`options`]: nats-server's flags and config file, merged into
//!   [`options::ServerOptions`] (flags win).
//! - [`logging`]: log lines in nats-server's format.
//! - [`server`]: shared state, the accept loop, shutdown.
//! - [`client`]: one task pair per connection (reader applies ops, writer drains output).
//! - [`router`]: the subscription index every message goes through, client or internal.
//! - [`outbound`]: the bounded per-connection output buffer (slow-consumer detection).
//! - [`monitor`]: the HTTP monitoring endpoint.
//!
//! The pure protocol code (codec, subjects) lives in `jsproto`; this crate does the IO.

#![warn(missing_docs)]

pub mod cli;
pub mod client;
pub mod conf;
mod idle_spin;
pub mod jetstream;
pub mod logging;
pub mod monitor;
pub mod options;
pub mod outbound;
pub mod router;
pub mod server;
pub mod store;
