#!/usr/bin/env python3
"""nats-py over WebSocket: python3 ws_client.py ws://HOST:PORT [CA]

With a CA file the URL is wss:// and the server's certificate is checked against it. Checks
core publish/subscribe, request/reply, a JetStream publish and its PubAck, a pull consumer's
fetch and ack, a key-value put and get, and a 1 MB message through the WebSocket both ways.
Prints a line starting with "OK" when everything held. Used by tests/websocket_clients.rs.
"""
import asyncio
import ssl
import sys

import nats
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def main(url, ca=None):
    tls = None
    if ca:
        tls = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    nc = await nats.connect(
        url, tls=tls, connect_timeout=5, max_reconnect_attempts=0, allow_reconnect=False
    )
    check(nc.is_connected, "connected")

    # Core publish/subscribe.
    sub = await nc.subscribe("ws.greet")
    await nc.flush()
    await nc.publish("ws.greet", b"hello over websocket", headers={"k": "v"})
    msg = await sub.next_msg(timeout=5)
    check(msg.data == b"hello over websocket", f"payload {msg.data!r}")
    check(msg.headers and msg.headers.get("k") == "v", f"headers {msg.headers!r}")

    # Request/reply.
    async def echo(m):
        await m.respond(b"echo: " + m.data)

    await nc.subscribe("ws.echo", cb=echo)
    reply = await nc.request("ws.echo", b"ping", timeout=5)
    check(reply.data == b"echo: ping", f"reply {reply.data!r}")

    # A payload far larger than any one read or frame: 1 MB out and back (under the
    # default max_payload of 1 MiB).
    big = bytes(range(256)) * 4000
    reply = await nc.request("ws.echo", big, timeout=10)
    check(reply.data == b"echo: " + big, f"big reply of {len(reply.data)} bytes")

    # JetStream: a publish with its PubAck.
    js = nc.jetstream(timeout=5)
    await js.add_stream(StreamConfig(name="WSORDERS", subjects=["wsorders.>"]))
    ack = await js.publish("wsorders.1", b"first")
    check(ack.stream == "WSORDERS" and ack.seq == 1, f"puback {ack}")
    for i in range(2, 6):
        ack = await js.publish(f"wsorders.{i}", f"order {i}".encode())
    check(ack.seq == 5, f"last puback {ack}")

    # A pull consumer: fetch and ack.
    psub = await js.pull_subscribe(
        "wsorders.>",
        durable="shipping",
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=30),
    )
    msgs = await psub.fetch(5, timeout=5)
    check([m.metadata.sequence.stream for m in msgs] == [1, 2, 3, 4, 5], "fetched 1..5")
    check(msgs[0].data == b"first", f"first {msgs[0].data!r}")
    for m in msgs:
        await m.ack_sync(timeout=5)
    info = await js.consumer_info("WSORDERS", "shipping")
    check(info.ack_floor.stream_seq == 5, f"ack floor {info.ack_floor}")
    check(info.num_ack_pending == 0, f"ack pending {info.num_ack_pending}")

    # Key-value: put and get.
    kv = await js.create_key_value(bucket="wsconfig")
    rev = await kv.put("color", b"blue")
    entry = await kv.get("color")
    check(entry.value == b"blue" and entry.revision == rev, f"kv entry {entry}")
    await kv.put("color", b"green")
    entry = await kv.get("color")
    check(entry.value == b"green", f"kv entry {entry}")

    await nc.drain()
    print("OK", url)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
