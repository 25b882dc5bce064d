"""Fault isolation (voxcli/engine/isolation.py): a row whose own data makes a stage raise fails alone.

Per family (the tiny Qwen3-TTS CustomVoice and the tiny Dia) and per stage (prefill, decode, codec): one
bad request batched with 7 good ones, all arriving together so they share every batch. The bad row's
data is made to break the REAL stage (values the checks would refuse, put straight into the prepared
prompt, or codes a codec refuses), the engine re-runs the batch's rows in parts on the same state, the bad
request fails with the stage's message, and the 7 good ones deliver exactly the audio of a run without
the bad request (within the batching-exactness bound, 1e-4). The engine runs the real program on the sim
executor: virtual time makes the batch composition deterministic, the stages are the real ones.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support.sim_real import run_together
from voxcli.models.base import SamplingParams, StepOutput, SynthesisRequest

from voxcli.config import ChunkSchedule
from voxcli.engine.isolation import is_device_fault, run_isolated

BAD = "bad"


# ------------------------------------------------------------------ the mechanism alone
def _fake_stage(bad: set[int], calls: list[list[int]]):
    def call(rows: list[int]) -> list[int]:
        calls.append(list(rows))
        hit = [r for r in rows if r in bad]
        if hit:
            raise ValueError(f"row {hit[0]} is bad")
        return [r * 10 for r in rows]
    return call


def test_bisect_finds_the_bad_rows_and_runs_each_good_row_once():
    calls: list[list[int]] = []
    out = run_isolated(_fake_stage({3, 6}, calls), list(range(8)))
    assert [r for r in out.results if not isinstance(r, BaseException)] == [0, 10, 20, 40, 50, 70]
    assert str(out.results[3]) == "row 3 is bad" and str(out.results[6]) == "row 6 is bad"
    ok_runs = [r for c in calls if not any(x in (3, 6) for x in c) for r in c]
    assert sorted(ok_runs) == [0, 1, 2, 4, 5, 7]  # every good row succeeded exactly once
    assert out.reruns == len(calls) - 1


def test_an_error_every_row_raises_fails_the_batch_with_the_original_error():
    calls: list[list[int]] = []
    with pytest.raises(ValueError, match="row 0 is bad"):
        run_isolated(_fake_stage(set(range(4)), calls), list(range(4)))
    assert len(calls) == 1 + 2 + 4  # the batch, its halves, the rows


def test_a_device_fault_is_never_rerun():
    calls = []

    def call(rows):
        calls.append(rows)
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="CUDA error"):
        run_isolated(call, [1, 2, 3])
    assert len(calls) == 1
    assert is_device_fault(MemoryError()) and not is_device_fault(ValueError("codes out of range"))


# ------------------------------------------------------------------ through the engine, per family
class Recorder:
    """Wraps a program's stages: records each call's batch (request ids of the rows) and whether it raised."""

    def __init__(self, program, slot_owner: dict[int, str]):
        self.calls: list[tuple[str, list[str], bool]] = []
        self.owner = slot_owner
        for stage in ("prefill", "decode", "codec"):
            setattr(program, stage, self._wrap(stage, getattr(program, stage)))

    def _wrap(self, stage, inner):
        def call(rows):
            if stage == "prefill":
                for r in rows:
                    self.owner[r.slot] = r.prompt.data.tag
            ids = [self.owner[r.slot] for r in rows]
            try:
                out = inner(rows)
            except Exception:
                self.calls.append((stage, ids, True))
                raise
            self.calls.append((stage, ids, False))
            return out
        return call


def _tagging_prepare(program, corrupt):
    """program.prepare, then the bad request's prepared prompt is corrupted by `corrupt(prompt)` (what the
    checks would have refused, put where the stages read it); every prompt is tagged with its request id."""
    inner = program.prepare

    def prepare(request):
        prompt = corrupt(program, inner, request) if request.request_id == BAD else inner(request)
        prompt.data = _Tagged(prompt.data, request.request_id)
        return prompt
    program.prepare = prepare


class _Tagged:
    """A prepared prompt's data with the request id beside it (attribute access goes to the data)."""

    def __init__(self, data, tag):
        self.__dict__["_data"], self.__dict__["tag"] = data, tag

    def __getattr__(self, name):
        return getattr(self.__dict__["_data"], name)

    def __setattr__(self, name, value):
        setattr(self.__dict__["_data"], name, value)


def _check_isolated(program, chunk, good: list[SynthesisRequest], bad: SynthesisRequest, stage: str,
                    message: str, corrupt) -> None:
    owner: dict[int, str] = {}
    _tagging_prepare(program, corrupt)
    rec = Recorder(program, owner)
    mixed = good[:3] + [bad] + good[3:]
    streams = run_together(program, chunk, mixed)
    by_id = {r.request_id: s for r, s in zip(mixed, streams, strict=True)}
    assert by_id[BAD].status == "failed", (by_id[BAD].status, by_id[BAD].reason)
    assert by_id[BAD].reason.startswith(f"the {stage} stage failed") and message in by_id[BAD].reason, \
        by_id[BAD].reason
    # the bad row really broke a batch it shared with good rows
    assert any(s == stage and raised and BAD in ids and len(ids) >= 4 for s, ids, raised in rec.calls), \
        rec.calls
    rec.calls.clear()
    alone = run_together(program, chunk, good)
    for req, s_alone in zip(good, alone, strict=True):
        s_mixed = by_id[req.request_id]
        assert s_mixed.status == "done", (req.request_id, s_mixed.status, s_mixed.reason)
        a, b = s_mixed.wait(), s_alone.wait()
        assert a.shape == b.shape and a.shape[0] > 0
        assert np.abs(a - b).max() <= 1e-4, (req.request_id, float(np.abs(a - b).max()))


