"""Figures for hostile clients against `vox serve -m demo` (a subprocess on a free port, default limits):

  1. server RSS over N mixed requests (good greedy ones, bad JSON, lone surrogates, oversized bodies,
     clients leaving mid-stream, WebSocket sessions with garbage frames), sampled every 100;
  2. the slowloris bound: K connections that send part of their headers and stop, and K stalled bodies;
     seconds until the server closed each (the documented bound is --header-timeout / --body-timeout).

    .venv/bin/python -m benchmarks serve_hostile_figures [--requests 1000] [--slowloris 40] [--stalled 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

GOOD = {"model": "demo", "input": "Hello there, good client.", "greedy": True, "max_frames": 8,
        "response_format": "pcm"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_request(i: int, url: str, port: int) -> str:
    rng = random.Random(i)
    kind = rng.randrange(6)
    if kind == 0:
        return str(httpx.post(f"{url}/v1/audio/speech", json=GOOD, timeout=60).status_code)
    if kind == 1:
        body = rng.choice([b"{", b"[]", b'{"model": "demo", "input": "Hi \\ud800."}', b"\xff\xfe",
                           b'{"model": "demo", "input": "\\u0001\\u0002"}'])
        return str(httpx.post(f"{url}/v1/audio/speech", content=body,
                              headers={"content-type": "application/json"}, timeout=30).status_code)
    if kind == 2:
        return str(httpx.post(f"{url}/v1/audio/speech", content=b"x" * 70_000,
                              headers={"content-type": "application/json"}, timeout=30).status_code)
    if kind == 3:  # leave mid-stream
        data = json.dumps({**GOOD, "max_frames": 40}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
            s.recv(4096)
        return "left"
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{port}/v1/audio/speech/live") as ws:
        if kind == 4:
            ws.send(json.dumps({"type": "start", "response_format": "pcm", "greedy": True, "max_frames": 6}))
            ws.send(rng.choice([b"\x00binary", '{"type": "nope"}', "Some words here. "]))
            ws.send('{"type": "end"}')
        else:
            ws.send(rng.choice([b"\x01", "not json", "[]"]))
        try:
            while True:
                ws.recv(timeout=30)
        except Exception:  # noqa: BLE001 - the close ends the session
            return "ws"


def slow_clients(port: int, n: int, stalled: bool) -> list[float]:
    socks, t0 = [], time.monotonic()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        if stalled:
            s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: 500\r\n\r\n{\"model\"")
        else:
            s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\n")
        socks.append(s)
    closed: list[float] = []

    def wait(s: socket.socket) -> None:
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass
        closed.append(time.monotonic() - t0)
        s.close()

    threads = [threading.Thread(target=wait, args=(s,)) for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return sorted(closed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--slowloris", type=int, default=40)
    ap.add_argument("--stalled", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    port = free_port()
    env = {**os.environ, "VOX_CACHE": tempfile.mkdtemp(prefix="vox-figures-")}
    argv = [sys.executable, "-m", "voxcli", "serve", "-m", "demo", "--port", str(port), "-q"]
    proc = subprocess.Popen(argv, env=env, cwd=Path(__file__).parent.parent)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        httpx.post(f"{url}/v1/audio/speech", json=GOOD, timeout=60)  # warm
        rss = [rss_mb(proc.pid)]
        t0 = time.monotonic()
        outcomes: dict[str, int] = {}
        with ThreadPoolExecutor(args.concurrency) as pool:
            for start in range(0, args.requests, 100):
                chunk = range(start, min(start + 100, args.requests))
                for o in pool.map(lambda i: one_request(i, url, port), chunk):
                    outcomes[o] = outcomes.get(o, 0) + 1
                rss.append(rss_mb(proc.pid))
        wall = time.monotonic() - t0
        print(f"{args.requests} mixed requests in {wall:.1f} s, outcomes {dict(sorted(outcomes.items()))}")
        print("server RSS (MB) every 100 requests: " + " ".join(f"{x:.0f}" for x in rss)
              + f"  (growth {rss[-1] - rss[0]:+.0f} MB, last 500 {rss[-1] - rss[len(rss) // 2]:+.0f} MB)")
        for stalled, n in ((False, args.slowloris), (True, args.stalled)):
            closed = slow_clients(port, n, stalled)
            what = "stalled bodies" if stalled else "slowloris connections"
            print(f"{n} {what}: closed after {closed[0]:.2f} .. {closed[-1]:.2f} s (bound 10 s)")
        print("health:", httpx.get(f"{url}/health").json())
    finally:
        proc.terminate()
        proc.wait(20)


if __name__ == "__main__":
    main()
