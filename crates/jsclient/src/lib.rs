//! `jsclient`: a tokio client for NATS and JetStream, built on `jsproto`'s codec.
//!
//! The API follows async-nats, so its users feel at home:
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use futures_util::StreamExt;
//!
//! let client = jsclient::connect("nats://127.0.0.1:4222").await?;
//! let mut sub = client.subscribe("greet.*").await?;
//! client.publish("greet.joe", "hello".into()).await?;
//! let msg = sub.next().await.expect("subscription open");
//! assert_eq!(&msg.payload[..], b"hello");
//!
//! let js = jsclient::jetstream::new(client);
//! let ack = js.publish("orders.1", "order".into()).await?.await?;
//! println!("stored as {} in {}", ack.seq, ack.stream);
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! * [`ConnectOptions`] / [`connect`]: servers, identity, credentials, keepalive and reconnect.
//! * [`Client`]: publish, subscribe (with queue groups), request, flush, drain. One background
//!   task per connection owns the socket (`connection`); handles talk to it over a channel.
//! * [`Subscriber`]: a `Stream` of [`Message`]s.
//! * [`jetstream`]: the JetStream context (publish with PubAck, streams, consumers, pull
//!   consumers with `fetch`/`batch`/`next`/`messages`, acks and message metadata).
//!
//! Authentication: user and password, token, an nkey seed (the client signs the server's
//! nonce), or a creds file with a user JWT and its seed, for servers in operator mode
//! ([`ConnectOptions::credentials_file`]); see [`ConnectOptions`]. TLS: `tls://` URLs, or a
//! server that requires it, with a CA file and a client certificate
//! ([`ConnectOptions::add_root_certificates`], [`ConnectOptions::add_client_certificate`],
//! [`ConnectOptions::tls_first`]). What it never does: push consumers, key-value or object
//! stores.
//! Durations are [`std::time::Duration`]s everywhere; they are nanoseconds only on the wire.
#![warn(missing_docs)]

mod client;
mod connection;
mod creds;
mod error;
pub mod jetstream;
mod options;
mod tls;

#[cfg(test)]
mod tests;

pub use client::{Client, Message, Subscriber};
pub use connection::State;
pub use error::{ClientError, ConnectError, RequestError};
pub use jsproto::headers::Headers;
pub use options::{ConnectOptions, ServerAddr};

/// Connects with default options to the comma-separated server list `urls`
/// (`nats://host:port`, `host:port`, `host`). See [`ConnectOptions::connect`].
///
/// # Errors
///
/// [`ConnectError`] when no server could be reached.
pub async fn connect(urls: impl AsRef<str>) -> Result<Client, ConnectError> {
    ConnectOptions::new().connect(urls).await
}
