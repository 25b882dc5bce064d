"""Zonos oracle (runs in the Zonos oracle venv, scripts/setup_oracle_zonos.sh): upstream's pinned source
(VOX_ZONOS_UPSTREAM, ../shared/oracle/zonos at bc40d98) builds a tiny random checkpoint with its own classes
in the released layout (config.json + model.safetensors), calibrates codebook 0's EOS so that greedy
generation of the calibration text ends by itself, and generates the cases with `Zonos.generate` in float32.

Environment only, no change to upstream's logic: DacModel.from_pretrained("descript/dac_44khz") reads the
tiny DAC at <ckpt>/codec (built by the test with our DAC builder, DacModel's save layout), phonemizer is
pointed at espeakng-loader's bundled libespeak-ng, zonos_shims stands in for SudachiPy (Japanese only), and
the KV cache is float32 like the model (upstream allocates it in bf16 whatever the model's dtype).

usage: run_zonos.py CKPT SIZES_JSON CASES_JSON OUT_PT
"""

from __future__ import annotations

import json
import os
import sys
import wave
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "zonos_shims"))
sys.path.insert(0, os.environ["VOX_ZONOS_UPSTREAM"])

import espeakng_loader  # noqa: E402
import torch  # noqa: E402
from phonemizer.backend.espeak.wrapper import EspeakWrapper  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers.models.dac import DacModel  # noqa: E402

EspeakWrapper.set_library(espeakng_loader.get_library_path())
EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
CKPT = Path(sys.argv[1])
_from_pretrained = DacModel.from_pretrained.__func__


def _local_dac(cls, name, *args, **kwargs):
    return _from_pretrained(
        cls, str(CKPT / "codec") if name == "descript/dac_44khz" else name, *args, **kwargs
    )


DacModel.from_pretrained = classmethod(_local_dac)

import numpy as np  # noqa: E402
import zonos.model as zm  # noqa: E402
import zonos.speaker_cloning as sc  # noqa: E402
from zonos.conditioning import make_cond_dict, phonemize  # noqa: E402
from zonos.config import ZonosConfig  # noqa: E402
from zonos.sampling import modify_logit_for_repetition_penalty  # noqa: E402

EOS = 1024
_setup_cache = zm.Zonos.setup_cache


def _float32_cache(self, batch_size, max_seqlen, dtype=torch.bfloat16):
    # upstream's KV cache is bf16 whatever the model's dtype; parity runs in float32 on both sides (the issue)
    return _setup_cache(self, batch_size, max_seqlen, dtype=torch.float32)


zm.Zonos.setup_cache = _float32_cache


def build(sizes: dict) -> zm.Zonos:
    torch.manual_seed(sizes["seed"])
    model = zm.Zonos(ZonosConfig.from_dict(sizes["config"])).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("uncond_vector"):
                p.normal_(0, 1.0)  # learned in the released weights: random here, so they matter
        for emb in model.embeddings:
            emb.weight.mul_(sizes.get("embedding_gain", 1.0))
    return model


SPEAKER_FILES = ("ResNet293_SimAM_ASP_base.pt", "ResNet293_SimAM_ASP_base_LDA-128.pt")


def build_speaker_model(spec: dict) -> None:
    """Upstream's speaker model at a small base width (`in_planes`; ResNet293's depths kept), random weights
    and batch-norm statistics, saved as the hub repo's two files at <ckpt>/speaker_embedding; upstream's
    SpeakerEmbeddingLDA then loads them through a local hf_hub_download and builds its ResNet293_based at
    that width (its constructor's default in_planes changed: a size, not a change of logic)."""
    torch.manual_seed(spec["seed"])
    net = sc.ResNet293_based(in_planes=spec["width"])
    lda = torch.nn.Linear(256, 128)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.8, 1.2)
                m.bias.normal_(0, 0.1)
    folder = CKPT / "speaker_embedding"
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), folder / SPEAKER_FILES[0])
    torch.save(lda.state_dict(), folder / SPEAKER_FILES[1])
    init = sc.ResNet293_based.__init__  # SpeakerEmbedding builds ResNet293_based() at its defaults
    assert init.__defaults__ == (64, 256, 80, None, 0)
    init.__defaults__ = (spec["width"], 256, 80, None, 0)

    def local_download(repo_id: str, filename: str) -> str:
        assert repo_id == "Zyphra/Zonos-v0.1-speaker-embedding" and filename in SPEAKER_FILES
        return str(folder / filename)

    sc.hf_hub_download = local_download


def read_wav(path: str) -> tuple[torch.Tensor, int]:
    """16-bit PCM WAV -> [channels, n] float32 as torchaudio.load returns it (int16 / 32768)."""
    with wave.open(path) as w:
        assert w.getsampwidth() == 2
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, w.getnchannels())
        rate = w.getframerate()
    return torch.from_numpy(data.T.astype(np.float32) / 32768.0), rate


