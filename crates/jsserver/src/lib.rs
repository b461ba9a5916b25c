//! `jsserver`: a JetStream server speaking the NATS client protocol.

pub mod cli;
pub mod conf;
pub mod logging;
pub mod options;
