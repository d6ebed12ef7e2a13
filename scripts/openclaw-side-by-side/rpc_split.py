#!/usr/bin/env python3
"""Splits one RPC's round trip as the peer's bench_rpc.py measures it into its parts on the
client: from `req` sent to the answer's text in hand (gateway + socket + the websockets
library), and the client's own `json.loads` of that text. Same connection and handshake as
bench_rpc.py (the peer's client.py); its reader task is stopped so frames are read here.

  OC_PORT=… OC_TOKEN=… rpc_split.py LABEL METHOD '{params}' [--n 200] [--warmup 5] [--out F]
"""
import argparse, asyncio, json, os, statistics, sys, time, uuid

sys.path.insert(0, os.environ.get("OC_PEER", "/work/shared/peers/openclaw"))
from client import Client  # noqa: E402


def med(xs):
    return statistics.median(xs)


async def main(a):
    cl = Client(f"ws://127.0.0.1:{os.environ.get('OC_PORT', '18789')}", os.environ["OC_TOKEN"])
    await cl.connect()
    # The client's reader would consume the frames: read them here instead.
    cl._reader.cancel()
    try:
        await cl._reader
    except asyncio.CancelledError:
        pass
    params = json.loads(a.params)
    wire, parse, size = [], [], 0
    for i in range(a.warmup + a.n):
        rid = str(uuid.uuid4())
        req = json.dumps({"type": "req", "id": rid, "method": a.method, "params": params})
        t0 = time.perf_counter()
        await cl.ws.send(req)
        while True:
            raw = await cl.ws.recv()
            # Events (ticks, health) may come in between: find our answer without parsing.
            if rid in raw[:200] and '"res"' in raw[:200]:
                break
        t1 = time.perf_counter()
        msg = json.loads(raw)
        t2 = time.perf_counter()
        assert msg.get("ok"), msg
        if i >= a.warmup:
            wire.append((t1 - t0) * 1000)
            parse.append((t2 - t1) * 1000)
            size = len(raw)
    await cl.ws.close()
    line = (f"{a.label}: n={a.n} req->text median={med(wire):.3f} ms (min {min(wire):.3f}); "
            f"json.loads median={med(parse):.3f} ms; total median={med([w + p for w, p in zip(wire, parse)]):.3f} ms; "
            f"frame={size} bytes")
    print(line)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")


ap = argparse.ArgumentParser()
ap.add_argument("label"); ap.add_argument("method"); ap.add_argument("params", nargs="?", default="{}")
ap.add_argument("--n", type=int, default=200); ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--out")
asyncio.run(main(ap.parse_args()))