def speaker(model: zm.Zonos, case: dict, record: dict) -> torch.Tensor | None:
    if "ref_audio" not in case:
        return None
    wav, rate = read_wav(case["ref_audio"])
    emb = model.make_speaker_embedding(wav, rate)  # bfloat16, as upstream hands it to make_cond_dict
    raw, lda = model.spk_clone_model(wav, rate)
    record.update(speaker_raw=raw[0].float(), speaker_lda=lda[0].float(), speaker=emb[0, 0].float())
    return emb.float()  # the float32 model's dtype: bf16 values, exactly representable


def conditioning(model: zm.Zonos, case: dict, record: dict | None = None) -> torch.Tensor:
    cond = make_cond_dict(
        text=case["text"], language=case.get("language", "en-us"), device="cpu", **case.get("cond", {})
    )
    spk = speaker(model, case, {} if record is None else record)
    if spk is not None:
        cond["speaker"] = spk.view(1, 1, -1)
    return model.prepare_conditioning(cond)


def generate(model: zm.Zonos, case: dict, record: dict | None = None) -> torch.Tensor:
    prefix = conditioning(model, case, record)
    params = dict(min_p=case.get("min_p", 0.1))
    if case.get("greedy"):
        params["temperature"] = 0.0
    if "seed" in case:
        torch.manual_seed(case["seed"])
    return model.generate(
        prefix,
        max_new_tokens=case["max_new"],
        cfg_scale=case.get("cfg", 2.0),
        sampling_params=params,
        progress_bar=False,
        disable_torch_compile=True,
    )


def calibrate_eos(model: zm.Zonos, case: dict, lo: int, hi: int) -> int:
    """Give codebook 0's EOS row a direction so that greedy generation of `case` says EOS first at a loop step
    in [lo, hi): record the guided hidden state g_t = 2 h_cond - h_uncond and the best non-EOS penalised
    logit m_t of every step with EOS barred, then pick the step T whose direction clears every earlier step
    by the widest margin. Returns T."""
    head = model.heads[0].weight
    with torch.no_grad():
        head[EOS].zero_()
    hidden, best = [], []
    apply_heads, sample = model.apply_heads, zm.sample_from_logits

    def rec_heads(h):
        hidden.append(h[:, -1].detach().clone())
        return apply_heads(h)

    def rec_sample(logits, generated_tokens=None, **kw):
        logits = logits.clone()
        logits[:, 0, EOS] = -torch.inf
        pen = (
            logits
            if generated_tokens is None
            else modify_logit_for_repetition_penalty(logits, generated_tokens, 3.0, 2)
        )
        best.append(pen[0, 0].max().item())
        return sample(logits, generated_tokens=generated_tokens, **kw)

    model.apply_heads, zm.sample_from_logits = rec_heads, rec_sample
    try:
        generate(model, dict(case, max_new=hi + 12))
    finally:
        model.apply_heads, zm.sample_from_logits = apply_heads, sample
    # index 0: prefill (its codebook-0 EOS must not win either: it would change the inputs), then loop steps
    g = torch.stack([2 * h[0] - h[1] for h in hidden])
    m = torch.tensor(best)
    choice = None
    for T in range(lo + 1, hi + 1):
        for direction in (g[T], g[T] - g[:T].mean(0)):
            u = direction / direction.norm()
            if (u @ g[T]) <= 0:
                continue
            w = (m[T] + 1.0) / (u @ g[T]) * u  # EOS clears the best code at T by 1.0
            score = (m[:T] - g[:T] @ w).min().item()  # and stays below it at every earlier step by this
            if score > 0.05 and (choice is None or score > choice[0]):
                choice = (score, T - 1, w)
    if choice is None:
        raise SystemExit("EOS calibration found no step that ends the calibration case cleanly")
    with torch.no_grad():
        head[EOS] = choice[2]
    return choice[1]


def main() -> None:
    sizes = json.loads(Path(sys.argv[2]).read_text())
    cases = json.loads(Path(sys.argv[3]).read_text())
    model = build(sizes)
    out: dict = {}
    cal = sizes.get("calibrate")
    if cal:
        out["_eos_step"] = calibrate_eos(model, cal["case"], cal["lo"], cal["hi"])
    CKPT.mkdir(parents=True, exist_ok=True)
    (CKPT / "config.json").write_text(json.dumps(sizes["config"], indent=2) + "\n")
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(CKPT / "model.safetensors"))
    if "speaker" in sizes:
        build_speaker_model(sizes["speaker"])
    # the cases run on the checkpoint as saved, loaded back the way upstream loads one (strict state dict)
    model = zm.Zonos(ZonosConfig.from_dict(sizes["config"])).float().eval()
    model.load_state_dict(load_file(str(CKPT / "model.safetensors")))
    with torch.inference_mode():
        for case in cases:
            record: dict = {}
            codes = generate(model, case, record)[0]  # [9, T]
            wav = model.autoencoder.decode(codes[None]) if codes.shape[-1] else torch.zeros(1, 1, 0)
            out[case["name"]] = record | {
                "codes": codes.T.contiguous(),
                "wav": wav[0, 0].float(),
                "phonemes": phonemize([case["text"]], [case.get("language", "en-us")])[0],
            }
    torch.save(out, sys.argv[4])


if __name__ == "__main__":
    main()
