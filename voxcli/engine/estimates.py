"""Latency estimates for scheduling decisions, over a per-stage CostProfile.

The scheduler asks: how long is one decode step for n rows, a prefill of t tokens, a codec batch on the
urgent / background lane. Answers are cached per batch size (decisions must stay cheap). Where the
profile comes from:
  - `config.gpu` names `recipes/gpus/<gpu>.toml` (sim and cuda);
  - otherwise `default_profile()`, an H100-like table from the design paper's micro measurements;
  - real-clock executors (cpu) can `observe()` completed batches: a per-stage correction factor
    (exponential average of measured / predicted) calibrates the table to the machine online.
The sim never observes (its profile is the truth), so sim decisions stay reproducible."""

from __future__ import annotations

from voxcli.config import ConfigError, EngineConfig, recipe_path
from voxcli.engine.executors.base import Work
from voxcli.engine.lanes import LaneLayout, lane_layout
from voxcli.sim.cost import CostProfile

_DEFAULT = {
    "gpu": {"name": "default-h100-like", "sms": 132, "interference": 1.35},
    "stages": {
        # one backbone step incl. depth transformer: flat at small batch, grows with rows
        "decode": {"batch": [1, 8, 64, 256], "ms": [6.0, 6.5, 9.0, 16.0],
                   "sm": [24, 64, 96, 132], "speed": [0.35, 0.8, 0.93, 1.0]},
        "prefill": {"batch": [1, 4], "ms": [8.0, 10.0], "per_token_ms": 0.01},
        # codec batch of chunks of 10 frames; 24 SMs: 16 chunks 49 ms vs 10 ms whole (paper §2)
        "codec": {"batch": [1, 16], "ms": [1.9, 10.0], "frames_ref": 10,
                  "sm": [24, 32, 64, 132], "speed": [0.3, 0.38, 0.62, 1.0]},
    },
}


def default_profile() -> CostProfile:
    return CostProfile.from_dict(_DEFAULT, default_name="default")


def profile_name(config: EngineConfig) -> str:
    """`gpus/<gpu>`, or the profile the model's registration names (`SimModel.gpu_profile`, e.g.
    `gpus/<gpu>-dia-1.6b`: its costs differ, so never silently the shared profile)."""
    from voxcli.models.registry import find_sim_model

    found = find_sim_model(config.model) if config.model else None
    pattern = found[1].gpu_profile if found is not None else "{gpu}"
    return "gpus/" + pattern.format(gpu=config.gpu)


def load_profile(config: EngineConfig) -> CostProfile:
    if not config.gpu:
        return default_profile()
    name = profile_name(config)
    try:
        path = recipe_path(name)
    except ConfigError as e:
        raise ConfigError(f"no cost profile {name!r} for gpu {config.gpu!r} and model {config.model!r}: add "
                          f"recipes/{name}.toml or leave `gpu` empty for the built-in default ({e})") from e
    return CostProfile.from_toml(path)


class LatencyEstimator:
    def __init__(self, profile: CostProfile, config: EngineConfig, layout: LaneLayout | None = None,
                 frames_per_chunk: int | None = None) -> None:
        self.profile = profile
        self.layout = layout or lane_layout(config)
        self.config = config
        # Codec cost scales with the frames of a chunk; with no explicit schedule (the engine resolves the
        # model's before building its estimator) chunks count as the profile measured them.
        codec = profile.stages.get("codec")
        steady = config.chunk.steady if config.chunk is not None else None
        self.frames_per_chunk = frames_per_chunk or steady or (codec.frames_ref if codec else 0) or 1
        self._scale = {"prefill": 1.0, "decode": 1.0, "codec": 1.0}
        self.version = 0  # bumped whenever an estimate may change (observe): callers may cache until then
        self._cache: dict[tuple, float] = {}
        self._decode_buckets = config.decode_buckets

    def _lat(self, stage: str, batch: float, sms: int | None, tokens: int = 0, frames: int = 0) -> float:
        key = (stage, batch, sms, tokens, frames)
        v = self._cache.get(key)
        if v is None:
            known = stage in self.profile.stages
            v = self.profile.latency(stage, batch, sms, tokens, frames) if known else 0.0
            self._cache[key] = v
        return v * self._scale[stage]

    def decode_step(self, rows: int) -> float:
        return self._lat("decode", max(1, rows), self.layout.sms.get("lm"))

    def prefill(self, tokens: int, rows: int = 1) -> float:
        return self._lat("prefill", max(1, rows), None, tokens=tokens)

    def codec(self, lane: str, chunks: int, frames: int | None = None) -> float:
        if frames is None:
            frames = chunks * self.frames_per_chunk
        return self._lat("codec", max(1, chunks), self.layout.sms.get(lane), frames=frames)

    def predict(self, work: Work) -> float:
        if work.stage == "decode":
            return self.decode_step(work.bucket)
        if work.stage == "prefill":
            return self.prefill(work.tokens, work.bucket)  # rows: a CFG pair counts 2
        return self.codec(work.lane, work.bucket, work.frames)

    def observe(self, work: Work, seconds: float, weight: float = 0.2) -> None:
        """Online calibration from a measured batch (real-clock executors only)."""
        base = self.predict(work) / self._scale[work.stage]
        if base <= 0 or seconds <= 0:
            return
        s = self._scale[work.stage]
        self._scale[work.stage] = (1 - weight) * s + weight * (seconds / base)
        self.version += 1
