"""Random-weight Kyutai TTS checkpoints in the released layout, written by moshi's own classes: this runs
moshi_build.py under the Kyutai oracle interpreter (`VOX_KYUTAI_ORACLE_PYTHON`, else the repository's
.oracle-kyutai-venv; `bash scripts/setup_oracle_kyutai.sh` makes it). The parity tests build here; the
demo, `make_tiny.py --family kyutai_tts` and the real-size run use build.py (plain torch, streamed: this
path's real size holds moshi's whole model in memory and took 19 minutes without writing). Sizes:

* tiny: a 32-wide 2-layer LM (context 24 so a test crosses the attention window), a 16-wide 2-layer
  depformer with the release's 32-codebook / 11-weight-set schedule, a 400-piece tokenizer, and a small
  Mimi through moshi's `mimi_config_name` (32 wide, 2 transformer layers, window 8; the released rates and
  codebook size 2048, so 1920 samples per frame as released);
* real: kyutai/tts-1.6b-en_fr's published sizes (config.json: dim 2048, 16 layers of 16 heads, context 500,
  depformer 1024 wide, 4 layers, feed-forward 3072, low-rank embeddings 128, text_card 8000) in bfloat16,
  and moshi's fixed released Mimi (no `mimi_config_name`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

SEED = 0
REPO = Path(__file__).resolve().parents[2]
TINY_MIMI = {
    "sample_rate": 24000, "channels": 1, "frame_rate": 12.5,
    "seanet": {"channels": 1, "dimension": 32, "causal": True, "n_filters": 4, "n_residual_layers": 1,
               "activation": "ELU", "compress": 2, "dilation_base": 2, "disable_norm_outer_blocks": 0,
               "kernel_size": 7, "residual_kernel_size": 3, "last_kernel_size": 3, "norm": "none",
               "pad_mode": "constant", "ratios": [8, 6, 5, 4], "true_skip": True},
    "quantizer": {"dimension": 16, "n_q": 32, "bins": 2048, "input_dimension": 32, "output_dimension": 32},
    "transformer": {"d_model": 32, "num_heads": 2, "num_layers": 2, "causal": True, "layer_scale": 0.01,
                    "context": 8, "conv_layout": True, "max_period": 10000, "gating": "none",
                    "norm": "layer_norm", "positional_embedding": "rope", "dim_feedforward": 64,
                    "input_dimension": 32, "output_dimensions": [32]},
}
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {
        "text_card": 400, "n_q": 32,
        "lm": {"dim": 32, "num_heads": 2, "num_layers": 2, "context": 24, "depformer_dim": 16,
               "depformer_num_heads": 2, "depformer_num_layers": 2, "depformer_dim_feedforward": 24,
               "depformer_low_rank_embeddings": 8},
        "mimi_config": TINY_MIMI,
    },
    "real": {
        "text_card": 8000, "n_q": 32, "dtype": "bfloat16",
        "lm": {"dim": 2048, "num_heads": 16, "num_layers": 16, "context": 500, "depformer_dim": 1024,
               "depformer_num_heads": 16, "depformer_num_layers": 4, "depformer_dim_feedforward": 3072,
               "depformer_low_rank_embeddings": 128},
    },
}


def oracle_python() -> str:
    py = os.environ.get("VOX_KYUTAI_ORACLE_PYTHON") or str(REPO / ".oracle-kyutai-venv" / "bin" / "python")
    if not Path(py).exists():
        raise RuntimeError(f"the Kyutai builder runs moshi's classes and needs its interpreter {py}: "
                           "bash scripts/setup_oracle_kyutai.sh (or set VOX_KYUTAI_ORACLE_PYTHON)")
    return py


def build_tiny(out: Path, size: str = "tiny", seed: int = SEED) -> Path:
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    spec = dict(SIZES[size], seed=seed)
    env = dict(os.environ, OMP_NUM_THREADS="2", HF_HUB_OFFLINE="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([oracle_python(), str(Path(__file__).with_name("moshi_build.py")), str(out),
                           json.dumps(spec)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"moshi_build.py failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return Path(out)
