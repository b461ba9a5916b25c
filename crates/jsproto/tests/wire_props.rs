//! Property tests of the wire codec through its public API: random ops round-trip through
//! encode/decode in random chunks, a prefix of a valid stream is never an error, and arbitrary
//! bytes never panic the decoders nor make them wait for more than their limits allow.

use bytes::{Bytes, BytesMut};
use jsproto::wire::{
    ClientCodec, ClientOp, Connect, Info, Limits, Message, Publish, ServerCodec, ServerOp,
    OP_ALLOWANCE,
};
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder};

fn token() -> impl Strategy<Value = Bytes> {
    "[A-Za-z0-9_.$*>-]{1,16}".prop_map(Bytes::from)
}

fn sid() -> impl Strategy<Value = Bytes> {
    "[0-9a-z]{1,6}".prop_map(Bytes::from)
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

/// A header block as the codec hands it out: never empty (an empty block decodes as none,
/// as nats-server turns `HPUB s 0 n` into a plain message).
fn header_block() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 1..40).prop_map(Bytes::from)
}

fn connect() -> impl Strategy<Value = Connect> {
    let flag = || prop::option::of(any::<bool>());
    let text = || prop::option::of("[ -~]{0,12}");
    (
        flag(),
        flag(),
        flag(),
        flag(),
        prop::option::of(0i64..3),
        text(),
        text(),
    )
        .prop_map(
            |(verbose, echo, headers, no_responders, protocol, name, auth_token)| Connect {
                verbose,
                echo,
                headers,
                no_responders,
                protocol,
                name,
                auth_token,
                ..Connect::default()
            },
        )
}

fn info() -> impl Strategy<Value = Info> {
    (
        "[A-Z0-9]{1,56}",
        "[0-9.]{1,8}",
        any::<u16>(),
        any::<bool>(),
        any::<u64>(),
        prop::option::of(any::<u64>()),
    )
        .prop_map(
            |(server_id, version, port, jetstream, max_payload, client_id)| Info {
                server_name: server_id.clone(),
                server_id,
                version,
                proto: 1,
                port,
                headers: true,
                jetstream,
                max_payload,
                client_id,
                ..Info::default()
            },
        )
}

fn client_op() -> impl Strategy<Value = ClientOp> {
    prop_oneof![
        connect().prop_map(|c| ClientOp::Connect(Box::new(c))),
        (
            token(),
            prop::option::of(token()),
            prop::option::of(header_block()),
            bytes(64)
        )
            .prop_map(|(subject, reply, headers, payload)| {
                ClientOp::Pub(Publish {
                    subject,
                    reply,
                    headers,
                    payload,
                })
            }),
        (token(), prop::option::of(token()), sid()).prop_map(|(subject, queue_group, sid)| {
            ClientOp::Sub {
                subject,
                queue_group,
                sid,
            }
        }),
        (sid(), prop::option::of(1..=u64::MAX))
            .prop_map(|(sid, max_msgs)| ClientOp::Unsub { sid, max_msgs }),
        Just(ClientOp::Ping),
        Just(ClientOp::Pong),
    ]
}

fn server_op() -> impl Strategy<Value = ServerOp> {
    prop_oneof![
        info().prop_map(|i| ServerOp::Info(Box::new(i))),
        (
            token(),
            sid(),
            prop::option::of(token()),
            prop::option::of(header_block()),
            bytes(64)
        )
            .prop_map(|(subject, sid, reply, headers, payload)| {
                ServerOp::Msg(Message {
                    subject,
                    sid,
                    reply,
                    headers,
                    payload,
                })
            }),
        Just(ServerOp::Ping),
        Just(ServerOp::Pong),
        Just(ServerOp::Ok),
        "[ -~]{0,30}".prop_map(ServerOp::Err),
    ]
}

fn encode_client_ops(ops: &[ClientOp]) -> BytesMut {
    let mut buf = BytesMut::new();
    for op in ops {
        ClientCodec::new()
            .encode(op, &mut buf)
            .expect("encoding into memory");
    }
    buf
}

fn encode_server_ops(ops: &[ServerOp]) -> BytesMut {
    let mut buf = BytesMut::new();
    for op in ops {
        ServerCodec::default()
            .encode(op, &mut buf)
            .expect("encoding into memory");
    }
    buf
}

