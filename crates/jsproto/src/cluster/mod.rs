//! The protocol between the servers of a cluster, and the bookkeeping of subject interest
//! that goes with it: no sockets, no tasks, no clock.
//!
//! - [`proto`]: the route protocol's ops ([`RouteOp`]), their framing ([`RouteCodec`], a
//!   tokio-util `Decoder`) and the encoders the server writes them with. The protocol is
//!   jsserver's own (it does not speak nats-server's route protocol); `docs/cluster.md`
//!   describes it.
//! - [`interest`]: what a node tells its peers ([`LocalInterest`]: counts of its clients'
//!   subscriptions per account, subject and queue group, so only the first and the last one
//!   are announced) and what it heard from one peer ([`RemoteInterest`]), plus the rule that
//!   picks which of two routes between the same pair of servers stays ([`keep_route`]).

pub mod interest;
pub mod proto;

pub use interest::{keep_route, InterestKey, LocalInterest, RemoteInterest};
pub use proto::{
    encode_hello, encode_ping, encode_pong, encode_raft, encode_raft_part, encode_rmsg,
    encode_route_err, encode_rs, encode_snapshot_part, Hello, RouteCodec, RouteError, RouteMsg,
    RouteOp,
};
