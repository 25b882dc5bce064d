"""What a user would run instead: transformers' own VibeVoiceForConditionalGeneration.generate, one request
after another (it has no server), each after `set_seed(i)`, on the same checkpoint, with its
generation_config.json (guidance 1.3: the token guidance pass and the diffusion negative's; 10 DPM-Solver
steps; the audio decoded inside the loop, as the engine does).

Runs under the VibeVoice oracle venv (transformers 5.24 + diffusers 0.42.1):

    .oracle-vibevoice-venv/bin/python benchmarks/vibevoice_hf_throughput.py CKPT --requests 16 --frames 24

max_new_tokens = frames; the bench-size checkpoint picks the diffusion token every step, so a request
yields `frames` frames (the audio actually produced is what counts). Prints one JSON line: wall and
process-CPU seconds, frames, audio seconds.
"""

import argparse
import json
import os
import time

import torch
from transformers import PreTrainedTokenizerFast, VibeVoiceForConditionalGeneration, set_seed

SYSTEM = (" Transform the text provided by various speakers into speech output, utilizing the distinct "
          "voice of each respective speaker.\n")
TEXTS = [
    "The beggar's plea, the politician's sceptre, and the drummer's ablest assistant.",
    "Get the trust fund to the bank early.",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok = PreTrainedTokenizerFast(tokenizer_file=f"{args.ckpt}/tokenizer.json")
    model = VibeVoiceForConditionalGeneration.from_pretrained(args.ckpt, dtype=torch.float32).eval()
    hop = 1
    for r in model.config.audio_config.downsampling_ratios:
        hop *= r
    frames = samples = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(args.requests):
        body = f"{SYSTEM} Text input:\n Speaker {i % 4}: {TEXTS[i % 2]}\n Speech output:\n"
        ids = tok(body, add_special_tokens=False)["input_ids"] + [model.config.audio_bos_token_id]
        x = torch.tensor([ids])
        set_seed(i)
        with torch.no_grad():
            out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=args.frames,
                                 return_dict_in_generate=True)
        n = 0 if out.audio[0] is None else int(out.audio[0].numel())
        samples += n
        frames += n // hop
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "frames": frames, "audio_s": samples / 24000,
                      "requests": args.requests, "threads": args.threads}))


if __name__ == "__main__":
    main()
