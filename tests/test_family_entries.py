"""Families register their code as lazy entry points (models/registry.py `Entry`): every one of them names
a module and attribute that exist, and the resolver reads them the way the wrapper functions they replace
did (bound keywords under the caller's, values returned as they are)."""

from __future__ import annotations

import pytest
from voxcli.models import registry
from voxcli.models.registry import Entry, resolve


def entries() -> list[tuple[str, Entry]]:
    out: list[tuple[str, Entry]] = []
    for f in registry.families():
        for field in ("load", "describe", "claims", "calibration", "reference", "profile_ops"):
            value = getattr(f, field)
            if value is not None:
                out.append((f"{f.name}.{field}", value))
        out += [(f"{f.name} demo {d.name}", d.build) for d in f.demos]
        for t in f.tiny:
            out += [(f"tiny {t.name}.build", t.build), (f"tiny {t.name}.size_table", t.size_table)]
            out += [(f"tiny {t.name}.program", t.program)] if t.program is not None else []
    return out


def test_every_registration_is_an_entry_point_that_resolves():
    found = entries()
    assert len(found) > 60  # eleven families, each registering its loader, describer, builders...
    for where, entry in found:
        assert isinstance(entry, Entry), f"{where} is a wrapper function, not an Entry"
        assert resolve(entry.ref) is not None, where


def test_an_entry_binds_keywords_and_returns_values_as_they_are():
    join = Entry("os.path:join")
    assert join("a", "b") == "a/b"
    sep = Entry("os:sep")
    assert sep() == "/"
    with pytest.raises(TypeError, match="is a value"):
        sep(1)
    bound = Entry("builtins:dict", size="tiny")
    assert bound(seed=3) == {"size": "tiny", "seed": 3} and bound(size="real") == {"size": "real"}
    assert Entry("os:sep") == sep and Entry("os:sep") != join
    with pytest.raises(ValueError, match="package.module"):
        Entry("nodots")


def test_tiny_sizes_come_from_the_builders_tables():
    assert registry.find_tiny("higgs").sizes()[-1] == "real"  # the released size beyond the table
    assert registry.find_tiny("speechlm").sizes() == ("tiny", "real", "hear-tiny", "hear-real")


def test_a_models_reference_resolves_in_the_package_models_is_imported_as():
    # installed, models/ is voxcli.models: the program class must be the one the loader's callers import
    from voxcli.models.qwen3_tts import spec

    assert resolve("models.qwen3_tts.spec:describe") is spec.describe
    assert resolve("models.qwen3_tts.spec") is spec
