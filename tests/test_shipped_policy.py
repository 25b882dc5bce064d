"""The shipped policy's decisions on hand-made timelines (issue 17 part 2): the Qwen3-TTS recipes decode
in buckets every 16 rows past 32, so the TTFA gate prices the 65th running row at the 80-row step it
pays, not at the 128-row step a power-of-two bucket pads it to (the cliff behind the gate's loss at 99%
and on long-form: with powers of two it refused every request that would be the 65th row)."""

from __future__ import annotations

import pytest
from voxcli.models.base import SynthesisRequest

from voxcli.config import ChunkSchedule, load_recipe
from voxcli.engine.estimates import LatencyEstimator, load_profile
from voxcli.engine.executors.base import Completion
from voxcli.engine.executors.stages import run_work
from voxcli.engine.scheduler import Scheduler
from voxcli.engine.synthetic import SyntheticProgram

POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CHUNK = ChunkSchedule(first=10, steady=10)


@pytest.mark.parametrize("recipe", ["qwen3-tts-1.7b", "qwen3-tts-0.6b"])
def test_the_qwen_recipes_ship_the_gate_with_decode_buckets_every_16_rows(recipe):
    cfg = load_recipe(recipe)
    assert cfg.admission == "ttfa-gate" and cfg.policy == "full"
    assert cfg.decode_buckets[:6] == POW2[:6]
    steps = [b - a for a, b in zip(cfg.decode_buckets[5:], cfg.decode_buckets[6:], strict=False)]
    assert max(steps) <= 32 and cfg.decode_buckets[-1] == cfg.max_running
    assert 80 in cfg.decode_buckets  # the 65th row pays for 80 rows, not 128


def running(buckets: tuple[int, ...], rows: int):
    """A scheduler on the H100 profile with `rows` requests decoding (admitted with a lax target)."""
    cfg = load_recipe("qwen3-tts-1.7b").replace(executor="sim", gpu="h100", chunk=CHUNK,
                                                decode_buckets=buckets, ttfa_target_s=60.0)
    prog = SyntheticProgram(chunk=CHUNK)
    sched = Scheduler(cfg, prog.spec, LatencyEstimator(load_profile(cfg), cfg), prog.kv_tokens)
    t = 0.0
    for i in range(rows):
        r = sched.new_request(i, prog.prepare(SynthesisRequest(text="hello there", fixed_frames=2000)), t)
        assert sched.add(r, t) == []
    while sched.decoding_rows < rows:
        works = sched.decide(t)
        assert works, "the scheduler stalled while filling"
        w = next(w for w in works if w.lane == "lm")
        end = t + sched.est.predict(w)
        for x in works:  # every lane's batch ends with the LM's (the codec ones are shorter)
            sched.complete(Completion(x, t, end, run_work(prog, x)))
        t = end
    return sched, prog, t


def test_the_65th_row_is_priced_at_the_bucket_it_pays():
    probes = {}
    for name, buckets in (("pow2", POW2), ("recipe", load_recipe("qwen3-tts-1.7b").decode_buckets)):
        sched, prog, t = running(buckets, 64)
        assert sched.decoding_rows == 64
        sched.gate.errors.clear()  # no TTFA history: the gate predicts from the table (safety 1)
        sched.gate.safety = 1.0
        r = sched.new_request(99, prog.prepare(SynthesisRequest(text="hello there", fixed_frames=100)), t)
        r.need_pages = sched.kv.pages_for(prog.kv_tokens(r.prompt))
        probes[name] = (sched, r, t, sched.gate.predict(sched, r, t).predicted_ttfa)
    est = probes["pow2"][0].est
    # the same state, the same wait: the predictions differ by the 10 first-chunk steps' bucket alone
    gap = 10 * (est.decode_step(128) - est.decode_step(80))
    assert probes["pow2"][3] - probes["recipe"][3] == pytest.approx(gap)
    assert gap > 0.040  # 40 ms of a 200 ms budget: the cliff
    # at a target between them (a device slower than its table, as the honest sim observes) the
    # power-of-two engine refuses the 65th row and the shipped one admits it
    target = (probes["pow2"][3] + probes["recipe"][3]) / 2
    for name, (sched, r, t, _) in probes.items():
        r.ttfa_target = target
        assert sched.gate.predict(sched, r, t).admit is (name == "recipe")
