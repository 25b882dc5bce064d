"""`vox bench` / `vox profile` through the real CLI app (sim profile shipped in recipes/gpus)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from voxcli.cli import app

runner = CliRunner()


def test_vox_profile_names_a_split_and_writes_plot_and_recipe(tmp_path):
    res = runner.invoke(app, ["profile", "--gpu", "h100", "--model", "qwen3-tts-1.7b", "--target-rate", "40",
                              "--gpus", "2", "--no-simulate", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "chosen split:" in res.output and "backbone step" in res.output
    recipe = (tmp_path / "qwen3-tts-1.7b-h100.toml").read_text()
    assert "codec_sms" in recipe and "lm_sms" in recipe
    assert (tmp_path / "qwen3-tts-1.7b-h100-splits.png").stat().st_size > 1000
    summary = json.loads((tmp_path / "qwen3-tts-1.7b-h100.json").read_text())
    assert summary["chosen"]["codec_sms"] % 8 == 0 and summary["placements"]


def test_vox_profile_chooses_the_split_by_simulation_and_vox_bench_agrees(tmp_path):
    sim = ["--workload", "seed-tts"]
    res = runner.invoke(app, ["profile", "--gpu", "h100", "--model", "qwen3-tts-1.7b", *sim, "--keep", "2",
                              "--sim-rates", "40,80,120", "--sim-duration", "2", "--sim-seeds", "1",
                              "--out", str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "p" / "qwen3-tts-1.7b-h100.json").read_text())
    tried = summary["simulated"]["candidates"]
    chosen = summary["simulated"]["chosen"]
    assert len(tried) >= 2 and chosen["capacity90"] == max(t["capacity90"] for t in tried)
    recipe = (tmp_path / "p" / "qwen3-tts-1.7b-h100.toml").read_text()
    assert f"lm_sms = {chosen['lm_sms']}" in recipe and f"codec_sms = {chosen['codec_sms']}" in recipe
    # one name for the chosen split everywhere: table row, chosen line, recipe comment, JSON; the spare SMs
    name = f"{chosen['lm_sms']}/{chosen['codec_sms']}"
    assert summary["chosen_split"] == name
    assert f"*{name} " in res.output
    assert f"chosen split: {name} (backbone {chosen['lm_sms']} + codec" in res.output
    assert f"# split {name} (backbone" in recipe
    spare = 132 - chosen["lm_sms"] - chosen["codec_sms"]
    assert (f"{spare} of 132 spare: green contexts hand out SMs in groups of 8" in res.output) == (spare > 0)
    marked = [line for line in res.output.splitlines() if line.lstrip().startswith("*")]
    assert len(marked) == 1  # the table marks the split finally chosen, not the throughput model's pick
    # progress while it simulates: a line per split and per rate (stderr)
    assert res.output.count("vox profile: simulating split ") == len(tried)
    assert f"vox profile:   {name} at 40 req/s:" in res.output
    # the same sweep through `vox bench` on the chosen split reports the same capacity
    split = ["--set", f"lm_sms={chosen['lm_sms']}", "--set", f"codec_sms={chosen['codec_sms']}"]
    res = runner.invoke(app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", "qwen3-tts-1.7b",
                              *sim, "--rates", "40,80,120", "--duration", "2", "--seeds", "1", "--no-plot",
                              *split, "--out", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    bench = json.loads((tmp_path / "b" / "bench-qwen3-tts-1.7b-sim-h100.json").read_text())["variants"][0]
    assert bench["capacity90"] == chosen["capacity90"] and bench["capacity99"] == chosen["capacity99"]


def test_vox_profile_rejects_an_unknown_gpu(tmp_path):
    res = runner.invoke(app, ["profile", "--gpu", "a100", "--out", str(tmp_path)])
    assert res.exit_code != 0 and "h100" in res.output


def test_vox_bench_on_the_sim_prints_capacities_and_writes_json(tmp_path):
    res = runner.invoke(app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", "qwen3-tts-1.7b",
                              "--policy", "full,sync", "--rates", "2,4", "--duration", "2", "--warmup", "0",
                              "--workload", "seed-tts", "--out", str(tmp_path), "--no-plot"])
    assert res.exit_code == 0, res.output
    assert "SLO capacity" in res.output
    data = json.loads((tmp_path / "bench-qwen3-tts-1.7b-sim-h100.json").read_text())
    assert [v["label"] for v in data["variants"]] == ["full", "sync"]
    assert all(v["capacity90"] == 4.0 for v in data["variants"])  # 4 req/s is trivial for an H100


def test_vox_bench_rejects_bad_rates_and_missing_gpu(tmp_path):
    res = runner.invoke(app, ["bench", "--executor", "sim", "--gpu", "h100", "--rates", "0:3:1", "--out",
                              str(tmp_path)])
    assert res.exit_code == 2 and "rates" in res.output
    res = runner.invoke(app, ["bench", "--executor", "sim", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--gpu" in res.output


def test_vox_bench_on_cuda_without_a_gpu_fails_with_a_sentence(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # also on a GPU machine
    res = runner.invoke(app, ["bench", "--executor", "cuda", "--model", str(tmp_path / "ckpt"), "--rates",
                              "1", "--duration", "1", "--out", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert "--executor cuda needs a CUDA GPU" in res.output and "--executor cpu" in res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    assert not list(tmp_path.glob("*.json"))


def test_bench_files_are_named_by_model_and_gpu():
    from voxcli.bench.report import bench_stem

    names = {bench_stem(m, "sim", "h100") for m in ("qwen3-tts-1.7b", "qwen3-tts-0.6b", "dia-1.6b")}
    assert len(names) == 3 and "bench-dia-1.6b-sim-h100" in names  # Dia no longer overwrites Qwen's
    assert bench_stem("Qwen/Qwen3-TTS-12Hz-0.6B-Base", "cpu", "") == "bench-Qwen3-TTS-12Hz-0.6B-Base-cpu"
    assert bench_stem("/ckpts/my model/", "cuda", "", url=True) == "bench-url-my-model-cuda"
