"""Oracle for Higgs Audio v2 (runs in the Higgs oracle venv, scripts/setup_oracle_higgs.sh): transformers
5.23's own HiggsAudioV2ForConditionalGeneration, HiggsAudioV2Processor and HiggsAudioV2TokenizerModel.

usage:
  run_higgs.py all CKPT SIZES.json OUT.pt CASES.json [OURS]
      build a random tiny checkpoint with transformers itself (model + tokenizer + processor with its chat
      template + the audio tokenizer in CKPT/audio_tokenizer, all via save_pretrained), optionally calibrate
      a natural EOS, run greedy `generate` per case and the processor's `batch_decode`, and (OURS given)
      load OUR builder's checkpoint in transformers, reporting missing / unexpected keys. One process, one
      import of transformers.
  run_higgs.py encode TOKDIR WAVS.json OUT.pt   the audio tokenizer's encode on each clip (.npy paths)
  run_higgs.py qwen3 CKPT OUT.pt          transformers Qwen3Model on a v3 checkpoint's backbone weights (CKPT
                                          holds qwen3/ written by our v3 builder): last hidden states for the
                                          ids in CKPT/qwen3/ids.json
  run_higgs.py processor OUT.pt LOGITS.pt the delay-pattern processor alone on given prompt ids and logits
  run_higgs.py v3 CKPT QOUT.pt POUT.pt LOGITS.pt   both of the above in one process
  run_higgs.py throughput CKPT N FRAMES THREADS
                                          N sequential greedy generates + batch_decode
                                          (`python -m benchmarks bench_higgs`)
A case: {"name", "text", "max_new"} (+ "ref_text" and "ref_codes" or "ref_wav", a .npy clip, for clone);
the prompt is the documented single-speaker conversation (system
"Generate audio following instruction.", scene "Audio is recorded from a quiet room.", the user text).
"""

import hashlib
import json
import os
import sys
from pathlib import Path

import torch  # noqa: E402


def _torchaudio() -> str:
    """The real torchaudio when it imports (scripts/setup_oracle_higgs.sh installs it without its compiled
    extensions: `functional.resample`, the tokenizer's 24 -> 16 kHz step, is plain torch); else the stand-in
    in shims/, which refuses to resample (decoding never does)."""
    try:
        import torchaudio.functional  # noqa: F401

        return "torchaudio"
    except (ImportError, OSError):
        for name in [m for m in sys.modules if m == "torchaudio" or m.startswith("torchaudio.")]:
            del sys.modules[name]
        sys.path.insert(0, str(Path(__file__).resolve().parent / "shims"))
        return "shim"


RESAMPLER = _torchaudio()

torch.use_deterministic_algorithms(True)
torch.set_num_threads(2)

SYSTEM = "Generate audio following instruction."
SCENE = "Audio is recorded from a quiet room."
SPECIALS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|scene_desc_start|>",
    "<|scene_desc_end|>",
    "<|audio_out_bos|>",
    "<|AUDIO_OUT|>",
    "<|audio_eos|>",
    "<|reserved_special_token_6|>",
    "<|audio_bos|>",
    "<|AUDIO|>",
]


def conversation(text: str) -> list:
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "scene", "content": [{"type": "text", "text": SCENE}]},
        {"role": "user", "content": [{"type": "text", "text": text}]},
    ]


def chat_template() -> str:
    """The chat template the released HF-format checkpoint's processor carries (transformers' conversion
    script writes it; the wheel does not ship that script, so its text lives beside this file)."""
    return (Path(__file__).resolve().parent / "higgs_chat_template.jinja").read_text()