/// Cut points for `len` bytes: sorted, deduplicated offsets strictly inside.
fn cuts(len: usize, raw: &[usize]) -> Vec<usize> {
    let mut cuts: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Feeds `input` cut at `cuts`, decoding after each piece; returns the ops, the first error and
/// what is left in the buffer.
fn decode_in_pieces<D: Decoder>(
    codec: &mut D,
    input: &[u8],
    cuts: &[usize],
) -> (Vec<D::Item>, Option<D::Error>, BytesMut) {
    let mut buf = BytesMut::new();
    let mut ops = Vec::new();
    let mut start = 0;
    for end in cuts.iter().copied().chain([input.len()]) {
        buf.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(op)) => ops.push(op),
                Ok(None) => break,
                Err(err) => return (ops, Some(err), buf),
            }
        }
    }
    (ops, None, buf)
}

/// Feeds arbitrary bytes and checks the decoder never asks for more input while already holding
/// more than one maximal frame.
fn assert_bounded<D: Decoder>(mut codec: D, limits: Limits, input: &[u8], cuts: &[usize]) {
    // Longest control line (op name, blanks, arguments) + CRLF + largest body + CRLF.
    let bound = limits.max_control_line + OP_ALLOWANCE + 2 + limits.max_payload + 2;
    let mut buf = BytesMut::new();
    let mut start = 0;
    for end in cuts.iter().copied().chain([input.len()]) {
        buf.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    assert!(
                        buf.len() < bound,
                        "waiting with {} bytes buffered",
                        buf.len()
                    );
                    break;
                }
                Err(_) => return,
            }
        }
    }
}

proptest! {
    #[test]
    fn client_ops_round_trip_in_any_chunks(
        ops in prop::collection::vec(client_op(), 0..12),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let wire = encode_client_ops(&ops);
        let cuts = cuts(wire.len(), &raw_cuts);
        let (decoded, err, rest) = decode_in_pieces(&mut ServerCodec::default(), &wire, &cuts);
        prop_assert!(err.is_none(), "{err:?}");
        prop_assert_eq!(decoded, ops);
        prop_assert!(rest.is_empty());
    }

    #[test]
    fn server_ops_round_trip_in_any_chunks(
        ops in prop::collection::vec(server_op(), 0..12),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let wire = encode_server_ops(&ops);
        let cuts = cuts(wire.len(), &raw_cuts);
        let (decoded, err, rest) = decode_in_pieces(&mut ClientCodec::new(), &wire, &cuts);
        prop_assert!(err.is_none(), "{err:?}");
        prop_assert_eq!(decoded, ops);
        prop_assert!(rest.is_empty());
    }

    #[test]
    fn a_prefix_of_a_valid_stream_is_never_an_error(
        client in prop::collection::vec(client_op(), 1..8),
        server in prop::collection::vec(server_op(), 1..8),
        at in any::<usize>(),
    ) {
        let wire = encode_client_ops(&client);
        let prefix = &wire[..at % (wire.len() + 1)];
        let (decoded, err, _) = decode_in_pieces(&mut ServerCodec::default(), prefix, &[]);
        prop_assert!(err.is_none(), "{err:?}");
        prop_assert_eq!(&decoded[..], &client[..decoded.len()]);

        let wire = encode_server_ops(&server);
        let prefix = &wire[..at % (wire.len() + 1)];
        let (decoded, err, _) = decode_in_pieces(&mut ClientCodec::new(), prefix, &[]);
        prop_assert!(err.is_none(), "{err:?}");
        prop_assert_eq!(&decoded[..], &server[..decoded.len()]);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_stay_within_limits(
        input in prop::collection::vec(any::<u8>(), 0..512),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let limits = Limits { max_control_line: 32, max_payload: 64 };
        let cuts = cuts(input.len(), &raw_cuts);
        assert_bounded(ServerCodec::new(limits), limits, &input, &cuts);
        assert_bounded(ClientCodec::with_limits(limits), limits, &input, &cuts);
    }

    #[test]
    fn corrupted_streams_never_panic_and_stay_within_limits(
        ops in prop::collection::vec(client_op(), 1..8),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        // Valid ops with a few bytes overwritten reach deeper than random bytes do.
        let limits = Limits { max_control_line: 64, max_payload: 128 };
        let mut wire = encode_client_ops(&ops).to_vec();
        for (at, byte) in flips {
            let len = wire.len();
            wire[at % len] = byte;
        }
        let cuts = cuts(wire.len(), &raw_cuts);
        assert_bounded(ServerCodec::new(limits), limits, &wire, &cuts);
    }
}

#[test]
fn a_body_within_limits_is_awaited_and_one_beyond_is_refused() {
    let limits = Limits {
        max_control_line: 32,
        max_payload: 64,
    };
    let mut codec = ServerCodec::new(limits);
    let mut buf = BytesMut::from(&b"PUB a 64\r\n"[..]);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    let mut buf = BytesMut::from(&b"PUB a 65\r\n"[..]);
    assert!(ServerCodec::new(limits).decode(&mut buf).is_err());
}
