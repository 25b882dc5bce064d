"""Text streaming in, measured: time from the first sentence's last character to the first audio.

    python -m benchmarks measure_text_in --trials 20 --token-ms 20

An LLM is imitated by sending a text word by word (each word with its leading space, as LLM tokenizers
emit them) every `--token-ms`. Two paths, both over the real-time simulated H100:
  ws     the WebSocket endpoint of `vox serve` (a server on a free loopback port, in this process)
  stdin  what `vox say -` runs: a pipe read as it arrives (read_fragments) into speak_live
For each trial: t_end = when the sentence's final "." was sent, t_next = when the next word (which
confirms the sentence end) was sent, t_audio = first audio received. Prints p50/p90 of t_audio - t_end
and t_audio - t_next, and, for reference, the TTFA of the same sentence sent whole over HTTP.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time

TEXT = "The quick brown fox jumps over the lazy dog. Then it ran off into the quiet forest to sleep."


def words(text: str) -> list[str]:
    parts = text.split(" ")
    return [parts[0]] + [" " + p for p in parts[1:]]


def first_end(tokens: list[str]) -> int:
    return next(i for i, t in enumerate(tokens) if t.endswith("."))


def ws_trial(url: str, token_s: float) -> tuple[float, float]:
    from websockets.sync.client import connect

    tokens = words(TEXT)
    k = first_end(tokens)
    sent: dict[int, float] = {}
    with connect(url.replace("http", "ws") + "/v1/audio/speech/live") as ws:
        ws.send(json.dumps({"type": "start", "response_format": "pcm"}))

        def feed() -> None:
            for i, tok in enumerate(tokens):
                sent[i] = time.perf_counter()
                ws.send(json.dumps({"type": "text", "text": tok}))
                time.sleep(token_s)
            ws.send(json.dumps({"type": "end"}))

        feeder = threading.Thread(target=feed)
        feeder.start()
        t_audio = None
        while True:
            msg = ws.recv(timeout=30)
            if isinstance(msg, bytes):
                t_audio = t_audio or time.perf_counter()
            elif json.loads(msg)["type"] in ("done", "error"):
                break
        feeder.join()
    assert t_audio is not None
    return t_audio - sent[k], t_audio - sent[k + 1]


def stdin_trial(engine: object, token_s: float) -> tuple[float, float]:
    from voxcli.models.base import SynthesisRequest

    from voxcli.textstream import read_fragments, requests_from, sentences_from, speak_live

    tokens = words(TEXT)
    k = first_end(tokens)
    sent: dict[int, float] = {}
    r, w = os.pipe()

    def feed() -> None:
        for i, tok in enumerate(tokens):
            sent[i] = time.perf_counter()
            os.write(w, tok.encode())
            time.sleep(token_s)
        os.close(w)

    first: list[float] = []

    def on_audio(pcm: object) -> None:
        if not first:
            first.append(time.perf_counter())

    feeder = threading.Thread(target=feed)
    with os.fdopen(r, "r") as stream:
        feeder.start()
        reqs = requests_from(sentences_from(read_fragments(stream)), lambda s: SynthesisRequest(text=s))
        speak_live(engine, reqs, on_audio, 24000)
    feeder.join()
    return first[0] - sent[k], first[0] - sent[k + 1]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--token-ms", type=float, default=20.0)
    args = ap.parse_args()
    import httpx

    from tests.support.serve_util import running_server, sim_service

    token_s = args.token_ms / 1000
    service = sim_service()
    with running_server(service) as url:
        whole = []
        body = {"model": "qwen3-tts-1.7b", "input": TEXT.split(". ")[0] + ".", "response_format": "pcm"}
        with httpx.Client(timeout=30) as client:  # one client: building one costs more than a TTFA
            for _ in range(args.trials):
                t0 = time.perf_counter()
                with client.stream("POST", f"{url}/v1/audio/speech", json=body) as r:
                    next(r.iter_raw())
                    whole.append(time.perf_counter() - t0)
        ws = [ws_trial(url, token_s) for _ in range(args.trials)]
        stdin = [stdin_trial(service.engine, token_s) for _ in range(args.trials)]
    print(f"token interval {args.token_ms:g} ms, {args.trials} trials, real-time simulated H100, idle server")
    print(f"reference: TTFA of the first sentence sent whole over HTTP: p50 {pct(whole, .5):.1f} ms, "
          f"p90 {pct(whole, .9):.1f} ms")
    for name, rows in (("ws", ws), ("stdin", stdin)):
        end = [a for a, _ in rows]
        nxt = [b for _, b in rows]
        print(f"{name:5s}: last char -> first audio p50 {pct(end, .5):.1f} ms p90 {pct(end, .9):.1f} ms; "
              f"confirming word -> first audio p50 {pct(nxt, .5):.1f} ms p90 {pct(nxt, .9):.1f} ms")
    print(f"mean of all: {statistics.mean(a for a, _ in ws + stdin) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