def build_tokenizer(ckpt: str):
    """Byte-level BPE (256 byte tokens, no merges) + the Llama-3 / Higgs special tokens at 256.."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|eot_id|>",
        additional_special_tokens=SPECIALS,
    )
    fast.save_pretrained(ckpt)
    return fast


def build(ckpt: str, s: dict):
    from transformers import (
        DacFeatureExtractor,
        GenerationConfig,
        HiggsAudioV2Config,
        HiggsAudioV2ForConditionalGeneration,
        HiggsAudioV2Processor,
        HiggsAudioV2TokenizerConfig,
        HiggsAudioV2TokenizerModel,
    )

    torch.manual_seed(s["seed"])
    tok = build_tokenizer(ckpt)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
    m = s["model"]
    cfg = HiggsAudioV2Config(
        vocab_size=m["vocab_size"],
        hidden_size=m["hidden_size"],
        intermediate_size=m["intermediate_size"],
        num_hidden_layers=m["num_hidden_layers"],
        num_attention_heads=m["num_attention_heads"],
        num_key_value_heads=m["num_key_value_heads"],
        head_dim=m["head_dim"],
        max_position_embeddings=m["max_position_embeddings"],
        codebook_size=1026,
        num_codebooks=8,
        pad_token_id=ids["<|eot_id|>"],
        bos_token_id=ids["<|begin_of_text|>"],
        eos_token_id=ids["<|eot_id|>"],
        audio_token_id=ids["<|AUDIO_OUT|>"],
        audio_bos_token_id=ids["<|audio_out_bos|>"],
        audio_delay_token_id=ids["<|reserved_special_token_6|>"],
    )
    model = HiggsAudioV2ForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():  # norms are ones at init: give them some spread so DualFFN paths differ
            if p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
        # Stream BOS/EOS rows at zero: a random code (max of 1024 logits) always beats them, so the only EOS
        # is the calibrated one and no stray BOS appears mid-stream.
        W = model.audio_lm_head.weight.view(8, 1026, -1)
        W[:, 1024:] = 0.0
    model.generation_config = GenerationConfig(
        bos_token_id=cfg.bos_token_id,
        eos_token_id=cfg.eos_token_id,
        pad_token_id=cfg.pad_token_id,
        do_sample=False,
        max_new_tokens=s.get("max_new_tokens", 300),
    )
    model.save_pretrained(ckpt)

    c = s["codec"]
    tcfg = HiggsAudioV2TokenizerConfig(
        target_bandwidths=[0.5, 1, 1.5, 2],
        sample_rate=24000,
        codebook_size=1024,
        codebook_dim=c["codebook_dim"],
        acoustic_model_config={
            "encoder_hidden_size": c["encoder_hidden_size"],
            "downsampling_ratios": c["ratios"],
            "upsampling_ratios": c["ratios"],
            "decoder_hidden_size": c["decoder_hidden_size"],
            "hidden_size": c["acoustic_hidden"],
            "sampling_rate": 24000,
        },
        semantic_model_config={
            "hidden_size": c["semantic_hidden"],
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 2 * c["semantic_hidden"],
            "conv_dim": [8] * 7,
            "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 2,
        },
    )
    codec = HiggsAudioV2TokenizerModel(tcfg).eval()
    with torch.no_grad():  # the codebook buffers initialise to zero (every code would decode alike)
        for q in codec.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn_like(q.codebook.embed))
            q.codebook.embed_avg.copy_(q.codebook.embed)
        for name, p in codec.acoustic_decoder.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand_like(p))
    if c.get("output_gain"):
        with torch.no_grad():
            codec.acoustic_decoder.conv2.weight.mul_(float(c["output_gain"]))
    codec.save_pretrained(Path(ckpt) / "audio_tokenizer")
    codec = HiggsAudioV2TokenizerModel.from_pretrained(Path(ckpt) / "audio_tokenizer").eval()
    fe = DacFeatureExtractor(
        feature_size=1,
        hop_length=1,
        padding_side="right",
        padding_value=0.0,
        sampling_rate=24000,
        return_attention_mask=True,
    )
    proc = HiggsAudioV2Processor(
        feature_extractor=fe, tokenizer=tok, audio_tokenizer=codec, chat_template=chat_template()
    )
    proc.save_pretrained(ckpt)
    return model, proc


def inputs_for(proc, text: str):
    return proc.apply_chat_template(
        conversation(text),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        sampling_rate=24000,
        return_tensors="pt",
    )


def clone_inputs(proc, text: str, ref_text: str, codes: list) -> dict:
    """The processor's voice-clone inputs from given clip codes [T, 8] (its own audio encode needs
    torchaudio's resampler): the template rendered with the clip turn, `<|AUDIO_OUT|>` expanded by
    get_audio_tokens, the codes framed by stream BOS/EOS and laid out by build_delay_pattern."""
    conv = conversation(text)
    conv[2:2] = [
        {"role": "user", "content": [{"type": "text", "text": ref_text}]},
        {"role": "assistant", "content": [{"type": "audio", "url": "clip.wav"}]},
    ]
    rendered = proc.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
    c = torch.tensor(codes).T[None]  # [1, 8, T]
    bos = c.new_full((1, 8, 1), proc.audio_stream_bos_id)
    eos = c.new_full((1, 8, 1), proc.audio_stream_eos_id)
    rows = proc.build_delay_pattern(torch.cat([bos, c, eos], dim=2))[0].T  # [n, 8]
    rendered = rendered.replace(proc.audio_token, proc.get_audio_tokens(rows.shape[0]))
    data = proc.tokenizer([rendered], return_tensors="pt", add_special_tokens=False)
    return {
        "input_ids": data["input_ids"],
        "attention_mask": data["attention_mask"],
        "audio_input_ids": rows[None],
        "audio_input_ids_mask": torch.ones(1, rows.shape[0], dtype=torch.bool),
    }


def clip_inputs(proc, text: str, ref_text: str, wav_path: str) -> dict:
    """The processor's own voice-clone inputs from a reference clip: the template rendered with the clip's
    turn, then `processor(text, audio)`, which encodes the clip with the audio tokenizer, frames and delays
    the codes and expands `<|AUDIO_OUT|>`."""
    import numpy as np

    conv = conversation(text)
    conv[2:2] = [
        {"role": "user", "content": [{"type": "text", "text": ref_text}]},
        {"role": "assistant", "content": [{"type": "audio", "url": "clip.wav"}]},
    ]
    rendered = proc.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
    wav = np.load(wav_path).astype(np.float32)
    return dict(proc(text=rendered, audio=wav, sampling_rate=24000, return_tensors="pt"))


def greedy(model, proc, text: str, max_new: int, case: dict | None = None):
    if case and case.get("ref_wav") is not None:
        inputs = clip_inputs(proc, text, case["ref_text"], case["ref_wav"])
    elif case and case.get("ref_codes") is not None:
        inputs = clone_inputs(proc, text, case["ref_text"], case["ref_codes"])
    else:
        inputs = inputs_for(proc, text)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new, do_sample=False, return_dict_in_generate=True)
    return inputs, out


def aligned(proc, seq: torch.Tensor) -> torch.Tensor:
    """What batch_decode hands the codec: from the last all-BOS frame, up to the first all-EOS frame,
    delay reverted, clipped to real codes. seq [T, 8]."""
    bos, eos = proc.audio_stream_bos_id, proc.audio_stream_eos_id
    start = int((seq == bos).all(-1).nonzero()[-1, 0])
    seq = seq[start:]
    ends = (seq == eos).all(-1).nonzero()
    end = int(ends[0, 0]) if len(ends) else seq.shape[0]
    return proc.revert_delay_pattern(seq[1:end]).clip(0, bos - 1)


def calibrate_eos(model, proc, ckpt: str, text: str, position: int, span: int = 12) -> int:
    """Make greedy decoding of `text` pick stream EOS on codebook 0 at the first workable generation step in
    [position, position + span): codebook 0's EOS row of audio_lm_head becomes c * h / |h| (h: the hidden
    that samples that step), c 1.5x what beats the best code there; earlier steps must stay below their best
    code so the trajectory before the EOS is unchanged. Returns the step chosen."""
    hs = []
    hook = model.audio_lm_head.register_forward_hook(
        lambda mod, a, o: hs.append(a[0][0, -1].detach().clone())
    )
    greedy(model, proc, text, position + span + 10)
    hook.remove()
    H = torch.stack(hs)  # H[i] samples generation step i
    W = model.audio_lm_head.weight.detach().view(8, 1026, -1)[0]
    best = (H @ W[:1024].T).max(-1).values
    for step in range(position, min(position + span, H.shape[0])):
        u = H[step] / H[step].norm()
        c = 1.5 * float(best[step]) / float(H[step].norm())
        earlier = c * (H[:step] @ u)
        if bool((best[: step + 1] > 0).all()) and bool((earlier < best[:step]).all()):
            with torch.no_grad():
                model.audio_lm_head.weight.view(8, 1026, -1)[0, 1025] = c * u
            model.save_pretrained(ckpt)
            return step
    raise RuntimeError(f"no step in [{position}, {position + span}) can take a calibrated EOS")


def digest(ckpt: str) -> str:
    h = hashlib.sha256()
    for p in sorted(Path(ckpt).rglob("*.safetensors")):
        h.update(p.read_bytes())
    return h.hexdigest()


def keys(ours: str) -> dict:
    from transformers import HiggsAudioV2ForConditionalGeneration, HiggsAudioV2TokenizerModel

    _, info = HiggsAudioV2ForConditionalGeneration.from_pretrained(ours, output_loading_info=True)
    _, cinfo = HiggsAudioV2TokenizerModel.from_pretrained(
        Path(ours) / "audio_tokenizer", output_loading_info=True
    )
    pick = ("missing_keys", "unexpected_keys", "mismatched_keys")
    return {
        "model": {k: sorted(map(str, info.get(k, []))) for k in pick},
        "codec": {k: sorted(map(str, cinfo.get(k, []))) for k in pick},
    }


def run_all(ckpt: str, sizes: str, out: str, cases_path: str, ours: str | None) -> None:
    s = json.loads(Path(sizes).read_text())
    model, proc = build(ckpt, s)
    result = {"eos_step": None}
    if "eos_at" in s:
        result["eos_step"] = calibrate_eos(
            model, proc, ckpt, s["eos_at"]["text"], int(s["eos_at"]["position"])
        )
    cases = json.loads(Path(cases_path).read_text())
    result["cases"] = {}
    result["resampler"] = RESAMPLER
    for case in cases:
        if case.get("ref_wav") is not None and RESAMPLER != "torchaudio":
            continue  # the clip's encode needs the real resampler (the test says so and skips)
        inputs, gen = greedy(model, proc, case["text"], int(case["max_new"]), case)
        seq = gen.audio_sequences[0]
        codes = aligned(proc, seq)
        with torch.no_grad():
            wav = proc.batch_decode(gen.audio_sequences)[0].double().numpy()
            wav64 = proc.audio_tokenizer.double().decode(codes.T[None]).audio_values[0, 0].numpy()
            proc.audio_tokenizer.float()
        result["cases"][case["name"]] = {
            "input_ids": inputs["input_ids"][0].tolist(),
            "audio_input_ids": inputs["audio_input_ids"][0].numpy() if "audio_input_ids" in inputs else None,
            "delayed": seq.numpy(),
            "text_tail": gen.sequences[0, inputs["input_ids"].shape[1] :].tolist(),
            "codes": codes.numpy(),
            "wav": wav,
            "wav64": wav64,
        }
    result["digest"] = digest(ckpt)
    if ours:
        result["keys"] = keys(ours)
    if s.get("encode") and RESAMPLER == "torchaudio":
        result["encode"] = encode_all(ckpt, ours, s["encode"])
    torch.save(result, out)


def encode_all(ckpt: str, ours: str | None, spec: dict) -> dict:
    """`spec`: {"wavs": [.npy at 24 kHz], "resample": [[.npy, orig, new]]} -> the tokenizer's encode of each
    clip with this checkpoint's tokenizer (and with OURS's, when given), and torchaudio's resample."""
    import numpy as np
    import torchaudio
    from transformers import HiggsAudioV2TokenizerModel

    res: dict = {"resample": []}
    for name, root in (("ckpt", ckpt), ("ours", ours)):
        if root is None:
            continue
        codec = HiggsAudioV2TokenizerModel.from_pretrained(Path(root) / "audio_tokenizer").eval()
        res[name] = []
        for path in spec["wavs"]:
            wav = torch.from_numpy(np.load(path).astype(np.float32))[None, None]
            with torch.no_grad():
                res[name].append(codec.encode(wav).audio_codes[0].T.numpy())
    for path, orig, new in spec.get("resample", []):
        wav = torch.from_numpy(np.load(path).astype(np.float32))
        res["resample"].append(torchaudio.functional.resample(wav, int(orig), int(new)).numpy())
    return res


