"""sha256 of every GPU cost profile: the shipped recipes/gpus/*.toml and what each family's cost model
writes for every simulated GPU x setting (the refactor check of issue 42: byte-identical profiles).

    python -m benchmarks profile_hashes --write out/profile_hashes.json   # before a change
    python -m benchmarks profile_hashes --check out/profile_hashes.json   # after: lists every difference

The fitted parameters are held fixed (the shipped H100 fits: Qwen's v2 row_ms 0.0738 and a v1 floor of
7.0 ms, Higgs' row_ms 0.0341, CosyVoice 3's DiT efficiency 0.3423, carried to CosyVoice 2's flow), so a
difference is the arithmetic's, never a refit's.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNFITTED = ("dia", "zonos", "orpheus", "csm", "kyutai_tts", "vibevoice")
BOTH = ("pessimistic", "optimistic")
QWEN_FITS = {"v1": 7.0, "v2": 0.0738}
HIGGS_ROW_MS = 0.0341
DIT_EFF = 0.3423


def _sim(family: str) -> object:
    return importlib.import_module(f"models.{family}.sim")


def generated() -> Iterator[tuple[str, Callable[[], str]]]:
    """(name, the text's maker) for every family x GPU x setting."""
    gpus = tuple(importlib.import_module("models.sim_priors").GPUS)
    for gpu in gpus:
        qwen = _sim("qwen3_tts")
        for model, fitted in QWEN_FITS.items():
            yield f"qwen3_tts/{gpu}/{model}", \
                lambda q=qwen, g=gpu, f=fitted, m=model: q.profile_toml(g, f, model=m)
        for family in UNFITTED:
            for setting in BOTH:
                yield f"{family}/{gpu}/{setting}", \
                    lambda c=_sim(family).COST, g=gpu, s=setting: c.profile_toml(g, s)
        speech = _sim("speechlm")
        for model in speech.MODELS:
            for setting in BOTH:
                yield f"speechlm/{model}/{gpu}/{setting}", \
                    lambda c=speech.COSTS[model], g=gpu, s=setting: c.profile_toml(g, s)
        for setting in _sim("higgs_audio").SETTINGS:
            yield f"higgs_audio/{gpu}/{setting}", \
                lambda m=_sim("higgs_audio"), g=gpu, s=setting: m.profile_toml(g, s, HIGGS_ROW_MS)
        for family in ("cosyvoice3", "cosyvoice2"):
            for setting in BOTH:
                eff = DIT_EFF if setting == "pessimistic" else None
                yield f"{family}/{gpu}/{setting}", \
                    lambda m=_sim(family), g=gpu, s=setting, e=eff: m.profile_toml(g, s, e)


def hashes() -> dict[str, str]:
    out = {f"recipes/gpus/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
           for p in sorted((ROOT / "recipes" / "gpus").glob("*.toml"))}
    for name, make in generated():
        out[name] = hashlib.sha256(make().encode()).hexdigest()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="write the hashes (JSON) here")
    mode.add_argument("--check", type=Path, help="compare with hashes written before")
    a = ap.parse_args()
    now = hashes()
    if a.write is not None:
        a.write.parent.mkdir(parents=True, exist_ok=True)
        a.write.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} profiles hashed -> {a.write}")
        return 0
    before = json.loads(a.check.read_text())
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for name in differ:
        print(f"DIFFERS  {name}: {before.get(name, 'absent')[:12]} -> {now.get(name, 'absent')[:12]}")
    print(f"{len(now)} profiles, {len(before)} before: {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
