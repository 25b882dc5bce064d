"""What a user would run instead of the engine: moshi 0.2.13's own TTSModel.generate, one request after
another (delayed-streams-modeling's scripts/tts_pytorch.py path: it has no batching server), then Mimi's
decode of the codes past the audio delay, on the same checkpoint.

Runs under the Kyutai oracle venv (moshi 0.2.13):

    .oracle-kyutai-venv/bin/python benchmarks/kyutai_moshi_throughput.py CKPT --requests 16

Sampling as tts_pytorch.py does (temp 0.6, cfg_coef 2.0, padding_between 1, the checkpoint's first voice),
seed i for request i; the state machine ends each request a few steps past its last word, so the audio
actually produced is what counts. Prints one JSON line: wall and process-CPU seconds, frames, audio seconds.
"""

import argparse
import json
import os
import time
from pathlib import Path

import torch
from moshi.models.loaders import CheckpointInfo
from moshi.models.tts import TTSModel

TEXTS = [
    "Hello there, this is the benchmark.",
    "The quick brown fox jumps.",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    root = Path(args.ckpt)
    raw = json.loads((root / "config.json").read_text())
    mimi_config = raw.get("mimi_config_name")
    info = CheckpointInfo.from_hf_repo(
        "local/unused", moshi_weights=root / raw["moshi_name"], mimi_weights=root / raw["mimi_name"],
        tokenizer=root / raw["tokenizer_name"], config_path=root / "config.json",
        mimi_config_path=(root / mimi_config) if mimi_config else None,
    )
    tts = TTSModel.from_checkpoint_info(info, n_q=32, temp=0.6, device="cpu", dtype=torch.float32)
    voice = sorted((root / "voices").glob("*.safetensors"))[0]
    t0, c0 = time.perf_counter(), time.process_time()
    frames = samples = 0
    for i in range(args.requests):
        torch.manual_seed(i)
        entries = tts.prepare_script([TEXTS[i % len(TEXTS)]], padding_between=1)
        attributes = tts.make_condition_attributes([voice], cfg_coef=2.0)
        with torch.no_grad():
            result = tts.generate([entries], [attributes])
            codes = torch.cat(result.frames, dim=-1)[:, tts.lm.audio_offset:, tts.delay_steps:]
            wav = tts.mimi.decode(codes)
        frames += codes.shape[-1]
        samples += wav.shape[-1]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    audio = samples / tts.mimi.sample_rate
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "frames": frames, "audio_s": audio}))


if __name__ == "__main__":
    main()
