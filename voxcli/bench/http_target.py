"""Bench targets on the wall clock for `vox bench --url`: a running `vox serve` over HTTP, and, to compare
against on the same workload in the same run, the in-process engine on the real-time simulated GPU.

The HTTP target asks for raw PCM (`response_format=pcm`, streamed) with the workload's exact frame count
(`fixed_frames`) and seed, so server and in-process engine generate the same requests; each received
piece of the body is timestamped on arrival, exactly like the in-process client's chunks. A 503 is a
rejection (counted apart), like the engine's own refusal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from voxcli.bench.client import Arrival, EngineTarget, RealtimeTarget


class HttpRejected(Exception):
    """The server answered 503 (its admission refused the request)."""


class HttpFailed(Exception):
    """The server answered with an error other than 503, or the body broke off."""


class HttpTarget(RealtimeTarget):
    def __init__(self, url: str, name: str = "http", seed: int = 0, api_key: str | None = None,
                 voice: str | None = None) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.name, self.seed, self.voice = name, seed, voice
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=512)
        self.client = httpx.Client(base_url=self.url, headers=headers, limits=limits,
                                   timeout=httpx.Timeout(600.0, connect=10.0))
        try:
            resp = self.client.get("/v1/models")
        except httpx.HTTPError as e:
            raise HttpFailed(f"cannot reach {self.url}: {e}; start it with vox serve (or check "
                             "--url).") from None
        if resp.status_code == 401:
            raise HttpFailed(f"{self.url} needs an API key: pass --api-key (or set VOX_API_KEY).")
        resp.raise_for_status()
        self.model = resp.json()["data"][0]["id"]
        self.sample_rate = int(self.client.get("/v1/audio/voices").json()["sample_rate"])

    def stream(self, arrival: Arrival) -> Iterator[float]:
        body: dict[str, Any] = {"model": self.model, "input": arrival.utterance.text,
                                "response_format": "pcm", "fixed_frames": arrival.frames,
                                "seed": self.seed + arrival.index}
        if self.voice:
            body["voice"] = self.voice
        bytes_per_s = 2.0 * self.sample_rate
        with self.client.stream("POST", "/v1/audio/speech", json=body) as resp:
            if resp.status_code == 503:
                resp.read()
                raise HttpRejected(resp.json()["error"]["message"])
            if resp.status_code != 200:
                resp.read()
                raise HttpFailed(f"HTTP {resp.status_code}: {resp.text[:200]}")
            for piece in resp.iter_raw():
                if piece:
                    yield len(piece) / bytes_per_s

    def close(self) -> None:
        self.client.close()


def realtime_sim_target(model: str, gpu: str, overrides: list[str] | None, seed: int = 0,
                        name: str = "in-process") -> RealtimeTarget:
    """The in-process engine over the real-time simulated GPU (what `vox serve --executor sim` runs)."""
    from voxcli.server.sessions import sim_session

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
