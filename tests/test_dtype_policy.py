"""Every family's loaded program is in the dtypes its spec module's DTYPE_POLICY declares (models/dtypes.py).

Each registered demo is loaded in float32 and in bfloat16 and every declared part's weights (the floating
tensors of its modules' state dicts; another part's modules nested inside are that part's) are checked
against `policy.torch_dtype(part, dtype)`: a loader that stops applying the declaration, or a declaration
that no longer says what the loader does, fails here. The policy's rules themselves are unit-tested below.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from voxcli.models.dtypes import (
    FLOAT32_AT_LEAST,
    FOLLOWS,
    AtLeast,
    DtypePolicy,
    Fixed,
    Part,
    dtype_name,
    torch_dtype,
)
from voxcli.models.registry import demos, families, find_demo, resolve

DEMOS = [d.name for d in demos()]
DOCS = Path(__file__).resolve().parents[1] / "docs" / "models.md"


def declared_policy(family) -> DtypePolicy:  # noqa: ANN001 - a registry Family
    """The DTYPE_POLICY of the spec module the family's `describe` entry names."""
    module = family.describe.ref.partition(":")[0]
    policy = resolve(f"{module}:DTYPE_POLICY")
    assert isinstance(policy, DtypePolicy), f"{module}.DTYPE_POLICY is not a DtypePolicy"
    return policy


def at_path(program, path: str):  # noqa: ANN001, ANN201 - a model program, an nn.Module
    obj = program
    for attr in path.split("."):
        obj = getattr(obj, attr)
    return obj


def weights_of(program, policy: DtypePolicy, part: str) -> dict[str, object]:  # noqa: ANN001
    """Floating weights of `part` by full path, less those under another part's paths nested in its own."""
    import torch

    other_paths = [p for name, other in policy.parts.items() if name != part for p in other.modules]
    found: dict[str, torch.Tensor] = {}
    for path in policy.parts[part].modules:
        nested = [p for p in other_paths if p.startswith(f"{path}.")]
        module = at_path(program, path)
        if isinstance(module, torch.Tensor):
            found[path] = module
            continue
        assert isinstance(module, torch.nn.Module), f"{part}: {path} is a {type(module).__name__}"
        for name, t in module.state_dict().items():
            full = f"{path}.{name}"
            if t.is_floating_point() and not any(full == p or full.startswith(f"{p}.") for p in nested):
                found[full] = t
    return found


def test_every_family_declares_a_policy_with_an_lm():
    for family in families():
        policy = declared_policy(family)
        assert "lm" in policy.parts, f"{family.name}: no lm part"
        assert policy.parts["lm"].rule == FOLLOWS, f"{family.name}: the LM must follow --dtype"
        assert {"float32", "bfloat16"} <= set(policy.accepts), family.name


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("demo", DEMOS)
def test_loaded_parts_are_in_their_declared_dtypes(demo, dtype, demo_store):
    from voxcli.models import load_model

    family, _ = find_demo(demo)
    policy = declared_policy(family)
    program = load_model(str(demo_store.built(demo)), dtype=dtype)
    assert program.dtype == policy.torch_dtype("lm", dtype)
    walked = 0
    for part in policy.parts:
        want = policy.torch_dtype(part, dtype)
        weights = weights_of(program, policy, part)
        assert weights or not policy.parts[part].modules, f"{demo}: part {part!r} has no weights"
        wrong = {k: t.dtype for k, t in weights.items() if t.dtype != want}  # type: ignore[attr-defined]
        assert not wrong, f"{demo} in {dtype}: part {part!r} is declared {want}, but {wrong}"
        walked += len(weights)
    assert walked > 0


def test_rules_resolve_as_declared():
    policy = DtypePolicy(
        parts={"lm": Part(FOLLOWS, ()), "codec": Part(FLOAT32_AT_LEAST, ()),
               "enc": Part(Fixed("float32"), ())},
        accepts=("float32", "bfloat16", "float64"),
    )
    asked = ("float32", "bfloat16", "float64")
    assert [policy.name("lm", d) for d in asked] == ["float32", "bfloat16", "float64"]
    assert [policy.name("codec", d) for d in asked] == ["float32", "float32", "float64"]
    assert [policy.name("enc", d) for d in asked] == ["float32", "float32", "float32"]
    assert policy.name("codec", "bfloat16", {"codec": "float64"}) == "float64"
    assert AtLeast("float64").resolve("bfloat16") == "float64"
    with pytest.raises(ValueError, match="dtype must be one of float32, bfloat16, float64, got 'float16'"):
        policy.name("lm", "float16")
    with pytest.raises(KeyError, match="no part 'flow'"):
        policy.name("flow", "float32")
    with pytest.raises(ValueError, match="a part's rule"):
        Part("float32", ())


def test_names_and_torch_dtypes_round_trip():
    import torch

    for name in ("float32", "bfloat16", "float16", "float64"):
        assert dtype_name(torch_dtype(name)) == name
    assert torch_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(ValueError, match="got 'fp8'"):
        torch_dtype("fp8")


def test_docs_table_is_the_declared_policies():
    """docs/models.md's dtype table lists each family's parts as its DTYPE_POLICY declares them."""
    text = DOCS.read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+?) \|$", text, flags=re.M))
    for family in families():
        package = family.describe.ref.split(".")[1].split(":")[0]
        policy = declared_policy(family)
        parts = ", ".join(f"{name}: {part.rule}" for name, part in policy.parts.items())
        want = f"{parts} | {', '.join(policy.accepts)}"
        assert rows.get(package) == want, f"docs/models.md's dtype row for {package}"
