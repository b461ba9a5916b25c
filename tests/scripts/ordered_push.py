#!/usr/bin/env python3
"""nats-py's ordered push consumer against a server: python3 ordered_push.py nats://HOST:PORT

`js.subscribe(subject, ordered_consumer=True, idle_heartbeat=0.5)` creates an ephemeral push
consumer (ack none, max_deliver 1, flow control, heartbeats). The script reads five messages,
deletes that consumer behind the client's back, publishes five more and expects the client to
notice the missing heartbeats, create a new consumer from the next stream sequence and read
the rest: ten messages, in order, none twice. Prints OK on success; exits 1 with the reason
otherwise. Used by tests/jetstream_push.rs.
"""
import asyncio
import json
import sys

import nats

URL = sys.argv[1] if len(sys.argv) > 1 else "nats://127.0.0.1:4222"


async def api(nc, subject, body=None):
    data = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request("$JS.API." + subject, data, timeout=5)
    return json.loads(reply.data)


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="ORDERED", subjects=["ordered.>"], storage="memory")
    for i in range(5):
        await js.publish("ordered.m", f"a{i}".encode())
    got = []
    arrived = asyncio.Event()

    async def cb(msg):
        got.append((msg.metadata.sequence.stream, msg.data.decode()))
        arrived.set()

    sub = await js.subscribe("ordered.>", cb=cb, ordered_consumer=True, idle_heartbeat=0.5)

    async def wait_for(n):
        deadline = asyncio.get_running_loop().time() + 20
        while len(got) < n:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise SystemExit(f"FAIL: {len(got)} of {n} messages arrived: {got}")
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), left)
            except asyncio.TimeoutError:
                pass

    await wait_for(5)
    names = (await api(nc, "CONSUMER.NAMES.ORDERED"))["consumers"]
    if len(names) != 1:
        raise SystemExit(f"FAIL: expected one consumer, got {names}")
    info = await api(nc, f"CONSUMER.INFO.ORDERED.{names[0]}")
    cfg = info["config"]
    if not (cfg.get("flow_control") and cfg.get("deliver_subject") and info.get("push_bound")):
        raise SystemExit(f"FAIL: not a bound push consumer with flow control: {info}")
    await api(nc, f"CONSUMER.DELETE.ORDERED.{names[0]}")
    for i in range(5):
        await js.publish("ordered.m", f"b{i}".encode())
    await wait_for(10)
    await asyncio.sleep(0.5)
    want = [(i + 1, f"a{i}") for i in range(5)] + [(i + 6, f"b{i}") for i in range(5)]
    if got != want:
        raise SystemExit(f"FAIL: got {got}, want {want}")
    await sub.unsubscribe()
    await js.delete_stream("ORDERED")
    await nc.close()
    print("OK")


asyncio.run(main())
