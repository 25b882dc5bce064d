"""scripts/test.sh on a user's clone builds only the oracle venvs whose tests will run: an oracle whose pinned
upstream source (../shared/oracle/...) is absent is skipped with one line saying what and how to get it; in
CI (../shared present) every oracle is built. Checked on fake layouts: the decision (scripts/oracle_plan.py)
and test.sh itself with its setup scripts, ruff and pytest replaced by stubs that log, so nothing is built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import oracle_plan  # noqa: E402 - a script, not a package

PINNED = ("VOX_COSYVOICE_ORACLE_PYTHON", "VOX_ZONOS_ORACLE_PYTHON")


def clone(tmp_path: Path, shared: bool) -> Path:
    repo = tmp_path / "voxcli"
    repo.mkdir()
    if shared:
        (tmp_path / "shared/oracle/cosyvoice3/cosyvoice").mkdir(parents=True)
        (tmp_path / "shared/oracle/zonos/zonos").mkdir(parents=True)
        (tmp_path / "shared/oracle/zonos/zonos/model.py").write_text("")
    return repo


def by_env(lines: list[tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    return {line[1]: line for line in lines}


def test_a_clone_without_shared_skips_the_two_pinned_source_oracles(tmp_path):
    plan = by_env(oracle_plan.plan(clone(tmp_path, shared=False), {}))
    assert {env for env, line in plan.items() if line[0] == "skip"} == set(PINNED)
    cosy = plan["VOX_COSYVOICE_ORACLE_PYTHON"][2]
    assert str(tmp_path / "shared/oracle/cosyvoice3") in cosy and "FunAudioLLM/CosyVoice at ace7c47" in cosy
    assert "VOX_COSYVOICE_UPSTREAM" in cosy and ".oracle-cosyvoice-venv" in cosy
    assert "Zyphra/Zonos at bc40d98" in plan["VOX_ZONOS_ORACLE_PYTHON"][2]
    assert plan["VOX_ORACLE_PYTHON"] == ("build", "VOX_ORACLE_PYTHON", ".oracle-venv", "setup_oracle.sh")


def test_with_the_pinned_sources_every_oracle_is_built(tmp_path):
    plan = oracle_plan.plan(clone(tmp_path, shared=True), {})
    assert len(plan) == 9 and all(line[0] == "build" for line in plan)
    assert all((SCRIPTS / line[3]).is_file() for line in plan)  # the setup scripts named exist


def test_an_empty_shared_folder_is_not_a_source(tmp_path):
    (tmp_path / "shared/oracle/cosyvoice3").mkdir(parents=True)  # no cosyvoice/ package inside
    plan = by_env(oracle_plan.plan(clone(tmp_path, shared=False), {}))
    assert plan["VOX_COSYVOICE_ORACLE_PYTHON"][0] == "skip"


def test_a_source_or_interpreter_named_by_its_variable_wins(tmp_path):
    (tmp_path / "elsewhere/cosyvoice").mkdir(parents=True)
    env = {"VOX_COSYVOICE_UPSTREAM": str(tmp_path / "elsewhere"), "VOX_ZONOS_ORACLE_PYTHON": "/opt/z/python"}
    plan = by_env(oracle_plan.plan(clone(tmp_path, shared=False), env))
    assert plan["VOX_COSYVOICE_ORACLE_PYTHON"][0] == "build"
    assert plan["VOX_ZONOS_ORACLE_PYTHON"] == ("use", "VOX_ZONOS_ORACLE_PYTHON", "/opt/z/python")


def fake_repo(tmp_path: Path, shared: bool) -> Path:
    """A clone whose setup scripts, ruff and pytest only log what test.sh asked of them."""
    repo = clone(tmp_path, shared)
    (repo / "scripts").mkdir()
    for name in ("test.sh", "oracle_plan.py"):
        shutil.copy(SCRIPTS / name, repo / "scripts" / name)
    log = repo / "log"
    (repo / "scripts/setup.sh").write_text(f'echo "setup $*" >> {log}\n')
    for oracle in oracle_plan.ORACLES:
        (repo / "scripts" / oracle.setup).write_text(f'echo "oracle $(basename $0) $*" >> {log}\n')
    bin_dir = repo / ".venv/bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "ruff").write_text("#!/bin/sh\necho ruff >> " + str(log) + "\n")
    (bin_dir / "python").write_text(
        "#!/bin/sh\n{ echo \"python $*\"; env | grep -E '^VOX_(.*ORACLE_PYTHON|REQUIRE_ORACLE)=' | sort; }"
        f" >> {log}\n")
    for exe in bin_dir.iterdir():
        exe.chmod(0o755)
    return repo


def run_test_sh(repo: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
    p = subprocess.run(["bash", str(repo / "scripts/test.sh"), "-x", "tests/test_one.py"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p, (repo / "log").read_text().splitlines()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_test_sh_on_a_users_clone_builds_only_what_runs(tmp_path):
    p, log = run_test_sh(fake_repo(tmp_path, shared=False))
    built = [x.split()[1] for x in log if x.startswith("oracle ")]
    assert "setup_oracle_cosyvoice.sh" not in built and "setup_oracle_zonos.sh" not in built
    assert {"setup_oracle.sh", "setup_oracle_kyutai.sh", "setup_oracle_vibevoice.sh"} <= set(built)
    skipped = [x for x in p.stderr.splitlines() if x.startswith("test.sh: not building")]
    assert len(skipped) == 2 and all("check out" in x for x in skipped), p.stderr
    assert log[0] == "setup test" and "ruff" in log and "python -m pytest -q -x tests/test_one.py" in log
    assert "VOX_REQUIRE_ORACLE=1" in log
    assert not any(x.startswith(PINNED) for x in log)  # no interpreter named for what was not built
    assert any(x.startswith("VOX_ORACLE_PYTHON=") and x.endswith("/.oracle-venv/bin/python") for x in log)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_test_sh_in_ci_builds_every_oracle(tmp_path):
    p, log = run_test_sh(fake_repo(tmp_path, shared=True))
    built = {x.split()[1] for x in log if x.startswith("oracle ")}
    assert built == {o.setup for o in oracle_plan.ORACLES} and "not building" not in p.stderr
    assert sum(x.startswith(("VOX_COSYVOICE_ORACLE_PYTHON=", "VOX_ZONOS_ORACLE_PYTHON=")) for x in log) == 2
