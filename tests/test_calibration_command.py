"""`python -m voxcli.bench.calibration --family NAME`: every family's calibration is found through the
registry, and writing its profiles at the shipped parameter values reproduces the shipped files byte for
byte (nothing is simulated: the fitted values are given)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from voxcli.models.registry import FAMILY_PACKAGES, find_family
from voxcli.models.sim_calibration import fit_interval

from voxcli.bench.calibration import main
from voxcli.sim.calibration import repo_root

GPUS = repo_root() / "recipes" / "gpus"


def _given(family: str) -> list[str]:
    """The options that skip a family's fit: its shipped fitted value."""
    if family == "higgs_audio":
        fitted = (GPUS / "h100-higgs-v3-4b.toml").read_text()
        return ["--row-ms", re.search(r"b x row ([0-9.]+) ms", fitted)[1]]
    if family == "cosyvoice3":
        return ["--dit-eff", re.search(r"^# dit_eff ([0-9.]+): FITTED", (GPUS / "h100-cosyvoice3-0.5b.toml")
                                       .read_text(), re.M)[1]]
    if family == "qwen3_tts":
        return ["--rewrite"]
    return []


@pytest.mark.parametrize("family", FAMILY_PACKAGES)
def test_the_command_writes_the_shipped_profiles(family, tmp_path, capsys):
    assert find_family(family).calibration is not None
    # --root: written there, not over the shipped files; Qwen's --rewrite reads the shipped ones there
    (tmp_path / "recipes" / "gpus").mkdir(parents=True)
    for p in GPUS.glob("*.toml"):
        (tmp_path / "recipes" / "gpus" / p.name).write_bytes(p.read_bytes())
    extra = ["--root", str(tmp_path)]
    assert main(["--family", family, *extra, *_given(family)]) == 0
    written = [Path(line) for line in capsys.readouterr().out.splitlines() if line.endswith(".toml")]
    assert written
    for path in written:
        assert path.read_bytes() == (GPUS / path.name).read_bytes(), path.name


def test_a_family_is_found_by_package_name_or_model():
    assert find_family("dia") is find_family("Dia") is find_family("dia-1.6b") is find_family("demo-dia")
    assert find_family("qwen3_tts") is find_family("Qwen/Qwen3-TTS-12Hz-1.7B-Base")
    assert find_family("no-such-family") is None
    assert main(["--family", "no-such-family"]) == 2


@pytest.mark.parametrize("rising", [True, False])
def test_a_fit_finds_the_interval_that_serves_the_target(rising, capsys):
    """A capacity that steps 28 -> 30 -> 32 req/s at 0.30 and 0.32 (rising) or 32 -> 30 -> 28 (falling):
    the fit lands in the geometric middle of [0.30, 0.32), and probes no midpoint twice."""
    probed: list[float] = []

    def capacity(x: float) -> float:
        probed.append(x)
        up = 28.0 if x < 0.30 else 30.0 if x < 0.32 else 32.0
        return up if rising else 60.0 - up

    got = fit_interval(capacity, 30.0, 0.2, 0.5, 14, rising=rising, name="eff", label="full")
    assert abs(got - (0.30 * 0.32) ** 0.5) < 5e-4
    assert len(probed) == len(set(probed)) < 28
    assert "full capacity@90% = 30 for eff in [0.30" in capsys.readouterr().out
