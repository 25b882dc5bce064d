"""The capacity bound (voxcli/sim/bound.py) of a bench run: the engine config's cost profile and lane split,
and the workload's average request as the bench sends it (its frames, and the prompt tokens and rows the
sim's stand-in program prepares for its text)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

from voxcli.bench.client import utterance_frames
from voxcli.bench.metrics import TTFA_TARGET_S
from voxcli.bench.workloads import Utterance
from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.sim.bound import CapacityBound, capacity_bound, schedule_step_cap
from voxcli.sim.cost import CostProfile


class RequestShape(NamedTuple):
    """The workload's average request as the sim serves it."""

    frames: float
    tokens: float  # prompt tokens per sequence
    width: int  # rows (2: a CFG pair)
    lead: int  # frameless steps before the first frame
    urgent: float  # frames of its first chunk (at most `first_chunk`)
    cfg_shared: bool  # its pairs carry an unconditional key the sim's CFG sharing applies to


def request_shape(model: str, utterances: Sequence[Utterance], frame_rate: float,
                  frames_scale: float = 1.0, max_frames: int | None = None,
                  first_chunk: int = 0) -> RequestShape:
    """The workload's average request: its frames, prompt tokens per sequence, rows, lead steps, frames of
    its first chunk of at most `first_chunk` frames, and whether its CFG pairs share work."""
    from voxcli.models.base import InputError, SynthesisRequest
    from voxcli.models.registry import sim_spec_for
    from voxcli.sim.synthetic import SyntheticProgram

    program = SyntheticProgram.for_model(model)
    frames = [utterance_frames(u, frame_rate, frames_scale, max_frames) for u in utterances]
    prompts = []
    for u in utterances:
        try:
            prompts.append(program.prepare(SynthesisRequest(text=u.text)))
        except InputError:  # a text the engine would refuse costs the device nothing
            pass
    if not prompts:
        raise ValueError("no utterance of the workload is a request the engine accepts; the bound needs one")
    width = max(p.width for p in prompts)
    urgent = sum(min(f, first_chunk) for f in frames) / len(frames)
    shared = width == 2 and all(p.uncond_key is not None for p in prompts if p.width == 2)
    return RequestShape(sum(frames) / len(frames), sum(p.length for p in prompts) / len(prompts), width,
                        sim_spec_for(model).lead_steps, urgent, shared)


def schedule_sizes(schedule: ChunkSchedule, frames: float) -> list[int]:
    """The chunk sizes a request of `frames` frames is cut into (the last one whole)."""
    sizes: list[int] = []
    while sum(sizes) < frames:
        sizes.append(schedule.size(len(sizes)))
    return sizes


def config_bound(config: EngineConfig, utterances: Sequence[Utterance], frame_rate: float,
                 frames_scale: float = 1.0, max_frames: int | None = None,
                 ttfa_s: float = TTFA_TARGET_S, shape: RequestShape | None = None,
                 profile: CostProfile | None = None) -> CapacityBound | None:
    """The bound of `config` (its gpu profile, policy's lane split, buckets, first chunk) for the workload
    at the SLO's `ttfa_s`; None when the config names no cost profile (a cpu/cuda run without --gpu).
    `shape`: the workload's request shape when already computed for this config's model and first chunk
    (SplitBounds: one shape for every split); `profile`: a cost profile in place of the config's gpu's
    (`vox profile` on a measured one)."""
    if not config.gpu and profile is None:
        return None
    from voxcli.engine.estimates import load_profile
    from voxcli.engine.lanes import lane_layout
    from voxcli.models.registry import sim_spec_for

    profile = profile if profile is not None else load_profile(config)
    layout = lane_layout(config)
    schedule = config.chunk_or(sim_spec_for(config.model).chunk)
    first = schedule.first if "urgent" in layout.lanes else 0
    if shape is None:
        shape = request_shape(config.model, utterances, frame_rate, frames_scale, max_frames, first)
    bound = capacity_bound(profile, lm_sms=layout.sms["lm"], codec_sms=layout.sms["background"],
                           frames_per_request=shape.frames, prompt_tokens=shape.tokens, width=shape.width,
                           lead_steps=shape.lead, urgent_frames=shape.urgent,
                           prefill_batch=config.max_prefill_batch,
                           max_decode_batch=min(max(config.decode_buckets), config.max_running),
                           max_codec_batch=max(config.background_buckets),
                           partitioned=layout.partitioned, ttfa_s=ttfa_s, first_frames=schedule.first,
                           frame_s=1 / frame_rate, cfg_shared=shape.cfg_shared)
    hold = sim_spec_for(config.model).codec_lookahead_frames
    cap = schedule_step_cap(schedule_sizes(schedule, shape.frames), 1 / frame_rate, hold)
    return dataclasses.replace(bound, schedule_cap_s=cap)


