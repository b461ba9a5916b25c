//! Streams: the pure parts of storing a JetStream stream.
//!
//! [`record`] is the byte layout of the file store's segment files (message records, delete
//! tombstones, sequence markers and erased fillers), with a per-record CRC-32 checksum. The
//! stores themselves (memory and file) live in `jsserver::store`, which does the IO; this module
//! only turns records into bytes and back.

pub mod record;
pub mod store;
