//! The `NATS/1.0` header block (filled in by the wire work).
