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

# Edges other engineers of issue 42 remove: the CosyVoice 2 -> 3 sharing (a whole-family entry) and the
# LM layers (one module each). Each entry must still exist, so that whoever removes an edge also removes
# its entry here; a new edge is never added to this list.
PENDING = {
    ("cosyvoice2", "cosyvoice3"),
    ("speechlm", "qwen3_tts.layers"), ("speechlm", "qwen3_tts.config"),
    ("orpheus", "qwen3_tts.layers"), ("orpheus", "higgs_audio.layers"), ("orpheus", "higgs_audio.config"),
    ("csm", "qwen3_tts.layers"), ("csm", "higgs_audio.layers"), ("csm", "higgs_audio.config"),
    ("kyutai_tts", "qwen3_tts.layers"),
    ("higgs_audio", "qwen3_tts.layers"),
    ("cosyvoice3", "qwen3_tts.layers"),
    ("vibevoice", "qwen3_tts.layers"),
    # VibeVoice's Qwen2 backbone is CosyVoice 3's LM config and model: LM layers too
    ("vibevoice", "cosyvoice3.config"), ("vibevoice", "cosyvoice3.lm"),
}


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


def pending(family: str, other: str, target: str) -> bool:
    return (family, other) in PENDING or (family, target) in PENDING


def test_mimi_is_a_library_not_a_family():
    assert "mimi" not in FAMILY_PACKAGES
    assert not (MODELS / "mimi").exists(), "Mimi lives in models/codecs/mimi/"
    assert (MODELS / "codecs" / "mimi" / "codec.py").is_file()


@pytest.mark.parametrize("family", FAMILY_PACKAGES)
def test_no_family_imports_another(family):
    assert (MODELS / family / "family.py").is_file(), family
    bad = [f"{family} imports {target}: {', '.join(where)}"
           for (other, target), where in sorted(edges(family).items()) if not pending(family, other, target)]
    assert not bad, "import it from the model library instead (issue 42):\n" + "\n".join(bad)


@pytest.mark.parametrize("entry", sorted(PENDING))
def test_every_pending_edge_still_exists(entry):
    family, target = entry
    found = edges(family)
    assert any(target in (other, t) for other, t in found), (
        f"{family} no longer imports {target}: remove {entry} from PENDING in tests/test_family_imports.py")


def test_the_library_imports_no_family():
    families = set(FAMILY_PACKAGES)
    bad = []
    for path in sorted(MODELS.rglob("*.py")):
        rel = path.relative_to(MODELS)
        if rel.parts[0] in families:
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
