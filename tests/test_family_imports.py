"""No model family imports another (issue 42): a part two families need lives in the model library
(models/codecs/, models/audio/, models/sampling.py, models/weights.py, ...) and each family imports it
from there. The check is the issue's grep, run per family package of models/registry.py in Python with the
same regex; Mimi is a library (models/codecs/mimi/), not a family."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from voxcli.models.registry import FAMILY_PACKAGES

MODELS = Path(__file__).resolve().parents[1] / "models"
FAMILIES = "qwen3_tts|dia|higgs_audio|speechlm|cosyvoice[23]|csm|orpheus|kyutai_tts|vibevoice|zonos"
# the issue's `grep -rnE` pattern, as written there
ISSUE_EDGE = re.compile(rf"from \.\.({FAMILIES})\b|models\.({FAMILIES})\.")
# what a library module (outside every family package) may not import, at any depth of relative import
LIBRARY_EDGE = re.compile(rf"from \.+({FAMILIES})\b|models\.({FAMILIES})\.")



def edges(family: str) -> dict[tuple[str, str], list[str]]:
    """(imported family, imported family.module) -> the lines (path:line) of family's package that import
    it, other than from itself."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted((MODELS / family).rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in ISSUE_EDGE.finditer(line):
                other = m.group(1) or m.group(2)
                if other == family:
                    continue
                module = re.match(r"\.?(\w+)", line[m.end():])
                target = f"{other}.{module.group(1)}" if module else other
                found.setdefault((other, target), []).append(f"{path.relative_to(MODELS.parent)}:{n}")
    return found


def test_mimi_is_a_library_not_a_family():
    assert "mimi" not in FAMILY_PACKAGES
    assert not (MODELS / "mimi").exists(), "Mimi lives in models/codecs/mimi/"
    assert (MODELS / "codecs" / "mimi" / "codec.py").is_file()


@pytest.mark.parametrize("family", FAMILY_PACKAGES)
def test_no_family_imports_another(family):
    assert (MODELS / family / "family.py").is_file(), family
    bad = [f"{family} imports {target}: {', '.join(where)}"
           for (_other, target), where in sorted(edges(family).items())]
    assert not bad, "import it from the model library instead (issue 42):\n" + "\n".join(bad)


def test_the_library_imports_no_family():
    families = set(FAMILY_PACKAGES)
    bad = []
    for path in sorted(MODELS.rglob("*.py")):
        rel = path.relative_to(MODELS)
        # the registry resolves the families' "models.<family>.module:name" entries: it names them as data
        if rel.parts[0] in families or rel == Path("registry.py"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if LIBRARY_EDGE.search(line):
                bad.append(f"models/{rel}:{n}: {line.strip()}")
    assert not bad, bad


def test_the_check_finds_an_edge():
    """The regex sees the import forms the families use, so a passing check means something."""
    for line in ("from ..dia.layers import X", "from ..cosyvoice3 import sim as cv3",
                 "    from voxcli.models.csm.sim import terms"):
        assert ISSUE_EDGE.search(line), line
    assert not ISSUE_EDGE.search("from ..codecs.mimi.codec import MimiCodec")
    assert not ISSUE_EDGE.search("from .layers import Rotary")
