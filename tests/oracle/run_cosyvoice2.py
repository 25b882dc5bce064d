"""Oracle for CosyVoice 2 (runs in the CosyVoice oracle venv): upstream's own `CosyVoice2` class on a
checkpoint folder written by models/cosyvoice2/tiny.py (loading it is upstream's strict key check).

usage: run_cosyvoice2.py CKPT CASES.json OUT.pt
A case is one of
  {"name", "kind": "tts", "text", "speaker", "stream": bool, "seed": int}   torch.manual_seed(seed), then
      inference_zero_shot with the saved speaker, the LM greedy (argmax in place of ras_sampling, so the
      vocoder's noise is the only thing drawn from the global generator; "sampled": true keeps upstream's
      ras_sampling); saves the LM tokens and waveform
  {"name", "kind": "token2wav", "tokens": [...], "speaker", "stream": bool, "seed": int}
      the codec alone: tts() with the LM replaced by the given tokens
  {"name", "kind": "instruct", "text", "instruct", "wav", "stream", "seed"}   inference_instruct2 on a clip
A case with "wav" (a clip) and "prompt_text" clones it (inference_zero_shot on the clip).
token_hop_len is reset to 25 before a case (upstream mutates it and never resets it).
"""

import json
import sys
from pathlib import Path

import cosyvoice_stubs

ckpt, cases_path, out_path = sys.argv[1:4]
cases = json.loads(Path(cases_path).read_text())
cosyvoice_stubs.install(
    real_onnx=(Path(ckpt) / "campplus.onnx").exists(), real_frontend=any("wav" in c for c in cases)
)

import torch  # noqa: E402

torch.set_num_threads(2)

from cosyvoice.cli.cosyvoice import CosyVoice2  # noqa: E402

cosy = CosyVoice2(ckpt)
model = cosy.model


upstream_sampling = model.llm.sampling


def greedy(weighted_scores, decoded_tokens, sampling):
    return int(weighted_scores.argmax().item())


results = {}
for case in cases:
    name, kind = case["name"], case["kind"]
    model.token_hop_len = 25
    raw: list[int] = []
    llm = model.llm
    if kind == "token2wav":
        toks = list(case["tokens"])

        def fake_job(text, prompt_text, llm_prompt_speech_token, llm_embedding, uuid, _toks=toks, _m=model):
            _m.tts_speech_token_dict[uuid] = list(_toks)
            _m.llm_end_dict[uuid] = True

        model.llm_job = fake_job
        text = "hello."
    else:
        llm.sampling = upstream_sampling if case.get("sampled") else greedy
        inner = type(llm).inference_wrapper

        def wrapper(self, *a, _inner=inner, _raw=raw, **k):
            for t in _inner(self, *a, **k):
                _raw.append(int(t))
                yield t

        llm.inference_wrapper = wrapper.__get__(llm)
        text = case["text"]
    seen: list[int] = []
    orig = model.token2wav

    def spy(*a, _orig=orig, _seen=seen, **k):
        _seen.append(int(k["token"].shape[1]))
        return _orig(*a, **k)

    model.token2wav = spy
    torch.manual_seed(case["seed"])
    if kind == "instruct":
        outputs = cosy.inference_instruct2(text, case["instruct"], case["wav"], stream=case["stream"])
    elif "wav" in case:
        outputs = cosy.inference_zero_shot(text, case["prompt_text"], case["wav"], stream=case["stream"])
    else:
        outputs = cosy.inference_zero_shot(text, "", None, zero_shot_spk_id=case["speaker"],
                                           stream=case["stream"])
    chunks = [o["tts_speech"][0].double() for o in outputs]
    model.token2wav = orig
    if kind == "token2wav":
        del model.llm_job
    else:
        del llm.inference_wrapper
    results[name] = {
        "wav": torch.cat(chunks).numpy(),
        "chunk_samples": [int(c.shape[0]) for c in chunks],
        "raw_tokens": raw,
        "chunk_tokens": seen,
    }
torch.save(results, out_path)
print(json.dumps({k: {kk: (len(v) if hasattr(v, "__len__") else v) for kk, v in r.items()}
                  for k, r in results.items()}))
