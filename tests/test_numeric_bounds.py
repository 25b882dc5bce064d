"""Validation that matches the stages: every numeric field is bounded (models/base.py NUMERIC_BOUNDS) in the
model's `check`, before batching, with one sentence naming the field and the range; the extreme values
accepted run through the real stages of both families; in `vox batch` such a line fails alone (and
again alone on resume)."""

from __future__ import annotations

import json

import pytest
from support.cli_harness import DemoHarness
from support.sim_real import run_together
from voxcli.models.base import NUMERIC_BOUNDS, InputError, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine
from voxcli.sim.synthetic import SyntheticProgram

S = SamplingParams
# (fields of the request, words of the refusal); each was accepted by `check` before, and most then raised
# inside a stage ("Overflow when unpacking long long", "codec codes must lie in [0, 128)")
COMMON = [
    ({"sampling": S(temperature=1e-300)}, "temperature must be a finite number from 0.001 to 1000"),
    ({"sampling": S(temperature=1e300)}, "temperature must be a finite number from 0.001 to 1000"),
    ({"sampling": S(temperature=float("nan"))}, "temperature must be a finite number"),
    ({"sampling": S(top_k=10 ** 30)}, "top_k must be a whole number from 0 to 2147483647"),
    ({"sampling": S(top_p=0.0)}, "top_p must be a finite number above 0 and at most 1"),
    ({"seed": 2 ** 64}, "seed must be a whole number from 0 to 9223372036854775807"),
    ({"max_frames": 10 ** 30}, "max_frames must be a whole number from 1 to 2147483647"),
    ({"fixed_frames": 10 ** 30}, "fixed_frames must be a whole number from 0 to 2147483647"),
]
QWEN_ONLY = [
    ({"options": {"sub_top_k": 10 ** 30}}, "sub_top_k must be a whole number from 0 to 2147483647"),
    ({"options": {"sub_temperature": 1e-300}}, "sub_temperature must be a finite number from 0.001"),
    ({"options": {"sub_top_p": float("inf")}}, "sub_top_p must be a finite number above 0"),
    ({"sampling": S(repetition_penalty=1e300)}, "repetition_penalty must be a finite number from 0.001"),
]
DIA_ONLY = [({"cfg_scale": 1e300}, "cfg_scale must be a finite number from 0 to 100")]


@pytest.fixture(scope="module")
def qwen(tiny_custom_voice):
    from voxcli.models import load_model

    return load_model(str(tiny_custom_voice))


@pytest.fixture(scope="module")
def dia(tmp_path_factory):
    from voxcli.models import load_model
    from voxcli.models.dia.tiny import build_tiny

    return load_model(str(build_tiny(tmp_path_factory.mktemp("dia_bounds") / "ckpt")))


def _refused(program, fields, words, text="Hello there.") -> None:
    req = SynthesisRequest(text=text, **fields)
    for call in (program.check, program.prepare):  # check: before any work; prepare: again, first thing
        with pytest.raises(InputError) as e:
            call(req)
        msg = str(e.value)
        assert words in msg and ", got " in msg and "\n" not in msg, msg


@pytest.mark.parametrize("fields, words", COMMON + QWEN_ONLY)
def test_qwen_check_bounds_every_number(qwen, fields, words):
    _refused(qwen, fields, words)


@pytest.mark.parametrize("fields, words", COMMON + DIA_ONLY)
def test_dia_check_bounds_every_number(dia, fields, words):
    _refused(dia, fields, words, text="[S1] Hello there.")


@pytest.mark.parametrize("fields, words", COMMON)
def test_the_sim_stand_in_and_the_engine_apply_the_same_bounds(fields, words):
    _refused(SyntheticProgram(), fields, words)
    with Engine(SyntheticProgram(), EngineConfig(executor="sim")) as eng:
        with pytest.raises(InputError, match=words):
            eng.submit(SynthesisRequest(text="Hello there.", **fields))


def _edges() -> list[dict]:
    b = NUMERIC_BOUNDS
    lo_t, hi_t, hi_k = b["temperature"].lo, b["temperature"].hi, b["top_k"].hi
    return [{"sampling": S(temperature=lo_t)}, {"sampling": S(temperature=hi_t)},
            {"sampling": S(top_k=hi_k, top_p=1e-9)}, {"seed": b["seed"].hi}]


def test_the_extreme_accepted_values_run_through_the_qwen_stages(qwen):
    b = NUMERIC_BOUNDS
    extra = [{"sampling": S(repetition_penalty=b["repetition_penalty"].lo)},
             {"sampling": S(repetition_penalty=b["repetition_penalty"].hi)},
             {"options": {"sub_top_k": b["top_k"].hi, "sub_temperature": b["temperature"].lo,
                          "sub_greedy": False}},
             {"options": {"sub_temperature": b["temperature"].hi, "sub_greedy": False}}]
    reqs = [SynthesisRequest(text=f"edge case {i}", fixed_frames=6, **f)
            for i, f in enumerate(_edges() + extra)]
    for r in reqs:
        qwen.check(r)
    streams = run_together(qwen, ChunkSchedule(first=3, ramp=(), steady=3), reqs)
    assert [(s.status, s.reason) for s in streams] == [("done", None)] * len(reqs)


def test_the_extreme_accepted_values_run_through_the_dia_stages(dia):
    reqs = [SynthesisRequest(text=f"[S1] Edge case {i}.", fixed_frames=14, cfg_scale=(1.0, 3.0)[i % 2], **f)
            for i, f in enumerate(_edges())]
    reqs.append(SynthesisRequest(text="[S2] Strong guidance.", fixed_frames=14,
                                 cfg_scale=NUMERIC_BOUNDS["cfg_scale"].hi))
    for r in reqs:
        dia.check(r)
    streams = run_together(dia, ChunkSchedule(first=12, ramp=(), steady=12), reqs)
    assert [(s.status, s.reason) for s in streams] == [("done", None)] * len(reqs)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    h = DemoHarness(tmp_path_factory.mktemp("bounds_cache"))
    yield h
    h.close()


def test_batch_line_with_a_bad_number_fails_alone_also_on_resume(demo, tmp_path):
    lines = [{"id": "a", "text": "One."}, {"id": "topk", "text": "Two.", "options": {"sub_top_k": 10 ** 30}},
             {"id": "b", "text": "Three."},
             {"id": "cold", "text": "Four.", "options": {"sub_temperature": 1e-300}},
             {"id": "c", "text": "Five."},
             {"id": "hot", "text": "Six.", "options": {"sub_temperature": 1e300}}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    for attempt in range(2):  # the second run is the resume: it retries the failed lines, which fail alone
        r = demo.run(["batch", "-m", "demo", "--max-frames", "4", "-c", "8", str(src), "-o", str(out)])
        assert r.code == 1, r.stderr
        recs = {}
        for x in map(json.loads, (out / "manifest.jsonl").read_text().splitlines()):
            recs[x["id"]] = x  # the latest record of an id wins
        assert {k for k, v in recs.items() if v["status"] == "ok"} == {"a", "b", "c"}, (attempt, recs)
        assert "sub_top_k must be a whole number" in recs["topk"]["error"]
        assert "sub_temperature must be a finite number from 0.001 to 1000" in recs["cold"]["error"]
        assert "sub_temperature must be a finite number from 0.001 to 1000" in recs["hot"]["error"]
