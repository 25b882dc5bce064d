"""Oracle driver: transformers' own seeded VibeVoice generate on a checkpoint, batch 1.

usage: drive_vibevoice.py CKPT OUT_PREFIX CASES.json    (cases: [{"text", "speaker", "seed", "max_new"}])

Builds the text-only prompt (models/vibevoice/prompt.py's format, through the checkpoint's tokenizer with
transformers' PreTrainedTokenizerFast), runs set_seed(SEED) then
`VibeVoiceForConditionalGeneration.generate(..., return_dict_in_generate=True)` with the checkpoint's
generation_config.json (guidance 1.3, 10 DPM-Solver steps), and saves the generated token ids and the
audio, one OUT_PREFIX<i>.npz per case. It also records the input length of every LM call (`calls`), so a
test can see the three sequences generate runs.
"""

import json
import sys

import numpy as np
import torch
from transformers import PreTrainedTokenizerFast, VibeVoiceForConditionalGeneration, set_seed

SYSTEM = (" Transform the text provided by various speakers into speech output, utilizing the distinct "
          "voice of each respective speaker.\n")


def run_case(model, tok, case: dict, out: str) -> None:
    text = " ".join(case["text"].split())
    body = f"{SYSTEM} Text input:\n Speaker {case['speaker']}: {text}\n Speech output:\n"
    ids = tok(body, add_special_tokens=False)["input_ids"] + [model.config.audio_bos_token_id]
    x = torch.tensor([ids])
    calls = []

    def hook(_mod, args, kwargs):
        emb = kwargs.get("inputs_embeds")
        calls.append(emb.shape[1] if emb is not None else kwargs["input_ids"].shape[1])

    handle = model.model.language_model.register_forward_pre_hook(hook, with_kwargs=True)
    set_seed(int(case["seed"]))
    kw = {} if case.get("max_new") is None else {"max_new_tokens": int(case["max_new"])}
    with torch.no_grad():
        res = model.generate(input_ids=x, attention_mask=torch.ones_like(x), return_dict_in_generate=True,
                             **kw)
    handle.remove()
    audio = res.audio[0]
    wav = np.zeros(0, np.float32) if audio is None else audio.float().reshape(-1).numpy()
    np.savez(out, ids=np.array(ids), tokens=res.sequences[0, len(ids):].numpy(), audio=wav,
             calls=np.array(calls, dtype=np.int64))


def main() -> None:
    ckpt, prefix, cases = sys.argv[1:4]
    tok = PreTrainedTokenizerFast(tokenizer_file=f"{ckpt}/tokenizer.json")
    model = VibeVoiceForConditionalGeneration.from_pretrained(ckpt, dtype=torch.float32).eval()
    for i, case in enumerate(json.loads(open(cases).read())):
        run_case(model, tok, case, f"{prefix}{i}.npz")


if __name__ == "__main__":
    main()
