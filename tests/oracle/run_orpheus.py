"""Orpheus 3B's references, run in the oracle venv (transformers 5.24, snac 1.2.1); nothing of voxcli.

usage: run_orpheus.py CKPT CASE.json OUT.npz

1. ids: `LlamaForCausalLM.generate(do_sample=False, eos_token_id=128258)` on the prompt canopyai/Orpheus-TTS
   builds: [128259] + tokenizer("VOICE: TEXT").input_ids + [128009, 128260, 128261, 128257].
2. "whole": the Orpheus model card notebook's decode of those ids: crop after the last 128257, drop 128258,
   trim to whole frames, subtract 128266 + j * 4096, redistribute to SNAC's levels, one `SNAC.decode`. Its
   NoiseBlocks take the noise the case names (our "whole" mode's seeded draw, per block in order) instead of
   the global RNG: the decoder is compared, the noise is given.
3. "canopy": canopyai/Orpheus-TTS's streaming decoder over the generated token strings, after
   `torch.manual_seed(seed)` (its NoiseBlocks draw from the global RNG, as the server's do): every 7th audio
   token from the 28th on, the last 28 tokens decoded, samples [2048:4096] kept.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from snac import SNAC
from snac import layers as snac_layers
from transformers import AutoTokenizer, LlamaForCausalLM


def turn_token_into_id(token_string: str, index: int) -> int | None:
    """The reference's parse of a generated token string (orpheus_tts/decoder.py)."""
    token_string = token_string.strip()
    start = token_string.rfind("<custom_token_")
    if start == -1:
        return None
    last = token_string[start:]
    if last.startswith("<custom_token_") and last.endswith(">"):
        try:
            return int(last[14:-1]) - 10 - ((index % 7) * 4096)
        except ValueError:
            return None
    return None


def convert_to_audio(snac: SNAC, multiframe: list[int]) -> np.ndarray | None:
    """The reference's window decode: frames of 7 -> levels, SNAC.decode, samples [2048:4096]."""
    if len(multiframe) < 7:
        return None
    c0, c1, c2 = [], [], []
    n = len(multiframe) // 7
    frame = multiframe[: n * 7]
    for j in range(n):
        i = 7 * j
        c0.append(frame[i])
        c1 += [frame[i + 1], frame[i + 4]]
        c2 += [frame[i + 2], frame[i + 3], frame[i + 5], frame[i + 6]]
    codes = [torch.tensor(c, dtype=torch.int32)[None] for c in (c0, c1, c2)]
    if any(torch.any(c < 0) or torch.any(c > 4096) for c in codes):
        return None
    with torch.inference_mode():
        audio = snac.decode(codes)
    return audio[:, :, 2048:4096].detach().numpy()[0, 0]


def canopy_stream(snac: SNAC, token_strings: list[str]) -> np.ndarray:
    buffer: list[int] = []
    count = 0
    out = []
    for s in token_strings:
        token = turn_token_into_id(s, count)
        if token is not None and token > 0:
            buffer.append(token)
            count += 1
            if count % 7 == 0 and count > 27:
                audio = convert_to_audio(snac, buffer[-28:])
                if audio is not None:
                    out.append(audio)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def whole_decode(snac: SNAC, generated: list[int], noise: list[np.ndarray]) -> np.ndarray:
    row = list(generated)
    if 128257 in row:
        row = row[len(row) - row[::-1].index(128257) :]
    row = [t for t in row if t != 128258]
    row = row[: len(row) // 7 * 7]
    code_list = [t - 128266 for t in row]
    l1, l2, l3 = [], [], []
    for i in range(len(code_list) // 7):
        l1.append(code_list[7 * i])
        l2.append(code_list[7 * i + 1] - 4096)
        l3.append(code_list[7 * i + 2] - 2 * 4096)
        l3.append(code_list[7 * i + 3] - 3 * 4096)
        l2.append(code_list[7 * i + 4] - 4 * 4096)
        l3.append(code_list[7 * i + 5] - 5 * 4096)
        l3.append(code_list[7 * i + 6] - 6 * 4096)
    codes = [torch.tensor(x)[None] for x in (l1, l2, l3)]
    given = iter(noise)

    def forward(self, x):  # SNAC's NoiseBlock with the given draw in place of torch.randn
        n = torch.from_numpy(next(given)).to(x.dtype).view(1, 1, -1)
        assert n.shape[-1] == x.shape[-1], (n.shape, x.shape)
        return x + n * self.linear(x)

    original = snac_layers.NoiseBlock.forward
    snac_layers.NoiseBlock.forward = forward
    try:
        with torch.inference_mode():
            audio = snac.decode(codes)
    finally:
        snac_layers.NoiseBlock.forward = original
    return audio[0, 0].numpy()


def main() -> None:
    ckpt, case_path, out_path = sys.argv[1:4]
    case = json.loads(open(case_path).read())
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(ckpt)
    text_ids = tok(f"{case['voice']}: {case['text']}", return_tensors="pt").input_ids
    prompt = torch.cat(
        [torch.tensor([[128259]]), text_ids, torch.tensor([[128009, 128260, 128261, 128257]])], 1
    )
    model = LlamaForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    with torch.inference_mode():
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=case["max_new_tokens"],
            eos_token_id=128258,
            pad_token_id=128263,
        )
    generated = out[0, prompt.shape[1] :].tolist()
    snac = SNAC.from_pretrained(f"{ckpt}/codec").eval()
    noise = np.load(case["noise"]) if case.get("noise") else None
    result = {"prompt": prompt[0].numpy(), "generated": np.asarray(generated)}
    if noise is not None:
        result["whole"] = whole_decode(snac, generated, [noise[f"block{i}"] for i in range(len(noise.files))])
    torch.manual_seed(case["seed"])
    result["canopy"] = canopy_stream(snac, tok.convert_ids_to_tokens(generated))
    np.savez(out_path, **result)


if __name__ == "__main__":
    main()
