"""`--placement`: parsing (one sentence naming the flag, before anything loads) and `auto` = the top of
`vox profile --gpus N`'s ranking."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from voxcli import cli
from voxcli.errors import VoxError
from voxcli.placement import Placement, parse_placement
from voxcli.sim.placement_rank import auto_placement, ranked_placements


def test_parse_placements():
    assert parse_placement("both=1,lm=2,codec=1") == Placement(both=1, lm=2, codec=1)
    assert parse_placement(" lm=1 , codec=1 ") == Placement(lm=1, codec=1)
    assert parse_placement("both=3").replicas == 3
    assert parse_placement("auto") is None
    assert Placement(both=1, lm=2, codec=1).describe() == "both=1,lm=2,codec=1"


@pytest.mark.parametrize(("text", "needle"), [
    ("both=1,gpu=2", "'gpu=2', which is not role=count"),
    ("lm", "'lm', which is not role=count"),
    ("both=x", "the count 'x', not a whole number"),
    ("both=\u0661", "the count '\u0661', not a whole number in ASCII digits"),  # int() reads it as 1
    ("both=1_0", "the count '1_0', not a whole number in ASCII digits"),  # int() reads 10
    ("both=+1", "not a whole number in ASCII digits"),
    ("both=" + "9" * 40, "not a whole number in ASCII digits"),
    ("both=-1", "negative count"),
    ("both=1,both=2", "names both twice"),
    ("both=0", "places no replica"),
    ("lm=2", "LM-only replicas without a codec-only one"),
    ("both=1,codec=1", "LM-only replicas without a codec-only one"),
])
def test_placement_errors_are_one_sentence(text, needle):
    with pytest.raises(VoxError, match="--placement") as e:
        parse_placement(text)
    assert needle in str(e.value) and "role=count pairs over both, lm, codec" in str(e.value)
    assert str(e.value).endswith("or auto.") and "\n" not in str(e.value)


def test_auto_is_the_best_ranked_placement():
    ranked = ranked_placements("qwen3-tts-1.7b", "h100", 4)
    best, rps = auto_placement("qwen3-tts-1.7b", "h100", 4)
    assert (best.both, best.lm, best.codec) == (ranked[0].both, ranked[0].lm_only, ranked[0].codec_only)
    assert rps == ranked[0].rps == max(p.rps for p in ranked) and best.replicas == 4
    with pytest.raises(VoxError, match="--placement auto needs --gpu"):
        auto_placement("qwen3-tts-1.7b", "", 2)


@pytest.mark.parametrize(("args", "needle"), [
    (["serve", "--placement", "lm=2"], "--placement 'lm=2' has LM-only replicas"),
    (["serve", "--placement", "both=1", "--replicas", "2"], "drop --replicas"),
    (["serve", "--placement", "both=1,lm=1,codec=1", "--executor", "sim"], "--executor sim needs --gpu"),
    (["serve", "--placement", "auto", "--executor", "sim", "--gpu", "tpu9"], "tpu9"),
    (["batch", "-", "-o", "OUT", "--placement", "auto"], "--placement auto ranks placements"),
    (["batch", "-", "-o", "OUT", "--placement", "codec=1"], "--placement 'codec=1'"),
])
def test_cli_placement_flags_fail_before_anything_loads(args, needle, monkeypatch, tmp_path):
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())

    def no_model(config):
        raise AssertionError("the model was loaded before the flags were checked")

    monkeypatch.setattr("voxcli.session.engine_factory", no_model)
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    r = CliRunner().invoke(cli.app, args, input="hello\n")
    assert r.exit_code == 2, r.output
    assert needle in r.stderr and "Traceback" not in r.output
