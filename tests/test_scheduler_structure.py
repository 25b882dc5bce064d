"""The scheduler's shape (issues 28, 42): a thin scheduler wiring parts that own their data (no class
stands on more than one part, no part reads another object's private fields), policies picked from
registries by name and never compared by name in the mechanism, no import circle inside the engine."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from voxcli.config import ADMISSIONS, POLICIES, ConfigError, EngineConfig
from voxcli.engine.admission_policies import ADMISSION_POLICIES, admission_policy
from voxcli.engine.lane_policies import LANE_POLICIES, lane_policy

ENGINE = Path(__file__).resolve().parent.parent / "voxcli" / "engine"


def _engine_modules() -> dict[str, Path]:
    return {"voxcli.engine." + ".".join(p.relative_to(ENGINE).with_suffix("").parts): p
            for p in ENGINE.rglob("*.py") if p.name != "__init__.py"}


def test_no_import_circle_inside_the_engine() -> None:
    """Every import counts: TYPE_CHECKING and function-level ones too (as the import-circle tool)."""
    mods = _engine_modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            edges[m] |= {n for n in names if n in mods and n != m}
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(edges[m]):
            assert state.get(n) != 1, f"import circle: {' -> '.join([*path, m, n])}"
            if n not in state:
                visit(n, [*path, m])
        state[m] = 2

    for m in sorted(mods):
        if m not in state:
            visit(m, [])


# the scheduler's parts (engine/scheduler.py's docstring), by class name and module
PARTS = {"RequestBook": "request_book", "LmBatcher": "lm_batcher", "CodecBatcher": "codec_batcher",
         "HandOffSink": "handoff", "RemoteFrameSource": "remote_source", "Scheduler": "scheduler"}


def _classes() -> list[tuple[str, ast.ClassDef]]:
    return [(name, node) for name, p in _engine_modules().items()
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)]


def _base_names(node: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "?"
            for b in node.bases]


def test_no_class_has_more_than_one_scheduler_part_as_a_base() -> None:
    classes = _classes()
    found = {node.name: name for name, node in classes if node.name in PARTS}
    assert found == {cls: f"voxcli.engine.{mod}" for cls, mod in PARTS.items()}, "a part moved or is missing"
    for name, node in classes:
        parts = [b for b in _base_names(node) if b in PARTS]
        assert len(parts) <= 1, f"{name}.{node.name} stands on several scheduler parts: {parts}"
        if node.name in PARTS:  # a part owns its data: it is built alone, never a mixin over another part
            assert not node.bases, f"{node.name} has bases {_base_names(node)}"


def test_no_part_reads_another_objects_private_fields() -> None:
    """In a part's module, a `_name` is only ever read or written on `self` (a part talks to another
    through its public methods and properties)."""
    for mod in PARTS.values():
        path = ENGINE / f"{mod}.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute):
                continue
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id == "self", \
                    f"{mod}.py:{node.lineno} reads {ast.unparse(node)}: another object's private field"


def test_role_engines_extend_the_engine_only_through_its_public_seam() -> None:
    """No role engine (engine/roles.py) overrides or adds a private method of the Engine's."""
    from voxcli.engine.engine import Engine
    from voxcli.engine.roles import CodecEngine, LMEngine

    for role in (LMEngine, CodecEngine):
        for cls in role.__mro__[:role.__mro__.index(Engine)]:
            private = [name for name in vars(cls) if name.startswith("_") and not name.startswith("__")]
            assert not [name for name in private if hasattr(Engine, name)], \
                f"{cls.__name__} overrides the Engine's private {[n for n in private if hasattr(Engine, n)]}"


def test_no_policy_name_compared_in_the_engine() -> None:
    pattern = re.compile(r"\b(policy|admission)\s*(==|!=|not in|in)\s*[(\"']")
    for name, p in _engine_modules().items():
        if name.startswith("voxcli.engine.executors.cuda"):
            continue  # the cuda executor's partition split (not part of the scheduler split)
        hits = [line for line in p.read_text(encoding="utf-8").splitlines() if pattern.search(line)]
        assert not hits, f"{p.name} compares a policy by name: {hits}"


def test_file_sizes() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in _engine_modules().values()}
    assert sizes["scheduler.py"] <= 450
    assert max(sizes.values()) <= 600, sizes


def test_config_names_are_the_registries() -> None:
    assert set(POLICIES) == set(LANE_POLICIES) == {"full", "lanes", "sync2", "sync"}
    assert set(ADMISSIONS) == set(ADMISSION_POLICIES) == {"prefill-first", "deadline", "ttfa-gate"}
    with pytest.raises(ConfigError, match="policy must be one of"):
        EngineConfig(policy="fastest").validate()
    with pytest.raises(ValueError, match="unknown policy"):
        lane_policy("fastest")
    with pytest.raises(ValueError, match="unknown admission"):
        admission_policy("fastest")


def test_policy_objects() -> None:
    """What the mechanism reads of each policy instead of its name."""
    assert [n for n in LANE_POLICIES if lane_policy(n).has_urgent_lane] == ["full"]
    assert {n for n in LANE_POLICIES if lane_policy(n).deadline_batches} == {"full", "lanes"}
    assert {n for n in LANE_POLICIES if lane_policy(n).separate_lanes} == {"full", "lanes"}
    assert [n for n in LANE_POLICIES if lane_policy(n).serialized] == ["sync"]
    assert {n: lane_policy(n).first_lane for n in LANE_POLICIES} == {
        "full": "urgent", "lanes": "background", "sync2": "background", "sync": "background"}
    assert {n for n in ADMISSION_POLICIES if admission_policy(n).deadline_aware} == {"deadline", "ttfa-gate"}
    assert [n for n in ADMISSION_POLICIES if admission_policy(n).gate is not None] == ["ttfa-gate"]
    assert admission_policy("ttfa-gate").gate is not admission_policy("ttfa-gate").gate  # state per engine
