"""Fuzz: over 1,000 generated bad inputs (seeded, so every run tries the same ones) across `vox say`,
`vox batch` (plain / TSV / JSONL lines, encodings, ids), `--set`, `vox bench`, `vox profile` options
and reference clips. For each: a non-zero exit; stderr is one line, neither "internal error" nor a
traceback; nothing written outside the command's output place and no `.part` file anywhere; in a batch,
every good line is still produced and every bad line costs exactly one manifest error record.

All in-process (CliRunner) over one demo model loaded once (tests/support/cli_harness.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from support.cli_harness import DemoHarness, Outcome, tree
from support.fuzz_inputs import (
    Case,
    batch_cases,
    batch_command_cases,
    batch_duplicate_case,
    bench_cases,
    profile_cases,
    reference_clip_cases,
    say_hostile_text_cases,
    say_model_cases,
    say_option_cases,
    say_text_cases,
    set_cases,
)
from support.option_cases import NUMBER_CASES, WHOLE_ONLY, option_cases
from voxcli.models.registry import families, find_family

SEED = 20261130
DEMOS = [f.demos[0].name for f in families() if f.demos]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    h = DemoHarness(tmp_path_factory.mktemp("fuzz_cache"))
    yield h
    h.close()


def _materialize(case: Case, d: Path) -> list[str]:
    for name, data in case.files.items():
        (d / name).write_bytes(data)
    return [a.replace("{d}", str(d)) for a in case.argv]


def _check_refused(case: Case, r: Outcome, before: set[str], d: Path, allowed: tuple[str, ...] = ()) -> None:
    where = f"{case.label}: exit {r.code}, stderr {r.stderr!r}"
    assert r.exception is None, f"{where}: raised {r.exception!r}"
    assert r.code != 0, f"{where}: a bad input was accepted"
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, f"{where}: stderr is not one line"
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, where
    assert lines[0].startswith("vox: "), where
    new = tree(d) - before
    written = {p for p in new if not p.startswith(allowed)}
    assert not written, f"{where}: wrote {sorted(written)}"
    for place in allowed:  # the output place may exist (batch makes it before the model load), empty
        assert not [p for p in new if p.startswith(place + "/")], f"{where}: wrote into {place}"
    assert not [p for p in tree(d) if p.endswith(".part")], f"{where}: left a .part file"


def _run_refusals(harness, cases: list[Case], tmp_path: Path, kind: str,
                  allowed: tuple[str, ...] = ()) -> None:
    for i, case in enumerate(cases):
        d = tmp_path / f"{kind}{i}"
        d.mkdir()
        argv = _materialize(case, d)
        before = tree(d)
        stdin = case.stdin if case.stdin is not None else b""
        _check_refused(case, harness.run(argv, input=stdin), before, d, allowed)


def test_fuzz_say_options_text_and_set(harness, tmp_path):
    rng = random.Random(SEED)
    cases = say_option_cases(rng) + say_text_cases(rng) + set_cases(rng, 360) + say_hostile_text_cases(rng)
    assert not [c for c in cases if c.needs_model]
    loaded = harness.engines
    _run_refusals(harness, cases, tmp_path, "say")
    assert harness.engines == loaded, "a mistake visible in the flags reached the model load"
    assert len(cases) >= 450


def test_fuzz_reference_clips(harness, tmp_path):
    cases = reference_clip_cases(random.Random(SEED + 1))
    loaded = harness.engines
    _run_refusals(harness, cases, tmp_path, "clip")
    assert harness.engines == loaded, "a bad reference clip was only found after the model load"


def test_fuzz_mistakes_only_the_model_can_see(harness, tmp_path):
    commands = batch_command_cases(random.Random(SEED + 3))
    cases = say_model_cases(random.Random(SEED + 2)) + [c for c in commands if c.needs_model]
    _run_refusals(harness, cases, tmp_path, "model", allowed=("out",))


def test_fuzz_batch_commands(harness, tmp_path):
    cases = [c for c in batch_command_cases(random.Random(SEED + 3)) if not c.needs_model]
    _run_refusals(harness, cases, tmp_path, "batchcmd")


def test_fuzz_bench_and_profile_options(harness, tmp_path):
    rng = random.Random(SEED + 4)
    _run_refusals(harness, bench_cases(rng) + profile_cases(rng), tmp_path, "bench")


def test_fuzz_batch_lines_fail_alone(harness, tmp_path):
    """Each file mixes bad lines of every kind with good ones: the good ones are written, each bad one
    is exactly one manifest error record naming its line, and stderr says so without internal errors."""
    rng = random.Random(SEED + 5)
    cases = batch_cases(rng, files=40, bad_per_file=9) + [batch_duplicate_case()]
    bad_total = 0
    for i, (case, n_bad, good_ids) in enumerate(cases):
        d = tmp_path / f"batch{i}"
        d.mkdir()
        argv = _materialize(case, d)
        before = tree(d)
        r = harness.run(argv)
        where = f"{case.label}: exit {r.code}, stderr {r.stderr!r}"
        assert r.exception is None, f"{where}: raised {r.exception!r}"
        assert r.code == 1, where  # some items failed
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, where
        out = d / "out"
        records = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
        ok = {rec["id"] for rec in records if rec["status"] == "ok"}
        errors = [rec for rec in records if rec["status"] == "error"]
        assert ok == set(good_ids), f"{where}: good items {sorted(ok)} != {sorted(good_ids)}"
        for gid in good_ids:
            assert (out / f"{gid}.wav").stat().st_size > 44, f"{where}: {gid}.wav missing or empty"
        assert len(errors) == n_bad, f"{where}: {len(errors)} error records for {n_bad} bad lines: {errors}"
        for rec in errors:
            assert rec["file"] is None and "in.t" in rec["error"], rec  # names the input line
            assert "internal" not in rec["error"] and "Traceback" not in rec["error"], rec
        assert f"{len(good_ids)} written, {n_bad} failed" in r.stderr, where
        written = {p for p in tree(d) - before if not p.startswith("out")}
        assert not written and not [p for p in tree(d) if p.endswith(".part")], where
        bad_total += n_bad
    assert bad_total >= 300


def test_fuzz_total_is_over_a_thousand():
    """The generated bad inputs the tests above try (same seeds) add up to at least 1,000."""
    counts = {
        "say": len(say_option_cases(random.Random(SEED)) + say_text_cases(random.Random(SEED))) + 360
        + len(say_hostile_text_cases(random.Random(SEED))),
        "clips": len(reference_clip_cases(random.Random(SEED + 1))),
        "model": len(say_model_cases(random.Random(SEED + 2))),
        "batch commands": len(batch_command_cases(random.Random(SEED + 3))),
        "bench/profile": len(bench_cases(random.Random(SEED + 4)) + profile_cases(random.Random(SEED + 4))),
        "batch lines": sum(n for _, n, _ in batch_cases(random.Random(SEED + 5), 40, 9)) + 2,
    }
    assert sum(counts.values()) >= 1000, counts


def schema_lines(model: str) -> tuple[list[str], list[tuple[str, str]]]:
    """JSONL lines for `vox batch -m model`: two good ones and one per hostile value of each option of
    the family's schema (tests/support/option_cases.py) and of the typed numeric fields a line carries
    (seed, cfg_scale); returns the lines and (id, field the refusal must name) of the bad ones."""
    family = find_family(model)
    assert family is not None
    lines = ['{"id": "good1", "text": "w1 w2."}', '{"id": "good2", "text": "w3 w4."}']
    bad: list[tuple[str, str]] = []
    for n, (option, text, _case) in enumerate(option_cases(family.options)):
        lines.append(f'{{"id": "o{n}", "text": "w1.", "options": {{"{option}": {text}}}}}')
        bad.append((f"o{n}", option))
    for name in ("seed", "cfg_scale"):
        for n, (text, case) in enumerate(NUMBER_CASES + (WHOLE_ONLY if name == "seed" else ())):
            if name == "cfg_scale" and case == "tiny":
                continue  # 1e-300 is a guidance scale the shared range holds (a family may refuse it)
            lines.append(f'{{"id": "{name}{n}", "text": "w1.", "{name}": {text}}}')
            bad.append((f"{name}{n}", name))
    return lines, bad


@pytest.mark.parametrize("model", DEMOS)
def test_fuzz_batch_option_schema_of_every_family(harness, tmp_path, model):
    """Every demo family's `vox batch`: each JSONL line holding a hostile option value (from the family's
    schema) or a hostile seed / cfg_scale fails alone with a record naming the field; the good lines are
    written; no internal error."""
    lines, bad = schema_lines(model)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    r = harness.run(["batch", "-m", model, "--greedy", "--max-frames", "4", "-q", str(src), "-o", str(out)])
    where = f"{model}: exit {r.code}, stderr {r.stderr!r}"
    assert r.exception is None and r.code == 1, where
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, where
    records = {rec["id"]: rec for rec in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    assert records["good1"]["status"] == records["good2"]["status"] == "ok", where
    wrong = [(i, name, records.get(i)) for i, name in bad
             if records.get(i, {}).get("status") != "error" or name not in records[i]["error"]
             or "internal" in records[i]["error"]]
    assert not wrong, f"{len(wrong)} of {len(bad)} bad lines not refused naming the field: {wrong[:10]}"
