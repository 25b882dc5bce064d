"""Bench targets on the wall clock for `vox bench --url`: a running `vox serve` over HTTP, and, to compare
against on the same workload in the same run, the in-process engine on the real-time simulated GPU.

The HTTP target asks for raw PCM (`response_format=pcm`, streamed) with the workload's exact frame count
(`fixed_frames`) and seed, so server and in-process engine generate the same requests; each received
piece of the body is timestamped on arrival, exactly like the in-process client's chunks. A 503 is a
rejection (counted apart), like the engine's own refusal.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from voxcli.bench.client import Arrival, EngineTarget, RealtimeTarget


class HttpRejected(Exception):
    """The server answered 503 (its admission refused the request)."""


class HttpFailed(Exception):
    """The server answered with an error other than 503, or the body broke off."""


class HttpTarget(RealtimeTarget):
    """The stdlib's http.client, one connection per request: a benchmark client should cost the host as
    little as it can (httpx spends about three times the CPU per streamed piece), since on a small machine
    the client's CPU is taken from the server it measures."""

    def __init__(self, url: str, name: str = "http", seed: int = 0, api_key: str | None = None,
                 voice: str | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise HttpFailed(f"--url {url!r}: give an http://host:port address of a vox serve.")
        self.url = url.rstrip("/")
        self.host, self.port = parts.hostname, parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.name, self.seed, self.voice = name, seed, voice
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        try:
            models = self._get_json("/v1/models")
            self.model = models["data"][0]["id"]
            self.sample_rate = int(self._get_json("/v1/audio/voices")["sample_rate"])
        except OSError as e:
            raise HttpFailed(f"cannot reach {self.url}: {e}; start it with vox serve (or check "
                             "--url).") from None

    def _connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=600)

    def _get_json(self, path: str) -> Any:
        conn = self._connection()
        try:
            conn.request("GET", self.prefix + path, headers=self.headers)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status == 401:
            raise HttpFailed(f"{self.url} needs an API key: pass --api-key (or set VOX_API_KEY).")
        if resp.status != 200:
            raise HttpFailed(f"GET {path} answered HTTP {resp.status}: {body[:200]!r}")
        return json.loads(body)

    def stream(self, arrival: Arrival) -> Iterator[float]:
        body: dict[str, Any] = {"model": self.model, "input": arrival.utterance.text,
                                "response_format": "pcm", "fixed_frames": arrival.frames,
                                "seed": self.seed + arrival.index}
        if self.voice:
            body["voice"] = self.voice
        bytes_per_s = 2.0 * self.sample_rate
        conn = self._connection()
        try:
            conn.request("POST", self.prefix + "/v1/audio/speech", body=json.dumps(body).encode(),
                         headers=self.headers)
            resp = conn.getresponse()
            if resp.status == 503:
                raise HttpRejected(json.loads(resp.read())["error"]["message"])
            if resp.status != 200:
                raise HttpFailed(f"HTTP {resp.status}: {resp.read()[:200]!r}")
            while True:
                piece = resp.read1(1 << 20)  # whatever has arrived: one chunk of the chunked body
                if not piece:
                    break
                yield len(piece) / bytes_per_s
        except http.client.IncompleteRead as e:
            raise HttpFailed(f"the response broke off after {len(e.partial)} bytes") from None
        finally:
            conn.close()

    def close(self) -> None:
        pass


def realtime_sim_target(model: str, gpu: str, overrides: list[str] | None, seed: int = 0,
                        name: str = "in-process") -> RealtimeTarget:
    """The in-process engine over the real-time simulated GPU (what `vox serve --executor sim` runs)."""
    from voxcli.session import sim_session

    session = sim_session(model, gpu, overrides)
    return EngineTarget(session.engine, name, seed)


def url_sweep_targets(url: str, api_key: str | None, executor: str, gpu: str, model: str,
                      overrides: list[str] | None, compare: bool, seed: int) -> tuple[list[str], Any]:
    """The variants of `vox bench --url`: the server, after the in-process engine on the real-time sim
    when `compare` and the executor is sim (the server's settings must match: same model, gpu, --set)."""
    names = ["in-process", "http"] if compare and executor == "sim" else ["http"]

    def make(variant: Any) -> RealtimeTarget:
        if variant.label == "in-process":
            return realtime_sim_target(model, gpu, overrides, seed)
        return HttpTarget(url, "http", seed, api_key)

    return names, make


def run_paired_sweep(make_target: Any, variants: Sequence[Any], spec: Any, utterances: Sequence[Any],
                     meta: dict[str, Any] | None = None, progress: Any = None) -> Any:
    """`run_sweep` for a side-by-side comparison on a shared host: every target is up for the whole run
    and the variants take turns at each rate (A, B at one rate, B, A at the next), so a change in the
    host's background load lands on both instead of on whichever ran second. Same schedules, same
    metrics, same stop rule (per variant) as `run_sweep`."""
    from voxcli.bench.client import burst, schedule
    from voxcli.bench.metrics import rate_result, should_stop
    from voxcli.bench.sweep import SweepResult, VariantSweep

    targets = {}
    try:
        for v in variants:
            targets[v.label] = make_target(v)
        sweeps = {v.label: VariantSweep(v) for v in variants}
        kw = dict(frame_rate=spec.frame_rate, frames_scale=spec.frames_scale, max_frames=spec.max_frames)
        started = time.perf_counter()
        if spec.warmup > 0:
            for v in variants:
                targets[v.label].play(burst(spec.warmup, utterances, spec.seed, **kw), spec.timeout_s)
        for i, rate in enumerate(spec.rates):
            turn = list(variants) if i % 2 == 0 else list(reversed(variants))
            for v in turn:
                out = sweeps[v.label]
                if out.stopped_after is not None:
                    continue
                records = []
                for k in range(spec.seeds):  # pooled for the table, kept apart for one capacity per seed
                    arrivals = schedule(rate, spec.duration_s, (spec.seed + k) * 1000 + i, utterances, **kw)
                    mine = targets[v.label].play(arrivals, spec.timeout_s)
                    records.extend(mine)
                    while len(out.per_seed) <= k:
                        out.per_seed.append([])
                    out.per_seed[k].append(rate_result(rate, mine, spec.duration_s, spec.ttfa_target_s,
                                                       spec.stall_s))
                res = rate_result(rate, records, spec.duration_s * spec.seeds, spec.ttfa_target_s,
                                  spec.stall_s)
                out.results.append(res)
                if progress:
                    progress(out, res)
                if (spec.stop_rule and should_stop(res)) or (spec.stop_below is not None
                                                              and res.attainment < spec.stop_below):
                    out.stopped_after = rate
        wall = time.perf_counter() - started
        for out in sweeps.values():
            out.wall_s = wall
        return SweepResult(spec, [sweeps[v.label] for v in variants], dict(meta or {}))
    finally:
        for t in targets.values():
            t.close()
