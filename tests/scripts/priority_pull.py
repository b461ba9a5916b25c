#!/usr/bin/env python3
"""nats-py against a consumer with priority groups (overflow). nats-py 2.16 has no priority
group parameter: its pull_subscribe fetch names no group and gets the server's
400 "Bad Request - Priority Group missing" as an error, and nothing is delivered. A pull
request that names the group (sent with nats-py's request) is served, min_pending gates a
standby worker, and its acks work through nats-py's Msg.ack.
Prints OK on success; run as: priority_pull.py nats://host:port"""
import asyncio
import json
import sys

import nats
from nats.js.errors import APIError


async def main(url):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="PRIO", subjects=["prio.>"])
    config = {
        "durable_name": "jobs",
        "ack_policy": "explicit",
        "priority_policy": "overflow",
        "priority_groups": ["jobs"],
    }
    resp = await nc.request(
        "$JS.API.CONSUMER.CREATE.PRIO.jobs",
        json.dumps({"stream_name": "PRIO", "config": config}).encode(),
    )
    created = json.loads(resp.data)
    assert created.get("config", {}).get("priority_groups") == ["jobs"], created
    for i in range(3):
        await js.publish("prio.job", b"job%d" % i)

    psub = await js.pull_subscribe_bind("jobs", stream="PRIO")
    try:
        msgs = await psub.fetch(1, timeout=2)
        raise AssertionError("fetch without a group got %r" % msgs)
    except APIError as err:
        assert err.code == 400, err
        assert "Priority Group missing" in (err.description or ""), err
    info = await js.consumer_info("PRIO", "jobs")
    assert info.delivered.stream_seq == 0, info

    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    # A standby worker: only while more than 5 are pending (3 are): no message.
    standby = {"batch": 1, "group": "jobs", "min_pending": 5, "no_wait": True}
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.PRIO.jobs", json.dumps(standby).encode(), reply=inbox)
    msg = await sub.next_msg(timeout=2)
    assert msg.headers and msg.headers.get("Status") == "404", (msg.headers, msg.data)
    # The main worker names the group and gets the first job.
    main_pull = {"batch": 1, "group": "jobs", "expires": 2_000_000_000}
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.PRIO.jobs", json.dumps(main_pull).encode(), reply=inbox)
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"job0", (msg.headers, msg.data)
    assert msg.metadata.sequence.stream == 1, msg.metadata
    await msg.ack_sync()
    info = await js.consumer_info("PRIO", "jobs")
    assert info.ack_floor.stream_seq == 1 and info.num_ack_pending == 0, info
    await nc.close()
    print("OK")


asyncio.run(main(sys.argv[1]))
