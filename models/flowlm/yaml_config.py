"""Reading upstream's CosyVoice yaml (`cosyvoice2.yaml`, `cosyvoice3.yaml`: HyperPyYAML files) without
HyperPyYAML: plain YAML whose `!new:` / `!name:` tags become dicts with a `__class__` key, `!ref <x>`
(and products such as `<a> * <b>`) resolve against the top-level keys, and `!apply:` (the seeding
lines) is dropped. Nothing is imported or executed: the file only gives the dimensions. Also the two
helpers every config parser here uses: a typed section (`yaml_section`) and a dataclass's fields of a
mapping (`pick_fields`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..base import CheckpointError


class _Ref(str):
    """A `!ref` expression, resolved after the whole file is read."""


class _Loader(yaml.SafeLoader):
    pass


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        value: Any = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_scalar(node)
    return {"__class__": suffix, **(value if isinstance(value, dict) else {"args": value})}


def _ref(loader: yaml.SafeLoader, node: yaml.Node) -> _Ref:
    return _Ref(loader.construct_scalar(node))


_Loader.add_multi_constructor("!new:", _tagged)
_Loader.add_multi_constructor("!name:", _tagged)
_Loader.add_multi_constructor("!apply:", lambda loader, suffix, node: None)
_Loader.add_constructor("!ref", _ref)


def _resolve(value: Any, top: dict[str, Any], where: Path) -> Any:
    if isinstance(value, _Ref):
        names = re.findall(r"<([^>]+)>", value)
        rest = re.sub(r"<[^>]+>", "", value).replace("*", "").strip()
        if not names or rest:
            raise CheckpointError(f"{where}: cannot read the reference {value!r} (only <key> and <a> * <b>)")
        out: Any = 1
        for n in names:
            if n not in top:
                raise CheckpointError(f"{where}: reference <{n}> names no top-level key")
            v = _resolve(top[n], top, where)
            out = v if len(names) == 1 else out * v
        return out
    if isinstance(value, dict):
        return {k: _resolve(v, top, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, top, where) for v in value]
    return value


def read_hyperpyyaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing; the checkpoint is incomplete") from None
    try:
        raw = yaml.load(text, Loader=_Loader)  # noqa: S506 - our loader constructs plain data only
    except yaml.YAMLError as e:
        raise CheckpointError(f"{path} is not valid YAML ({e})") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path} is not a mapping of settings")
    return _resolve(raw, raw, path)


def yaml_section(raw: dict[str, Any], key: str, where: Path, cls_suffix: str, family: str) -> dict[str, Any]:
    """The `key` section, refused unless its `__class__` ends in `cls_suffix` (what `family` serves)."""
    sec = raw.get(key)
    if not isinstance(sec, dict):
        raise CheckpointError(f"{where}: no `{key}` section; this is not a {family} configuration")
    got = str(sec.get("__class__", ""))
    if not got.endswith(cls_suffix):
        raise CheckpointError(
            f"{where}: `{key}` is {got or 'untyped'}, voxcli serves {family} ({cls_suffix})"
        )
    return sec


def pick_fields(d: dict[str, Any], cls: type, names: dict[str, str] | None = None) -> dict[str, Any]:
    """The fields of dataclass `cls` present in `d` (`names` maps field -> yaml key where they differ);
    yaml lists become tuples (of tuples), as the frozen dataclasses declare them."""
    names = names or {}
    out: dict[str, Any] = {}
    for f in cls.__dataclass_fields__:
        key = names.get(f, f)
        if key in d:
            v = d[key]
            out[f] = tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
    return out
