"""Oracle for Dia (runs in the oracle venv): transformers 4.57.3's own DiaForConditionalGeneration,
DiaProcessor and DacModel.

usage:
  run_dia.py build CKPT SIZES.json       random tiny checkpoint built by transformers itself
                                         (DiaForConditionalGeneration(DiaConfig(...)) + DacModel in codec/,
                                         both via save_pretrained; no download)
  run_dia.py generate CKPT OUT.pt CASES.json
                                         greedy `generate` per case; saves the delayed sequences, the
                                         aligned codes the processor decodes, and its waveform
  run_dia.py keys CKPT                   load a checkpoint written by OUR builder in transformers and
                                         print missing / unexpected keys as JSON
  run_dia.py all CKPT SIZES.json OUT.pt CASES.json OURS
                                         build + generate + keys of OURS in one process (one import of
                                         transformers: the tests' way); the keys go into OUT.pt too
A case: {"name", "text", "guidance", "max_new", "ref_wav": optional path to a .npy at 44.1 kHz,
         "ref_text": optional}.
"""

import json
import sys

import numpy as np
import torch

torch.use_deterministic_algorithms(True)
torch.set_num_threads(2)


def build(ckpt: str, sizes_path: str) -> None:
    from transformers import (
        DacConfig,
        DacModel,
        DiaConfig,
        DiaDecoderConfig,
        DiaEncoderConfig,
        DiaForConditionalGeneration,
        GenerationConfig,
    )

    s = json.loads(open(sizes_path).read())
    torch.manual_seed(s.get("seed", 0))
    cfg = DiaConfig(
        encoder_config=DiaEncoderConfig(**s["encoder"]),
        decoder_config=DiaDecoderConfig(**s["decoder"]),
        initializer_range=s.get("initializer_range", 0.02),
    )
    model = DiaForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(**s["generation"])
    model.save_pretrained(ckpt)
    dac = DacModel(DacConfig(**s["dac"])).eval()
    with torch.no_grad():  # a louder random codec: waveform tolerances then mean something
        dac.decoder.conv2.weight.mul_(s.get("dac_output_gain", 1.0))
    dac.save_pretrained(f"{ckpt}/codec")
    if "eos_at" in s:
        calibrate_eos(model, ckpt, s["eos_at"]["text"], int(s["eos_at"]["position"]))
        model.save_pretrained(ckpt)


def calibrate_eos(model, ckpt: str, text: str, position: int) -> None:
    """Make greedy decoding of `text` (guidance 1) choose EOS on channel 0 at exactly `position`, by
    setting only channel 0's EOS row of logits_dense to c * h / |h| (h: the hidden that samples that
    position) with c 1.5x what beats the best code there; earlier steps are checked to stay below their
    best code, so the trajectory before the EOS is unchanged (the natural EOS and its drain get tested)."""
    hs = []
    hook = model.logits_dense.register_forward_hook(lambda mod, a, o: hs.append(a[0][0, -1].detach().clone()))
    inputs = _processor(ckpt)(text=[text], padding=True, return_tensors="pt")
    with torch.no_grad():
        model.generate(**inputs, do_sample=False, guidance_scale=1.0, max_new_tokens=position + 20)
    hook.remove()
    H = torch.stack(hs)[:position]  # step i samples position i + 1
    W = model.logits_dense.weight.detach().view(9, -1, H.shape[-1])[0]
    best = (H @ W[:1024].T).max(-1).values
    u = H[-1] / H[-1].norm()
    c = 1.5 * float(best[-1]) / float(H[-1].norm())
    earlier = c * (H[:-1] @ u)
    if not bool((best > 0).all()) or not bool((earlier < best[:-1]).all()):
        raise RuntimeError(
            "EOS calibration would change the trajectory before the EOS; pick another position"
        )
    with torch.no_grad():
        model.logits_dense.weight.view(9, -1, H.shape[-1])[0, 1024] = c * u


def _processor(ckpt: str):
    from transformers import DacModel, DiaFeatureExtractor, DiaProcessor, DiaTokenizer

    dac = DacModel.from_pretrained(f"{ckpt}/codec").eval()
    return DiaProcessor(DiaFeatureExtractor(sampling_rate=44100, hop_length=512), DiaTokenizer(), dac)


def generate(ckpt: str, out: str, cases_path: str) -> None:
    from transformers import DiaForConditionalGeneration

    model = DiaForConditionalGeneration.from_pretrained(ckpt, attn_implementation="eager").eval()
    proc = _processor(ckpt)
    res = {}
    for c in json.loads(open(cases_path).read()):
        kw = {}
        audio = None
        if c.get("ref_wav"):
            audio = np.load(c["ref_wav"]).astype(np.float32)
            kw["sampling_rate"] = 44100
        inputs = proc(text=[c["text"]], audio=audio, padding=True, return_tensors="pt", **kw)
        prompt_len = (
            proc.get_audio_prompt_len(inputs["decoder_attention_mask"]) if audio is not None else None
        )
        with torch.no_grad():
            seq = model.generate(
                **inputs, do_sample=False, guidance_scale=c["guidance"], max_new_tokens=c["max_new"]
            )
        # the processor's own post-processing: start/end of generation, delay reverted, DAC decode
        bos, pad = 1026, 1025
        start = prompt_len if prompt_len is not None else int((seq[0, :, 0] == bos).sum())
        end = seq.shape[1] - int((seq[0, :, 0] == pad).sum()) - 1
        idx = proc.build_indices(
            bsz=1,
            seq_len=seq.shape[1],
            num_channels=seq.shape[2],
            delay_pattern=list(model.config.delay_pattern),
            revert=True,
        )
        aligned = proc.apply_audio_delay(seq, -1, -1, idx)[0, start:end]
        with torch.no_grad():
            wav = proc.batch_decode(seq, audio_prompt_len=prompt_len)[0]
        entry = {
            "seq": seq[0].clone(),
            "codes": aligned.clone(),
            "wav": wav.float().clone(),
            "input_ids": inputs["input_ids"][0].clone(),
        }
        if audio is not None:
            # the clip's codes as the processor's DAC encode produced them (undelayed prefix)
            dec = inputs["decoder_input_ids"][0]
            ridx = proc.build_indices(
                bsz=1,
                seq_len=dec.shape[0],
                num_channels=dec.shape[1],
                delay_pattern=list(model.config.delay_pattern),
                revert=True,
            )
            undone = proc.apply_audio_delay(dec[None], -1, -1, ridx)[0]
            entry["ref_codes"] = undone[1:prompt_len].clone()
        res[c["name"]] = entry
    torch.save(res, out)


def _keys(ckpt: str) -> dict:
    from transformers import DiaForConditionalGeneration

    _, info = DiaForConditionalGeneration.from_pretrained(ckpt, output_loading_info=True)
    return {k: sorted(v) if isinstance(v, (list, set)) else str(v) for k, v in info.items()}


def keys(ckpt: str) -> None:
    print(json.dumps(_keys(ckpt)))


def run_all(ckpt: str, sizes_path: str, out: str, cases_path: str, ours: str) -> None:
    build(ckpt, sizes_path)
    generate(ckpt, out, cases_path)
    res = torch.load(out, weights_only=False)
    res["_keys_ours"] = _keys(ours)
    torch.save(res, out)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"build": build, "generate": generate, "keys": keys, "all": run_all}[cmd](*args)
