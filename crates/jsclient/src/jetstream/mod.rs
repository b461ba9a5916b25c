//! JetStream.
