"""Kyutai TTS through moshi 0.2.13 as delayed-streams-modeling's scripts/tts_pytorch.py runs it (the Kyutai
oracle venv): `TTSModel.from_checkpoint_info`, `prepare_script([text], padding_between=1)`,
`make_condition_attributes([voice], cfg_coef)`, `generate`, then the audio codes past `delay_steps`
decoded by Mimi in one offline pass. Greedy: temp 0 (moshi's `sample_token` takes the argmax).

    python kyutai_generate.py CHECKPOINT_DIR VOICE_FILE TEXT OUT.npz [CFG] [DTYPE]

OUT.npz: codes [T, K] (the frames tts_pytorch.py decodes), wav [T * 1920] float32, end_step, and
text [S, 2] (each step's sampled text token and the token fed back).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from moshi.models.loaders import CheckpointInfo
from moshi.models.tts import TTSModel


def main() -> None:
    root, voice, text, out = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    cfg = float(sys.argv[5]) if len(sys.argv) > 5 else 2.0
    dtype = getattr(torch, sys.argv[6]) if len(sys.argv) > 6 else torch.float32
    torch.set_num_threads(2)
    raw = json.loads((root / "config.json").read_text())
    mimi_config = raw.get("mimi_config_name")
    info = CheckpointInfo.from_hf_repo(
        "local/unused",
        moshi_weights=root / raw["moshi_name"],
        mimi_weights=root / raw["mimi_name"],
        tokenizer=root / raw["tokenizer_name"],
        config_path=root / "config.json",
        mimi_config_path=(root / mimi_config) if mimi_config else None,
    )
    tts = TTSModel.from_checkpoint_info(info, n_q=32, temp=0.0, device="cpu", dtype=dtype)
    entries = tts.prepare_script([text], padding_between=1)
    attributes = tts.make_condition_attributes([voice], cfg_coef=cfg)
    result = tts.generate([entries], [attributes])
    frames = torch.cat(result.frames, dim=-1)
    codes = frames[:, tts.lm.audio_offset :, tts.delay_steps :]
    with torch.no_grad():
        wav = tts.mimi.decode(codes)
    np.savez(
        out,
        codes=codes[0].T.cpu().numpy().astype(np.int64),
        wav=wav[0, 0].float().cpu().numpy(),
        end_step=np.int64(-1 if result.end_steps[0] is None else result.end_steps[0]),
        text=np.asarray(result.logged_text_tokens[0], dtype=np.int64),
    )


if __name__ == "__main__":
    main()
