"""Oracle for CosyVoice 3 (runs in the CosyVoice oracle venv): upstream's own `CosyVoice3` class on a
checkpoint folder written by models/cosyvoice3/tiny.py (loading it is upstream's strict key check).

usage: run_cosyvoice.py CKPT CASES.json OUT.pt
A case is one of
  {"name", "kind": "tts", "text", "speaker", "stream": bool}     greedy LM (argmax in place of
      ras_sampling) + codec through inference_zero_shot with the saved speaker; saves the LM tokens
      (before the silent-token filter and after it) and the waveform
  {"name", "kind": "token2wav", "tokens": [...], "speaker", "stream": bool}
      the codec alone: tts() with the LM replaced by the given tokens
  {"name", "kind": "ras", "scores": [[...]], "history": [...], "seed": int}
      upstream's ras_sampling on the given log-probabilities after torch.manual_seed(seed)
  {"name", "kind": "normalize", "texts": [...]}   frontend text_normalize(split=True) + token ids
  {"name", "kind": "frontend", "wav", "prompt_text"}   frontend_zero_shot on a clip (the real audio
      frontend and the checkpoint's ONNX models): prompt text ids, speech tokens, mel, embedding
A "tts" case with "wav" (a clip) instead of "speaker" clones it: inference_zero_shot(text, prompt_text,
wav), or inference_instruct2(text, instruct, wav) when it has "instruct".
Each model's token_hop_len is reset to 25 before a case (upstream mutates it and never resets it).
"""

import json
import sys
import time
from pathlib import Path

import cosyvoice_stubs

ckpt, cases_path, out_path = sys.argv[1:4]
cases = json.loads(Path(cases_path).read_text())
cosyvoice_stubs.install(
    real_onnx=(Path(ckpt) / "campplus.onnx").exists(), real_frontend=any("wav" in c for c in cases)
)

import torch  # noqa: E402

torch.set_num_threads(1 if "--threads" in sys.argv else 2)

from cosyvoice.cli.cosyvoice import CosyVoice3  # noqa: E402
from cosyvoice.utils.common import ras_sampling  # noqa: E402

need_model = any(c["kind"] in ("tts", "token2wav", "normalize", "frontend") for c in cases)
base = CosyVoice3(ckpt) if need_model else None
doubled = None


def as_float64():
    """A second instance with the flow and vocoder in float64 (the LM stays float32: only codec cases
    use it)."""
    cosy = CosyVoice3(ckpt)
    cosy.model.flow.double()
    cosy.model.hift.double()
    cosy.model.flow.decoder.rand_noise = cosy.model.flow.decoder.rand_noise.double()
    src = cosy.model.hift.m_source
    src.l_sin_gen.sine_waves = src.l_sin_gen.sine_waves.double()
    flow_inference = cosy.model.flow.inference

    def inference64(*a, **k):
        # upstream returns `feat.float()`: in the float64 run the mel must stay float64
        keep = torch.Tensor.float
        torch.Tensor.float = lambda self, *x, **y: self
        try:
            return flow_inference(*a, **k)
        finally:
            torch.Tensor.float = keep

    cosy.model.flow.inference = inference64
    for spk in cosy.frontend.spk2info.values():
        for k in ("prompt_speech_feat", "flow_embedding", "llm_embedding"):
            spk[k] = spk[k].double()
    return cosy


def greedy(weighted_scores, decoded_tokens, sampling):
    return int(weighted_scores.argmax().item())


results = {}
for case in cases:
    name, kind = case["name"], case["kind"]
    if kind == "ras":
        outs = []
        torch.manual_seed(case["seed"])
        hist = list(case["history"])
        for row in case["scores"]:
            t = ras_sampling(
                torch.tensor(row, dtype=torch.float32), hist, 25, top_p=0.8, top_k=25, win_size=10, tau_r=0.1
            )
            outs.append(int(t))
            hist.append(int(t))
        results[name] = {"tokens": outs}
        continue
    if kind == "normalize":
        segs = [base.frontend.text_normalize(t, split=True, text_frontend=True) for t in case["texts"]]
        ids = [[base.frontend._extract_text_token(s)[0][0].tolist() for s in seg] for seg in segs]
        results[name] = {"segments": segs, "ids": ids}
        continue
    if kind == "frontend":
        mi = base.frontend.frontend_zero_shot("", case["prompt_text"], case["wav"], base.sample_rate, "")
        results[name] = {
            "prompt_text": mi["prompt_text"][0].tolist(),
            "llm_tokens": mi["llm_prompt_speech_token"][0].tolist(),
            "flow_tokens": mi["flow_prompt_speech_token"][0].tolist(),
            "feat": mi["prompt_speech_feat"][0],
            "embedding": mi["flow_embedding"][0],
            "llm_embedding": mi["llm_embedding"][0],
        }
        continue
    # `python -m benchmarks bench_cosyvoice` reads them
    case_wall, case_cpu = time.perf_counter(), time.process_time()
    cosy = base
    if case.get("float64"):
        doubled = doubled or as_float64()
        cosy = doubled
    model = cosy.model
    model.token_hop_len = 25
    raw: list[int] = []
    llm = model.llm
    if kind == "tts":
        llm.sampling = greedy
        inner = type(llm).inference_wrapper

        def wrapper(self, *a, _inner=inner, _raw=raw, **k):
            for t in _inner(self, *a, **k):
                _raw.append(int(t))
                yield t

        llm.inference_wrapper = wrapper.__get__(llm)
        text = case["text"]
    else:
        toks = list(case["tokens"])

        def fake_job(text, prompt_text, llm_prompt_speech_token, llm_embedding, uuid, _toks=toks, _m=model):
            _m.tts_speech_token_dict[uuid] = list(_toks)
            _m.llm_end_dict[uuid] = True

        model.llm_job = fake_job
        text = "hello."
    seen: list[int] = []
    orig_token2wav = model.token2wav

    cpu: list[float] = []

    def spy(*a, _orig=orig_token2wav, _seen=seen, _cpu=cpu, **k):
        _seen.append(int(k["token"].shape[1]))
        t0 = time.process_time()
        out = _orig(*a, **k)
        _cpu.append(time.process_time() - t0)
        return out

    model.token2wav = spy
    if "wav" not in case:
        outputs = cosy.inference_zero_shot(
            text, "", None, zero_shot_spk_id=case["speaker"], stream=case["stream"]
        )
    elif "instruct" in case:
        outputs = cosy.inference_instruct2(text, case["instruct"], case["wav"], stream=case["stream"])
    else:
        outputs = cosy.inference_zero_shot(text, case["prompt_text"], case["wav"], stream=case["stream"])
    chunks = [o["tts_speech"][0].double() for o in outputs]
    model.token2wav = orig_token2wav
    if kind == "tts":
        del llm.inference_wrapper
    else:
        del model.llm_job
    results[name] = {
        "wav": torch.cat(chunks).numpy(),
        "chunk_samples": [int(c.shape[0]) for c in chunks],
        "raw_tokens": raw,
        "chunk_tokens": seen,
        "chunk_cpu_s": cpu,
        "wall_s": time.perf_counter() - case_wall,
        "cpu_s": time.process_time() - case_cpu,
    }
torch.save(results, out_path)
print(
    json.dumps(
        {k: {kk: (len(v) if hasattr(v, "__len__") else v) for kk, v in r.items()} for k, r in results.items()}
    )
)