class SplitBounds:
    """`vox profile`'s bound per split: `config_bound` of the very config `vox profile` simulates and
    writes for a split (the model's recipe, policy full, lm_sms/codec_sms set: split_search.split_overrides),
    so the split table, the bound table, the simulation and the written recipe share every assumption."""

    def __init__(self, config: EngineConfig, utterances: Sequence[Utterance], frame_rate: float,
                 profile: CostProfile | None = None) -> None:
        from voxcli.models.registry import sim_spec_for

        self.config = config.replace(policy="full")
        self.profile = profile
        # the SLO: the recipe's own TTFA target (1 s for a model that writes a text plan first), as the
        # simulation of the split counts it (voxcli/cli_bench.py _simulate_splits)
        self.ttfa_s = self.config.ttfa_target_s
        self.utterances = utterances
        self.frame_rate = frame_rate
        first = self.config.chunk_or(sim_spec_for(self.config.model).chunk).first  # full: an urgent lane
        self.shape = request_shape(self.config.model, utterances, frame_rate, first_chunk=first)
        self._memo: dict[tuple[int, int], CapacityBound] = {}

    def config_for(self, lm_sms: int, codec_sms: int) -> EngineConfig:
        return self.config.replace(lm_sms=lm_sms, codec_sms=codec_sms)

    def __call__(self, lm_sms: int, codec_sms: int) -> CapacityBound:
        key = (lm_sms, codec_sms)
        if key not in self._memo:
            bound = config_bound(self.config_for(lm_sms, codec_sms), self.utterances, self.frame_rate,
                                 ttfa_s=self.ttfa_s, shape=self.shape, profile=self.profile)
            if bound is None:
                raise ValueError("a split's bound needs a cost profile: the config names no gpu")
            self._memo[key] = bound
        return self._memo[key]

    def capacities(self, lm_sms: int, codec_sms: int) -> tuple[float, float]:
        """(backbone, codec) req/s of the split: what `voxcli.sim.splits.split_points` takes per split."""
        b = self(lm_sms, codec_sms)
        return b.lm_rps, b.codec_rps


def split_bounds_table(bounds: SplitBounds, points):
    """`vox profile`: the backbone's and the codec's bound (req/s) on every split, for the config it
    simulates and writes (policy full: the urgent lane decodes first chunks; the SLO's TTFA caps the
    step), and which binds."""
    from voxcli.tables import figure_table

    rows = []
    for p in points:
        b = bounds(p.lm_sms, p.codec_sms)
        rows.append([p.name, f"{b.lm_rps:.1f}", str(b.best_decode_batch), f"{b.codec_rps:.1f}",
                     str(b.best_codec_batch), f"{b.rps:.1f}", b.binding])
    shape, cfg = bounds.shape, bounds.config
    return figure_table(f"capacity bound per split ({shape.frames:.0f} frames, {shape.tokens:.0f} prompt "
                        f"tokens per request, TTFA <= {bounds.ttfa_s * 1e3:.0f} ms, first chunk "
                        f"{cfg.chunk_or(_model_chunk(cfg.model)).first} frames; voxcli/sim/bound.py)",
                        ("split", "LM bound", "at rows", "codec bound", "at chunks", "bound req/s", "binds"),
                        rows, left=("binds",))


def _model_chunk(model: str) -> ChunkSchedule:
    from voxcli.models.registry import sim_spec_for

    return sim_spec_for(model).chunk
