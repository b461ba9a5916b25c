#!/usr/bin/env python3
"""nats-py push subscriptions as applications use them: js.subscribe with a durable and
manual acks (every message once, acked, nothing pending after), and two js.subscribe calls
in one queue group sharing a deliver_group consumer (each message to exactly one of them).
Prints OK on success; run as: push_subscribe.py nats://host:port"""
import asyncio
import sys

import nats


async def main(url):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="PYPUSH", subjects=["pypush.>"])
    for i in range(10):
        await js.publish("pypush.a", b"a%d" % i)

    got = []
    done = asyncio.Event()

    async def cb(msg):
        got.append(msg.metadata.sequence.stream)
        await msg.ack_sync()
        if len(got) == 10:
            done.set()

    sub = await js.subscribe("pypush.a", durable="dur", cb=cb, manual_ack=True)
    await asyncio.wait_for(done.wait(), 10)
    assert got == list(range(1, 11)), got
    info = await js.consumer_info("PYPUSH", "dur")
    assert info.num_ack_pending == 0 and info.delivered.stream_seq == 10, info
    await sub.unsubscribe()

    seen = {"x": [], "y": []}
    all_done = asyncio.Event()

    def member(name):
        async def cb(msg):
            seen[name].append(msg.metadata.sequence.stream)
            await msg.ack()
            if len(seen["x"]) + len(seen["y"]) == 20:
                all_done.set()
        return cb

    await js.subscribe("pypush.q", queue="workers", cb=member("x"))
    await js.subscribe("pypush.q", queue="workers", cb=member("y"))
    for i in range(20):
        await js.publish("pypush.q", b"q%d" % i)
    await asyncio.wait_for(all_done.wait(), 10)
    both = sorted(seen["x"] + seen["y"])
    assert both == list(range(11, 31)), both
    await js.delete_stream("PYPUSH")
    await nc.close()
    print("OK", len(seen["x"]), len(seen["y"]))


asyncio.run(asyncio.wait_for(main(sys.argv[1]), 30))