# --- Qwen3-TTS
QWEN_CHUNK = ChunkSchedule(first=3, ramp=(5,), steady=8)


def _qwen_good(program) -> list[SynthesisRequest]:
    voices = program.spec.voices
    return [SynthesisRequest(text=f"good request {i} says hello", voice=voices[i % len(voices)], seed=100 + i,
                             sampling=SamplingParams(greedy=i % 2 == 0), fixed_frames=6 + 2 * i,
                             request_id=f"good{i}") for i in range(7)]


def _qwen_sampling(**change):
    def corrupt(program, prepare, request):
        prompt = prepare(request)
        prompt.data.sampling = dataclasses.replace(prompt.data.sampling, **change)
        return prompt
    return corrupt


@pytest.fixture
def qwen(tiny_custom_voice):
    from voxcli.models import load_model

    return load_model(str(tiny_custom_voice))


@pytest.mark.parametrize("stage, change, message", [
    ("prefill", {"top_k": 10 ** 30}, "Overflow"),  # the talker's sampling runs in prefill and decode
    ("decode", {"sub_top_k": 10 ** 30}, "Overflow"),  # the sub-talker's only in decode
    ("codec", {"temperature": 1e-300, "greedy": False}, "codec codes must lie in"),  # NaN scores
])
def test_qwen_bad_row_fails_alone(qwen, stage, change, message):
    bad = SynthesisRequest(text="the bad request", voice=qwen.spec.voices[0], seed=7, fixed_frames=9,
                           request_id=BAD)
    _check_isolated(qwen, QWEN_CHUNK, _qwen_good(qwen), bad, stage, message, _qwen_sampling(**change))


# --- Dia
DIA_CHUNK = ChunkSchedule(first=12, ramp=(8,), steady=16)


@pytest.fixture(scope="module")
def dia_ckpt(tmp_path_factory):
    from voxcli.models.dia.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("dia_isolation") / "ckpt")


@pytest.fixture
def dia(dia_ckpt):
    from voxcli.models import load_model

    return load_model(str(dia_ckpt))


def _dia_good() -> list[SynthesisRequest]:
    texts = ["[S1] One.", "[S2] Two, a longer line.", "[S1] Three (laughs).", "[S2] Four is four.",
             "[S1] Five.", "[S2] Six six six.", "[S1] Seven, the last."]
    return [SynthesisRequest(text=t, cfg_scale=(3.0, 1.0, 2.0)[i % 3], seed=i,
                             sampling=SamplingParams(greedy=i % 2 == 0), fixed_frames=14 + 3 * i,
                             request_id=f"good{i}") for i, t in enumerate(texts)]


def _dia_bad_ids(program, prepare, request):
    prompt = prepare(request)
    prompt.data.ids = [10 ** 6] * len(prompt.data.ids)  # the text encoder's embedding cannot index it
    return prompt


def _dia_bad_prompt_codes(program, prepare, request):
    # A voice-clone prompt whose last frame carries an out-of-range code on the delayed channels: the
    # delay pattern feeds those in decode steps after the prefix, never in prefill.
    C = program.cfg.decoder.num_channels
    codes = np.full((3, C), 5, dtype=np.int64)
    codes[-1, 1:] = 10 ** 6
    return prepare(dataclasses.replace(request, ref_text="[S1] Me."), ref_codes=codes)


def _is_bad(row) -> bool:
    return getattr(row.prompt.data, "tag", None) == BAD


def _dia_bad_frames(program, prepare, request):
    # The bad row's decode emits codes the DAC refuses (as NaN scores would): its own data breaks the codec.
    prompt = prepare(request)
    inner = program.decode

    def decode(rows):
        out = inner(rows)
        return [StepOutput(o.frame + 10 ** 6, o.done) if _is_bad(r) and o.frame is not None else o
                for r, o in zip(rows, out, strict=True)]
    if not getattr(program, "_bad_frames", False):
        program.decode, program._bad_frames = decode, True
    return prompt


@pytest.mark.parametrize("stage, corrupt, message", [
    ("prefill", _dia_bad_ids, "index out of range"),
    ("decode", _dia_bad_prompt_codes, "index out of range"),
    ("codec", _dia_bad_frames, "codes"),
])
def test_dia_bad_row_fails_alone(dia, stage, corrupt, message):
    bad = SynthesisRequest(text="[S1] The bad request.", cfg_scale=3.0, seed=9, fixed_frames=20,
                           request_id=BAD)
    _check_isolated(dia, DIA_CHUNK, _dia_good(), bad, stage, message, corrupt)
