#!/usr/bin/env python3
# The paced provider of bench/run.sh (case sse-paced): an HTTP/1.1 server
# (keep-alive) that answers every POST with the events of a stream file
# as text/event-stream, one event per write with GAP_MS between them, as
# real providers send a stream (one event per read on the gateway's
# side).  The request body is read and discarded.
#
#   bench/paced.py PORT STREAM_FILE GAP_MS [PROBE_LOG]
#
# With PROBE_LOG, a request with an X-Bench-Probe header is logged there
# as the mock provider logs it: "PROBE CONTENT_LENGTH".

import asyncio
import socket
import sys

port = int(sys.argv[1])
events = [e + "\n\n" for e in open(sys.argv[2], encoding="utf-8").read().split("\n\n")
          if e.strip()]
events = [e.encode() for e in events]
gap = float(sys.argv[3]) / 1000.0
probe_log = sys.argv[4] if len(sys.argv) > 4 else None

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")


async def serve(reader, writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            n = 0
            probe = None
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":", 1)[1])
                elif line.lower().startswith(b"x-bench-probe:"):
                    probe = line.split(b":", 1)[1].strip().decode()
            if probe and probe_log:
                with open(probe_log, "a") as f:
                    f.write("%s %d\n" % (probe, n))
            if n:
                await reader.readexactly(n)
            if head.startswith(b"GET / "):
                writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                await writer.drain()
                continue
            writer.write(HEAD)
            for i, e in enumerate(events):
                if i:
                    await asyncio.sleep(gap)
                writer.write(b"%x\r\n%s\r\n" % (len(e), e))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()

asyncio.run(main())