def encode(tok_dir: str, wavs_json: str, out: str) -> None:
    """`HiggsAudioV2TokenizerModel.encode` on each clip (.npy, float32 at 24 kHz): codes [T, C]."""
    import numpy as np
    from transformers import HiggsAudioV2TokenizerModel

    if RESAMPLER != "torchaudio":
        torch.save({"resampler": RESAMPLER}, out)
        return
    codec = HiggsAudioV2TokenizerModel.from_pretrained(tok_dir).eval()
    result = {"resampler": RESAMPLER, "codes": []}
    for path in json.loads(Path(wavs_json).read_text()):
        wav = torch.from_numpy(np.load(path).astype(np.float32))[None, None]
        with torch.no_grad():
            result["codes"].append(codec.encode(wav).audio_codes[0].T.numpy())
    torch.save(result, out)


def qwen3(ckpt: str, out: str) -> None:
    from transformers import Qwen3Config, Qwen3Model

    root = Path(ckpt) / "qwen3"
    cfg = Qwen3Config(**json.loads((root / "config.json").read_text()))
    model = Qwen3Model(cfg).eval()
    from safetensors.torch import load_file

    missing, unexpected = model.load_state_dict(load_file(str(root / "model.safetensors")), strict=False)
    ids = torch.tensor(json.loads((root / "ids.json").read_text()))[None]
    with torch.no_grad():
        hid = model(input_ids=ids).last_hidden_state[0]
    torch.save({"hidden": hid, "missing": list(missing), "unexpected": list(unexpected)}, out)


