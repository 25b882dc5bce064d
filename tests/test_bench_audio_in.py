"""`vox bench --audio-in-share`: a mixed workload of TTS and audio-in (transcription) requests on the sim
executor (virtual clock, deterministic). The TTS SLO counts TTS requests only; audio-in requests report
time to first token and tokens per second in the table and the JSON; a model that cannot hear refuses."""

from __future__ import annotations

import io
import json
import random

from rich.console import Console
from typer.testing import CliRunner

from voxcli.bench.audio_in import CLIP_MAX_S, CLIP_MIN_S, clip_seconds, mix_audio_in
from voxcli.bench.client import SimTarget, schedule
from voxcli.bench.metrics import meets_slo, rate_result
from voxcli.bench.report import audio_in_tables, rate_tables
from voxcli.bench.sweep import SweepSpec, Variant, sweep_variant
from voxcli.bench.targets import model_config, sim_target
from voxcli.bench.workloads import load_workload
from voxcli.cli import app
from voxcli.session import open_session

runner = CliRunner()
MODEL = "bagpiper-8b"


def test_clip_durations_are_librispeech_like_and_seeded():
    xs = [clip_seconds(random.Random(7)) for _ in range(3)]
    assert xs[0] == xs[1] == xs[2]
    rng = random.Random(0)
    many = sorted(clip_seconds(rng) for _ in range(4000))
    assert CLIP_MIN_S <= many[0] and many[-1] <= CLIP_MAX_S
    assert 5.6 < many[len(many) // 2] < 6.4  # median 6 s
    assert 6.6 < sum(many) / len(many) < 7.8  # LibriSpeech test-clean: mean 7.4 s


def test_mixing_keeps_the_schedule_and_is_deterministic():
    utts = load_workload("libritts")
    arrivals = schedule(2.0, 60.0, 3, utts, frame_rate=50.0)
    a, b = mix_audio_in(arrivals, 0.3, 3), mix_audio_in(arrivals, 0.3, 3)
    assert a == b and [x.at for x in a] == [x.at for x in arrivals]
    heard = [x for x in a if x.clip_s is not None]
    assert 0.15 < len(heard) / len(a) < 0.45
    assert mix_audio_in(arrivals, 0.0, 3) == arrivals


def _mixed_records():
    """One mixed play of bagpiper-8b on the sim at a rate near its capacity: (records, arrivals)."""
    cfg = model_config(MODEL, "sim", "h100")
    target = SimTarget(lambda: open_session(cfg, wall_clock=False).engine, "full")
    arrivals = mix_audio_in(schedule(1.0, 40.0, 11, load_workload("libritts"), frame_rate=50.0), 0.3, 11)
    try:
        return target.play(arrivals, 900.0), arrivals, cfg.ttfa_target_s
    finally:
        target.close()


def test_tts_attainment_counts_tts_requests_only():
    records, arrivals, target = _mixed_records()
    heard = [r for r in records if r.audio_in]
    tts = [r for r in records if not r.audio_in]
    assert len(heard) == sum(a.clip_s is not None for a in arrivals) > 0 and tts
    assert all(not r.deliveries and r.ttft is not None and r.ttft > 0 and r.tokens_per_s for r in heard)
    res = rate_result(1.0, records, 40.0, target)
    assert res.sent == len(tts) and res.audio_in_sent == len(heard) == res.audio_in_done
    assert res.attainment == sum(meets_slo(r, target) for r in tts) / len(tts)
    assert res.attainment == rate_result(1.0, tts, 40.0, target).attainment
    assert res.ttft_p50 is not None and res.ttft_p99 >= res.ttft_p50 and res.tokens_per_s_p50 > 0
    # counted as TTS requests, the audio-in ones (no audio) would all be misses
    assert res.attainment > sum(meets_slo(r, target) for r in records) / len(records)


def test_sweep_tables_show_audio_in_whole_at_80_columns():
    cfg = model_config(MODEL, "sim", "h100")
    spec = SweepSpec(rates=[0.5, 1.0], duration_s=20.0, seeds=1, warmup=0, frame_rate=50.0,
                     ttfa_target_s=cfg.ttfa_target_s, audio_in_share=0.3)
    from voxcli.bench.sweep import SweepResult

    sw = sweep_variant(sim_target(cfg, Variant.policy("full"), 0), Variant.policy("full"), spec,
                       load_workload("libritts"))
    tables = audio_in_tables(SweepResult(spec, [sw]))
    assert len(tables) == 1
    for t in [*tables, *rate_tables(SweepResult(spec, [sw]))]:
        buf = io.StringIO()
        Console(file=buf, width=80).print(t)
        lines = buf.getvalue().splitlines()
        words = [w for col in t.columns for cell in (col.header, *col._cells) for w in str(cell).split()]
        assert all(any(w in line.split() for line in lines) for w in words), t.title
        assert max(map(len, lines)) <= 80
    assert any(r.audio_in_sent for r in sw.results)


def test_vox_bench_mixed_writes_ttft_to_table_and_json(tmp_path):
    res = runner.invoke(app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", MODEL, "--rates",
                              "1", "--duration", "20", "--seeds", "1", "--warmup", "0", "--audio-in-share",
                              "0.3", "--out", str(tmp_path), "--no-plot"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "audio-in (text out)" in res.output and "TTFT p50" in res.output
    data = json.loads((tmp_path / f"bench-{MODEL}-sim-h100.json").read_text())
    assert data["spec"]["audio_in_share"] == 0.3
    rate = data["variants"][0]["rates"][0]
    assert rate["audio_in_sent"] > 0 and rate["ttft_p50"] > 0 and rate["tokens_per_s_p50"] > 0


def test_a_model_that_cannot_hear_refuses_audio_in_share(tmp_path):
    res = runner.invoke(app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", "qwen3-tts-1.7b",
                              "--rates", "1", "--audio-in-share", "0.3", "--out", str(tmp_path), "--no-plot"])
    assert res.exit_code == 2
    assert "cannot hear" in res.output and res.output.strip().count(". ") == 0
    assert not list(tmp_path.iterdir())  # refused before running
    res = runner.invoke(app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", MODEL, "--rates", "1",
                              "--audio-in-share", "1.5", "--out", str(tmp_path), "--no-plot"])
    assert res.exit_code == 2 and "between 0 and 1" in res.output
