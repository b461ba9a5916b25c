//! Streams: the pure parts of a JetStream stream.
//!
//! * [`core`]: the stream's rules as a state machine ([`StreamCore`]): publish checks
//!   (`Nats-Expected-*`, the duplicate window, rollup, `Nats-TTL`), age and TTL expiry and
//!   subject delete markers, message delete, purge and config update, time passed in; one
//!   entry point for a replica, [`StreamCore::apply`] of a [`Command`].
//! * [`machine`]: the stream as one state machine ([`Stream`]): the rules and the consumers
//!   wired together, the output carried out by the caller ([`Stream::drive`]).
//! * [`entry`]: the stream's replicated log entry ([`Entry`]: every input that changes the
//!   stream, with the leader's time), applied by a replica with [`Stream::apply_entry`], and
//!   the snapshot a replica catches up from ([`StreamSnapshot`]).
//! * [`consumers`]: the stream's consumers as one state machine ([`ConsumerSet`]): fanout of
//!   stored messages by filter, pulls, acks, purges, retention removals, inactivity, pause.
//! * [`view`]: the stream as its consumers read it ([`StoreView`] over a store).
//! * [`store`]: the message store interface ([`store::MsgStore`]) the rules act on, its
//!   limits and lookup index, and the memory store. The file store, which owns files, is
//!   `jsserver::store::FileStore`.
//! * [`snapshot`]: a replica's snapshot as bytes ([`StreamSnapshot`] and the messages), what
//!   a Raft group hands a replica that is too far behind, and restores it from.
//! * [`record`]: the byte layout of the file store's segment files (message records, delete
//!   tombstones, sequence markers and erased fillers), with a per-record CRC-32 checksum.

pub mod consumers;
pub mod core;
pub mod entry;
pub mod machine;
pub mod record;
pub mod snapshot;
pub mod store;
pub mod view;

pub use self::consumers::{ActivityClocks, ConsumerEntry, ConsumerMeta, ConsumerSet};
pub use self::core::{Command, CoreSnapshot, Outcome, Publish, StreamCore, StreamEvent};
pub use self::entry::{
    Applied, ConsumerSnapshot, Entry, EntryBatch, EntryCodecError, EntryOutcome, EntryTime, Epoch,
    Op, StreamSnapshot,
};
pub use self::machine::{Context, Stream};
pub use self::view::StoreView;
