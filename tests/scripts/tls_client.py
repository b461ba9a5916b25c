#!/usr/bin/env python3
"""nats-py over TLS with a client certificate: python3 tls_client.py tls://HOST:PORT CA CERT KEY

Connects with an ssl.SSLContext trusting CA and presenting CERT/KEY, answers requests on
"tls.ping" and sends one: prints "reply: pong over tls" on success. Used by tests/tls.rs.
"""
import asyncio
import ssl
import sys

import nats


async def main(url, ca, cert, key):
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    ctx.load_cert_chain(cert, key)
    nc = await nats.connect(url, tls=ctx, connect_timeout=5, max_reconnect_attempts=0)

    async def pong(msg):
        await msg.respond(b"pong over tls")

    await nc.subscribe("tls.ping", cb=pong)
    reply = await nc.request("tls.ping", b"ping", timeout=5)
    print("reply:", reply.data.decode())
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
