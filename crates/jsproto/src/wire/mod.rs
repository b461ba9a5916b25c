//! The NATS client protocol codec.
