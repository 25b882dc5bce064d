"""The tensor tables moshi 0.2.13 itself builds for a Kyutai TTS config (the Kyutai oracle venv), on the meta
device (no weights: the 1.6B model's table takes seconds): the LM through `loaders.get_moshi_lm` in bfloat16
or float32 with per-weight-set `in_projs.N` / `out_projs.N` stacked back into the released
`in_proj_weight` / `out_proj.weight`, and Mimi through `loaders.get_mimi` (moshi's fixed Mimi when the
config names no `mimi_config_name`).

    python kyutai_layout.py OUT.json CONFIG_JSON:DTYPE [CONFIG_JSON:DTYPE ...]

OUT.json: {CONFIG_JSON: {"lm": {name: [shape, dtype]}, "mimi": {name: [shape, dtype]}}, ...}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from moshi.models import loaders

FILE_KEYS = ("moshi_name", "mimi_name", "tokenizer_name", "mimi_config_name", "model_type", "lm_gen_config",
             "tts_config", "model_id")


def stacked(state: dict[str, torch.Tensor]) -> dict[str, list]:
    out: dict[str, list] = {}
    for name, t in state.items():
        for part, target in (("in_projs", "in_proj_weight"), ("out_projs", "out_proj.weight")):
            if f".{part}." in name:
                key = name.split(f".{part}.")[0] + "." + target
                rows = out[key][0][0] if key in out else 0
                out[key] = [[rows + t.shape[0], *t.shape[1:]], str(t.dtype)]
                break
        else:
            out[name] = [list(t.shape), str(t.dtype)]
    return out


def tables(path: Path, dtype: torch.dtype) -> dict[str, dict[str, list]]:
    config = json.loads(path.read_text())
    mimi_config = None
    if config.get("mimi_config_name"):
        mimi_config = json.loads((path.parent / config["mimi_config_name"]).read_text())
    kwargs = {k: v for k, v in config.items() if k not in FILE_KEYS}
    with torch.device("meta"):
        lm = loaders.get_moshi_lm(None, lm_kwargs=kwargs, device="meta", dtype=dtype)
        mimi = loaders.get_mimi(None, mimi_config, device="meta", num_codebooks=config["n_q"])
    return {"lm": stacked(lm.state_dict()), "mimi": stacked(mimi.state_dict())}


def main() -> None:
    out = {}
    for arg in sys.argv[2:]:
        path, dtype = arg.rsplit(":", 1)
        out[path] = tables(Path(path), getattr(torch, dtype))
    Path(sys.argv[1]).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
