//! `jsclient`: the tokio NATS/JetStream client library and the `jsctl` command line.
//!
//! Not written yet: it arrives with the jsclient issue and will reuse `jsproto`'s codec.
#![warn(missing_docs)]