def processor(out: str, logits_path: str) -> None:
    from transformers.models.higgs_audio_v2.generation_higgs_audio_v2 import (
        HiggsAudioV2DelayPatternLogitsProcessor,
    )

    d = torch.load(logits_path)
    p = HiggsAudioV2DelayPatternLogitsProcessor(
        delay_pattern=[k + 1 for k in range(8)],
        audio_bos_token_id=d["audio_bos"],
        audio_eos_token_id=d["audio_delay"],
        audio_stream_bos_id=1024,
        audio_stream_eos_id=1025,
        num_codebooks=8,
        codebook_size=1026,
    )
    ids = d["prompt_ids"][None]
    frames, text = [], []
    for step in range(d["logits"].shape[0]):
        scores = p(ids, d["logits"][step][None].reshape(1, -1).clone())
        tok = scores.argmax(-1).reshape(8)
        frames.append(tok)
        nxt = d["audio_token"]
        if bool((tok == 1025).any()) or int(ids[0, -1]) == d["audio_delay"]:
            nxt = d["audio_delay"]
        if bool((tok == 1025).all()):
            nxt = d["eos"]
        text.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
        if nxt == d["eos"]:
            break
    torch.save({"frames": torch.stack(frames), "text": text}, out)


def throughput(ckpt: str, requests: str, frames: str, threads: str) -> None:
    """What a user would run instead: transformers' generate, one request after another (it has no server),
    then the processor's batch_decode; greedy, max_new_tokens = frames + 8 (the delay fill). One JSON line."""
    import time

    from transformers import AutoProcessor, HiggsAudioV2ForConditionalGeneration

    torch.set_num_threads(int(threads))
    model = HiggsAudioV2ForConditionalGeneration.from_pretrained(ckpt).eval()
    proc = AutoProcessor.from_pretrained(ckpt) if (Path(ckpt) / "chat_template.jinja").exists() else None
    if proc is None:
        from transformers import (
            DacFeatureExtractor,
            HiggsAudioV2Processor,
            HiggsAudioV2TokenizerModel,
            PreTrainedTokenizerFast,
        )

        tok = PreTrainedTokenizerFast.from_pretrained(ckpt)
        codec = HiggsAudioV2TokenizerModel.from_pretrained(Path(ckpt) / "audio_tokenizer").eval()
        fe = DacFeatureExtractor(feature_size=1, hop_length=1, sampling_rate=24000)
        proc = HiggsAudioV2Processor(
            feature_extractor=fe, tokenizer=tok, audio_tokenizer=codec, chat_template=chat_template()
        )
    texts = ["The beggar's plea, the politician's sceptre.", "Get the trust fund to the bank early."]
    samples = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(int(requests)):
        inputs = inputs_for(proc, texts[i % 2])
        with torch.no_grad():
            gen = model.generate(**inputs, max_new_tokens=int(frames) + 8, do_sample=False)
            samples += int(proc.batch_decode(gen)[0].numel())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "audio_s": samples / 24000, "requests": int(requests)}))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cmd, *args = sys.argv[1:]
    if cmd == "all":
        run_all(args[0], args[1], args[2], args[3], args[4] if len(args) > 4 else None)
    elif cmd == "encode":
        encode(*args)
    elif cmd == "qwen3":
        qwen3(*args)
    elif cmd == "processor":
        processor(*args)
    elif cmd == "v3":  # qwen3 + processor in one process (one import of transformers)
        qwen3(args[0], args[1])
        processor(args[2], args[3])
    elif cmd == "throughput":
        throughput(*args)
    else:
        raise SystemExit(__doc__)
