"""Every runtime dependency is bounded on both sides, and the installed versions (what the suite runs
on) lie inside the bounds: an unbounded `typer>=0.12` let typer 0.29 in, which broke `vox --debug`."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _v(text: str) -> tuple[int, ...]:
    m = re.match(r"\d+(?:\.\d+)*", text)
    assert m, text
    return tuple(int(x) for x in m.group(0).split("."))


def _bounds(requirement: str) -> tuple[str, list[tuple[str, str]]]:
    name, spec = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", requirement).groups()
    return re.sub(r"\[.*\]", "", name), [(op, v.strip()) for op, v in re.findall(r"(>=|<=|==|<|>)\s*([^,]+)",
                                                                                spec)]


def _inside(installed: tuple[int, ...], op: str, bound: tuple[int, ...]) -> bool:
    n = max(len(installed), len(bound))
    a, b = installed + (0,) * (n - len(installed)), bound + (0,) * (n - len(bound))
    return {">=": a >= b, "<=": a <= b, "<": a < b, ">": a > b, "==": a == b}[op]


def test_every_runtime_dependency_has_both_bounds_and_the_installed_version_is_inside():
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert deps
    for req in deps:
        name, bounds = _bounds(req)
        ops = {op for op, _ in bounds}
        assert ops & {">=", "=="} and ops & {"<", "<=", "=="}, f"{req}: needs a lower and an upper bound"
        installed = _v(version(name))
        for op, bound in bounds:
            assert _inside(installed, op, _v(bound)), f"installed {name} {version(name)} is outside {req}"


def test_typer_is_held_below_its_next_minor():
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    typer = next(r for r in deps if r.startswith("typer"))
    assert re.search(r"<\s*0\.\d+", typer), typer
