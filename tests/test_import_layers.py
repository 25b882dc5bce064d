"""Data flows one way: front ends (the CLI, `vox serve`, the Ray cluster) -> the session layer and the
Python API -> engine -> executors -> models. Every import counts here, those inside functions and under
TYPE_CHECKING too: a lower layer that imports a higher one, even lazily, is how import circles start."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "voxcli"
CLI = ("voxcli.cli", "voxcli.cli_speech", "voxcli.cli_options")

# module (or package) -> the modules it must never import
FORBIDDEN = {
    "voxcli/session.py": (*CLI, "voxcli.api", "voxcli.server", "voxcli.cluster", "voxcli.bench"),
    "voxcli/api.py": (*CLI, "voxcli.server", "voxcli.cluster", "voxcli.bench"),
    "voxcli/request_fields.py": (*CLI, "voxcli.api", "voxcli.session", "voxcli.server", "voxcli.cluster"),
    "voxcli/console.py": (*CLI, "voxcli.api", "voxcli.session", "voxcli.server", "voxcli.cluster"),
    "voxcli/server": (*CLI, "voxcli.api", "voxcli.bench"),
    "voxcli/cluster": (*CLI, "voxcli.api", "voxcli.server.cli", "voxcli.bench"),
    "voxcli/speak.py": (*CLI, "voxcli.api", "voxcli.session", "voxcli.server", "voxcli.cluster"),
    "voxcli/batch.py": (*CLI, "voxcli.api", "voxcli.session", "voxcli.server", "voxcli.cluster"),
    "voxcli/speak_choice.py": (*CLI, "voxcli.api", "voxcli.session", "voxcli.server", "voxcli.cluster"),
    "voxcli/speech_engine.py": (*CLI, "voxcli.api", "voxcli.session", "voxcli.server", "voxcli.cluster"),
    "voxcli/text_phase.py": (*CLI, "voxcli.api", "voxcli.session", "voxcli.server", "voxcli.cluster"),
    "voxcli/audio.py": (*CLI, "voxcli.api", "voxcli.session", "voxcli.server", "voxcli.cluster"),
}


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


@pytest.mark.parametrize("where", sorted(FORBIDDEN))
def test_no_import_points_up(where):
    target = ROOT.parent / where
    files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
    assert files, where
    bad = [f"{f.relative_to(ROOT.parent)} imports {name}" for f in files for name in sorted(imports(f))
           if any(name == up or name.startswith(up + ".") for up in FORBIDDEN[where])]
    assert not bad, bad
