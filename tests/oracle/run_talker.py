"""Run the official Qwen3-TTS on one checkpoint for a list of cases; save everything a parity test needs.

usage: python run_talker.py CKPT OUT.pt CASES.json
A case: {"name", "text", "language", "speaker", "instruct", "stream", "max_new", "clone": null|"xvec"|"icl",
         "ref_text"}. Greedy fp32 (eager attention) on the CPU. Per case the output holds the token ids, the
prefill embeddings, the codes, every raw talker / predictor logits row, and the waveform of ONE full
decoder forward (`speech_tokenizer.model.decoder(codes)`, not the chunked `decode()`).
"""

import json
import sys

import numpy as np
import official as O
import torch

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.set_num_threads(2)


def reference_wav() -> np.ndarray:
    """1.7 s synthetic 'voice' at 24 kHz (a chirp plus a little noise), identical on every run."""
    sr = 24000
    t = np.arange(int(1.7 * sr)) / sr
    noise = 0.02 * np.random.RandomState(0).randn(t.size)
    return (0.3 * np.sin(2 * np.pi * (180 + 60 * t) * t) + noise).astype(np.float32)


def main(ckpt: str, out: str, cases_path: str) -> None:
    cases = json.loads(open(cases_path).read())
    tts = O.Qwen3TTSModel.from_pretrained(
        ckpt, dtype=torch.float32, attn_implementation="eager", device_map="cpu"
    )
    m = tts.model
    rec = {"in": [], "talker": [], "cp": []}
    m.talker.model.register_forward_hook(
        lambda mod, a, kw, o: rec["in"].append(kw["inputs_embeds"].detach().clone()), with_kwargs=True
    )
    m.talker.codec_head.register_forward_hook(
        lambda mod, a, o: rec["talker"].append(o[0, -1].detach().clone())
    )
    for i, h in enumerate(m.talker.code_predictor.lm_head):
        h.register_forward_hook(lambda mod, a, o, i=i: rec["cp"].append(o[0, -1].detach().clone()))
    ref_wav = reference_wav()
    results = {"ref_wav": torch.from_numpy(ref_wav)}
    for c in cases:
        for v in rec.values():
            v.clear()
        ids = tts._tokenize_texts([tts._build_assistant_text(c["text"])])
        instruct = c.get("instruct")
        instruct_ids = [tts._tokenize_texts([tts._build_instruct_text(instruct)])[0] if instruct else None]
        gen = dict(
            do_sample=False,
            subtalker_dosample=False,
            max_new_tokens=c["max_new"],
            top_k=50,
            top_p=1.0,
            temperature=0.9,
            repetition_penalty=1.05,
            subtalker_top_k=50,
            subtalker_top_p=1.0,
            subtalker_temperature=0.9,
        )
        res = {"input_ids": ids[0][0]}
        kw = dict(input_ids=ids, languages=[c["language"]], non_streaming_mode=not c["stream"], **gen)
        ref_code = None
        if c.get("clone"):
            items = tts.create_voice_clone_prompt(
                ref_audio=(ref_wav, 24000),
                ref_text=c.get("ref_text"),
                x_vector_only_mode=c["clone"] == "xvec",
            )
            it = items[0]
            ref_code = it.ref_code
            res["spk"] = it.ref_spk_embedding.detach().clone()
            res["ref_code"] = ref_code
            vcp = tts._prompt_items_to_voice_clone_prompt(items)
            ref_ids = [
                tts._tokenize_texts([tts._build_ref_text(c["ref_text"])])[0] if c.get("ref_text") else None
            ]
            if ref_ids[0] is not None:
                res["ref_ids"] = ref_ids[0][0]
            for v in rec.values():
                v.clear()  # the prompt creation ran no talker, but be explicit
            codes, _ = m.generate(ref_ids=ref_ids, voice_clone_prompt=vcp, **kw)
        else:
            if instruct_ids[0] is not None:
                res["instruct_ids"] = instruct_ids[0][0]
            codes, _ = m.generate(instruct_ids=instruct_ids, speakers=[c.get("speaker")], **kw)
        codes = codes[0]
        res["prefill"] = rec["in"][0][0]
        res["codes"] = codes
        res["talker_logits"] = torch.stack(rec["talker"])
        res["cp_logits"] = torch.stack(rec["cp"]) if rec["cp"] else torch.zeros(0)
        full = codes if ref_code is None else torch.cat([ref_code, codes])
        with torch.no_grad():
            wav = m.speech_tokenizer.model.decoder(full.T[None])[0, 0]
        if ref_code is not None:
            cut = int(ref_code.shape[0] / max(full.shape[0], 1) * wav.shape[0])
            wav = wav[cut:]
        res["wav"] = wav
        results[c["name"]] = res
        print(c["name"], "prefill", tuple(res["prefill"].shape), "codes", tuple(codes.shape), flush=True)
    torch.save(results, out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
