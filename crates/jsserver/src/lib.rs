//! `jsserver`: a JetStream server speaking the NATS client protocol.
