"""No object reads another object's private fields, anywhere in voxcli/ (issue 42: parts own their data).

Every module is parsed with `ast`. A `_name` (not a dunder) may follow only `self`, `cls`, `super()` or an
imported module's name; `getattr`/`hasattr`/`setattr`/`delattr` with a literal `_name` count as reads
too. What an object needs of another goes through a public method or property (an engine's `load()`,
a stream's `take()`, ...). The few exceptions are listed below, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VOXCLI = ROOT / "voxcli"

# (file relative to the repo root, attribute) -> why it may be read there
ALLOWED: dict[tuple[str, str], str] = {
    ("voxcli/tables.py", "_layouts"): "a FigureTable lays out the tables it splits into (its own class)",
}
# Python's own public names that begin with an underscore (namedtuple's API)
PUBLIC_UNDERSCORE = {"_replace", "_asdict", "_fields", "_make"}
ATTR_CALLS = {"getattr", "hasattr", "setattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) \
        and name not in PUBLIC_UNDERSCORE


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound by `import x` / `import x.y as z` anywhere in the module: a module's `_name` is its own
    business (sys._getframe, os._exit)."""
    return {(a.asname or a.name).split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
            for a in node.names}


def _own(owner: ast.expr, modules: set[str]) -> bool:
    if isinstance(owner, ast.Name):
        return owner.id in ("self", "cls") or owner.id in modules
    return isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super"


def private_reads(source: str, path: str) -> list[tuple[str, int, str, str]]:
    """(path, line, attribute, the expression) of every read of another object's private field."""
    tree = ast.parse(source)
    modules = _module_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value, modules):
            found.append((path, node.lineno, node.attr, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTR_CALLS
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)
              and not _own(node.args[0], modules)):
            found.append((path, node.lineno, node.args[1].value, ast.unparse(node)))
    return found


def test_no_module_reads_another_objects_private_fields() -> None:
    found = []
    for p in sorted(VOXCLI.rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        hits = private_reads(p.read_text(encoding="utf-8"), rel)
        found += [hit for hit in hits if (hit[0], hit[2]) not in ALLOWED]
    assert not found, "reads of another object's private fields (add a public method, or allow it with a " \
        "reason in ALLOWED):\n" + "\n".join(f"{path}:{line}: {expr}" for path, line, _, expr in found)


def test_every_allowance_is_still_needed() -> None:
    """An allowance whose read is gone is removed, so the list only ever shrinks to what is real."""
    used = set()
    for p in sorted(VOXCLI.rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        used |= {(hit[0], hit[2]) for hit in private_reads(p.read_text(encoding="utf-8"), rel)}
    assert set(ALLOWED) <= used, f"allowed but no longer read: {sorted(set(ALLOWED) - used)}"


@pytest.mark.parametrize("code, hits", [
    ("self._a; cls._b; super()._c()", []),
    ("import sys\nsys._getframe()", []),
    ("import os.path as osp\nosp._x", []),
    ("p._replace(a=1); p.__class__; p._fields", []),
    ("other._a", ["other._a"]),
    ("self.engine._closed", ["self.engine._closed"]),
    ("from voxcli import x\nx._y", ["x._y"]),  # a name from `from ... import` may be a class or object
    ("getattr(engine, '_dead', None)", ["getattr(engine, '_dead', None)"]),
    ("setattr(self, '_own', 1); getattr(e, 'public')", []),
    ("e._pos = 1", ["e._pos"]),  # writing counts as much as reading
])
def test_the_check_itself(code: str, hits: list[str]) -> None:
    assert [expr for *_, expr in private_reads(code, "m.py")] == hits
