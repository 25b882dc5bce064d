"""The capacity bound (voxcli/bound.py) of a bench run: the engine config's cost profile and lane split,
and the workload's average request as the bench sends it (its frames, and the prompt tokens and rows the
sim's stand-in program prepares for its text)."""

from __future__ import annotations

from collections.abc import Sequence

from voxcli.bench.client import _frames
from voxcli.bench.workloads import Utterance
from voxcli.bound import CapacityBound, capacity_bound
from voxcli.config import EngineConfig


def request_shape(model: str, utterances: Sequence[Utterance], frame_rate: float,
                  frames_scale: float = 1.0, max_frames: int | None = None,
                 first_chunk: int = 0) -> tuple[float, float, int, int, float]:
    """(frames, prompt tokens per sequence, rows, lead steps, frames of its first chunk of at most
    `first_chunk` frames) of the workload's average request."""
    from voxcli.engine.synthetic import SyntheticProgram
    from voxcli.models.base import InputError, SynthesisRequest
    from voxcli.models.registry import sim_spec_for

    program = SyntheticProgram.for_model(model)
    frames = [_frames(u, frame_rate, frames_scale, max_frames) for u in utterances]
    prompts = []
    for u in utterances:
        try:
            prompts.append(program.prepare(SynthesisRequest(text=u.text)))
        except InputError:  # a text the engine would refuse costs the device nothing
            pass
    if not prompts:
        raise ValueError("no utterance of the workload is a request the engine accepts; the bound needs one")
    return (sum(frames) / len(frames), sum(p.length for p in prompts) / len(prompts),
            max(p.width for p in prompts), sim_spec_for(model).lead_steps,
            sum(min(f, first_chunk) for f in frames) / len(frames))


def config_bound(config: EngineConfig, utterances: Sequence[Utterance], frame_rate: float,
                 frames_scale: float = 1.0, max_frames: int | None = None) -> CapacityBound | None:
    """The bound of `config` (its gpu profile, policy's lane split, buckets) for the workload; None when
    the config names no cost profile (a cpu/cuda run without --gpu)."""
    if not config.gpu:
        return None
    from voxcli.engine.estimates import load_profile
    from voxcli.engine.lanes import lane_layout
    from voxcli.models.registry import sim_spec_for

    profile = load_profile(config)
    layout = lane_layout(config)
    first = config.chunk_or(sim_spec_for(config.model).chunk).first if "urgent" in layout.lanes else 0
    frames, tokens, width, lead, urgent = request_shape(config.model, utterances, frame_rate, frames_scale,
                                                        max_frames, first)
    return capacity_bound(profile, lm_sms=layout.sms["lm"], codec_sms=layout.sms["background"],
                          frames_per_request=frames, prompt_tokens=tokens, width=width, lead_steps=lead,
                          urgent_frames=urgent, prefill_batch=config.max_prefill_batch,
                          max_decode_batch=min(max(config.decode_buckets), config.max_running),
                          max_codec_batch=max(config.background_buckets),
                          partitioned=layout.partitioned)


def split_bounds_table(profile, points, model: str, utterances: Sequence[Utterance], frame_rate: float):
    """`vox profile`: the backbone's and the codec's bound (req/s) on every split (policy full: the urgent
    lane decodes first chunks), and which binds."""
    from voxcli.models.registry import sim_spec_for
    from voxcli.tables import figure_table

    first = sim_spec_for(model).chunk.first
    frames, tokens, width, lead, urgent = request_shape(model, utterances, frame_rate, first_chunk=first)
    rows = []
    for p in points:
        b = capacity_bound(profile, lm_sms=p.lm_sms, codec_sms=p.codec_sms, frames_per_request=frames,
                           prompt_tokens=tokens, width=width, lead_steps=lead,
                           urgent_frames=urgent)
        rows.append([p.name, f"{b.lm_rps:.1f}", str(b.best_decode_batch), f"{b.codec_rps:.1f}",
                     str(b.best_codec_batch), f"{b.rps:.1f}", b.binding])
    return figure_table(f"capacity bound per split ({frames:.0f} frames, {tokens:.0f} prompt tokens per "
                        "request; voxcli/bound.py)",
                        ("split", "LM bound", "at batch", "codec bound", "at chunks", "bound req/s", "binds"),
                        rows, left=("binds",))
