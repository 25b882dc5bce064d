"""The oracle fork server (tests/oracle/pool.py, fork_worker.py) runs a script as a fresh interpreter would:
same argv, cwd, environment, stdout, stderr and return code, nothing left over from the run before it, a
crash reported with its traceback. Driven with this venv's interpreter and a throwaway script."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from oracle import pool

SCRIPT = '''
import json, os, sys
import json as preloaded  # the worker imported it before the fork
state = sys.modules.setdefault("leftover", type(sys)("leftover"))
seen_before = getattr(state, "mark", None)
state.mark = sys.argv[1]
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": os.environ.get("VOX_POOL_PROBE"),
                  "test": os.environ.get("PYTEST_CURRENT_TEST"), "before": seen_before,
                  "path0": sys.path[0], "main": __name__}))
print("to stderr", file=sys.stderr)
os.write(1, b"raw fd 1\\n")
if sys.argv[1] == "crash":
    raise ValueError("the oracle broke")
sys.exit(int(sys.argv[2]))
'''


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "probe.py"
    p.write_text(SCRIPT)
    return p


def _both(script, args, env, cwd):
    fresh = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env,
                           cwd=cwd, timeout=60)
    forked = pool.run_script(sys.executable, script, args, env, cwd, 60, preload=("json",))
    return fresh, forked


def test_a_forked_run_equals_a_fresh_interpreter(script, tmp_path):
    env = dict(os.environ, VOX_POOL_PROBE="one")
    for args in (["a", "0"], ["b", "3"]):  # the second run reuses the worker and sees no leftover
        fresh, forked = _both(script, args, env, str(tmp_path))
        assert forked.returncode == fresh.returncode
        assert (forked.stdout, forked.stderr) == (fresh.stdout, fresh.stderr)
        assert '"before": null' in forked.stdout and forked.returncode == int(args[1])
        assert "raw fd 1" in forked.stdout and forked.stderr == "to stderr\n"
    assert len([k for k in pool._workers if k[0] == sys.executable and k[1] == ("json",)]) == 1


def test_the_running_tests_name_reaches_the_child_without_a_new_worker(script, tmp_path):
    base = dict(os.environ, VOX_POOL_PROBE="two")
    first = pool.run_script(sys.executable, script, ["a", "0"], dict(base, PYTEST_CURRENT_TEST="t1"),
                            str(tmp_path), 60, preload=("json",))
    n = len(pool._workers)
    second = pool.run_script(sys.executable, script, ["a", "0"], dict(base, PYTEST_CURRENT_TEST="t2"),
                             str(tmp_path), 60, preload=("json",))
    assert '"test": "t1"' in first.stdout and '"test": "t2"' in second.stdout and len(pool._workers) == n


def test_a_crash_reports_its_traceback_and_rc_1(script, tmp_path):
    fresh, forked = _both(script, ["crash", "0"], dict(os.environ), str(tmp_path))
    assert forked.returncode == fresh.returncode == 1
    assert "ValueError: the oracle broke" in forked.stderr and forked.stdout == fresh.stdout


def test_a_worker_whose_imports_fail_fails_the_run(script, tmp_path):
    r = pool.run_script(sys.executable, script, ["a", "0"], dict(os.environ), str(tmp_path), 60,
                        preload=("no_such_module_for_the_pool",))
    assert r.returncode != 0 and "No module named 'no_such_module_for_the_pool'" in r.stderr
