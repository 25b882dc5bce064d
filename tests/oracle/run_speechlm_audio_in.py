"""ESPnet SpeechLM audio-in oracle (espnet==202611 + transformers 5.14.1 + torchaudio's resample, the speechlm
oracle venv): task `audio_to_text` (and its dialogue form) on a tiny Bagpiper-like checkpoint whose audio IO
is ESPnet's own `DiscreteAudioIO(codec_choice="Xcodec")` over a tiny random `XcodecModel`, encoder included.

    run_speechlm_audio_in.py all OUT JOB.json RESULT.pt
    run_speechlm_audio_in.py time OUT JOB.json N   seconds of N sequential `inference` calls (benchmark)

JOB = {spec (as run_speechlm.py's, plus "clips"), cases, codec_lengths}. Builds the checkpoint (model.pt
then carries the codec's weights under `multimodal_io_dict.discrete_audio.codec_model.`, as a released
Bagpiper does), calibrates the `<|eos|>` row so that greedy text ends naturally at the text rules'
`min_step` for every case at once (least-norm row over the deciding hidden states; earlier steps are
masked by the reference itself, so no earlier choice moves), and runs, per case, `ParallelLLM.inference`
with the preprocessor's whole batch (waveform included): the prompt as `_embed` fills it, the segments and
the detokenized texts. Per codec length: `XcodecModel.encode(x, bandwidth=io.codec_bandwidth)` on a raw
clip of that many samples, and which of its padding branches ran.
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_speechlm as base  # noqa: E402  (installs the liger_kernel stub; torchaudio: the real one)
from espnet2.speechlm.model.speechlm.multimodal_io.audio import DiscreteAudioIO  # noqa: E402
from espnet2.speechlm.model.speechlm.multimodal_io.text import HuggingFaceTextIO  # noqa: E402

EOS = 2


def build_xcodec(folder, a):
    """A tiny random XcodecModel whose encoder is real: HuBERT strides multiply to the hop (320), as the
    released semantic model's do, so both branches yield one frame per hop; weights scaled so that the
    latents spread over the codebooks (ESPnet's 0.02 init would put every frame on one code)."""
    from transformers import XcodecConfig, XcodecModel

    x = a["xcodec"]
    cfg = XcodecConfig(
        acoustic_model_config={
            "encoder_hidden_size": 4,
            "downsampling_ratios": x["ratios"],
            "decoder_hidden_size": x["decoder_hidden"],
            "upsampling_ratios": x["ratios"][::-1],
            "hidden_size": x["latent"],
        },
        semantic_model_config={
            "hidden_size": 16,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 32,
            "conv_dim": [8] * 7,
            "conv_stride": [5, 2, 2, 2, 2, 2, 2],
            "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
            "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 2,
        },
        codebook_size=a["codec_k"],
        target_bandwidths=x["bandwidths"],
        sample_rate=16000,
    )
    model = XcodecModel(cfg).eval()
    with torch.no_grad():
        for m in model.acoustic_encoder.modules():
            if isinstance(m, torch.nn.Conv1d):
                torch.nn.init.normal_(m.weight, 0, 1.0 / (m.in_channels * m.kernel_size[0]) ** 0.5)
        for q in model.quantizer.quantizers:
            q.codebook.embed.normal_(0, 0.5)
    model.save_pretrained(folder)


def build_ios(out):
    return {
        "text": HuggingFaceTextIO(os.path.join(out, "backbone")),
        "discrete_audio": DiscreteAudioIO(
            codec_choice="Xcodec",
            codec_hf_model_tag=os.path.join(out, "xcodec"),
            codec_max_token_per_frame=8,
            delay_interleave=True,
        ),
    }


def make_model(out, ios):
    vm = base.vocab_meta(ios)
    model = base.ParallelHFModel(
        model_hf_tag=os.path.join(out, "backbone"),
        multimodal_io=ios,
        vocab_meta=vm,
        is_train=False,
        attn_implementation="eager",
        dtype=torch.float32,
    )
    return model, vm


def clip(spec):
    """A deterministic test clip [1, n] float32 in [-1, 1]: two tones and noise."""
    g = np.random.default_rng(spec["seed"])
    t = np.arange(spec["samples"]) / spec["rate"]
    wav = (
        0.4 * np.sin(2 * np.pi * 220 * t)
        + 0.2 * np.sin(2 * np.pi * 1330 * t)
        + 0.1 * g.standard_normal(t.size)
    )
    return wav.astype(np.float32)[None]


def batch(pre, case, clips):
    c = clips[case["clip"]]
    audio = (clip(c), c["rate"])
    if case.get("dialogue"):
        msgs = ([["system", "text", case["system"]]] if case.get("system") else []) + [
            ["user", "audio", audio]
        ]
        return pre.collate_fn([(("dialogue", "tiny", "ex"), {"dialogue": msgs})])
    return pre.collate_fn([(("audio_to_text", "tiny", "ex"), {"audio1": audio, "text1": ""})])


def infer(model, b, inf):
    """`inference` as bin/inference.py calls it (the whole batch); the prompt as `_embed` filled it."""
    kw = {k: v for k, v in b.items() if k.startswith("discrete_audio_") or k == "seqs"}
    kw["seqs"] = b["seqs"].clone()
    rec = base.Recorder(model)
    msgs, _ = model.inference(inf, **kw)
    model.__dict__.pop("_logits_to_token", None)
    model.__dict__.pop("inference_segment", None)
    return rec, msgs, kw["seqs"]


def calibrate(model, vm, batches, inf):
    """The <eos> row wins at step min_step of every case's text segment (and <eot> never does)."""
    W = model.lm_head.weight
    t0, t1 = vm["vocab_intervals"]["text"][0]
    Tt = inf["text"]["min_step"]
    with torch.no_grad():
        W[EOS].zero_()
        W[base.EOT].zero_()
    probe = json.loads(json.dumps(inf))
    probe["text"].update(max_step=Tt + 1, min_step=Tt + 5)
    hs, bs = [], []
    for b in batches:
        rec, _, _ = infer(model, b, probe)
        h = rec.h[Tt][0].detach()
        hs.append(h)
        bs.append(float((W[t0:t1] @ h).max()))
    with torch.no_grad():
        W[EOS] = base._solve(hs, [2 * abs(x) + 1.0 for x in bs])
        W[base.EOT] = base._solve(hs, [-2 * abs(x) - 1.0 for x in bs])
    for b in batches:  # the proof
        rec, _, _ = infer(model, b, inf)
        got = [(len(s), int(s[-1, 0])) for s in rec.segments]
        if got != [(Tt + 1, EOS)]:
            raise SystemExit(f"calibration check failed: segments (length, last) {got}")


def run_all(out, job_path, result_path):
    job = json.load(open(job_path))
    spec = job["spec"]
    torch.manual_seed(spec.get("seed", 0))
    os.makedirs(out, exist_ok=True)
    bdir = os.path.join(out, "backbone")
    V = spec["text_vocab"]
    words = ["[UNK]", "<pad>"] + [f"w{i}" for i in range(V - 2)]
    tok = base.Tokenizer(base.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = base.pre_tokenizers.Whitespace()
    base.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="<pad>").save_pretrained(
        bdir
    )
    b = spec["backbone"]
    base.Qwen3ForCausalLM(
        base.Qwen3Config(
            vocab_size=V,
            hidden_size=b["hidden"],
            intermediate_size=b["mlp"],
            num_hidden_layers=b["layers"],
            num_attention_heads=b["heads"],
            num_key_value_heads=b["kv_heads"],
            max_position_embeddings=1024,
            rope_theta=b.get("rope_theta", 10000.0),
            head_dim=b["head_dim"],
        )
    ).save_pretrained(bdir)
    build_xcodec(os.path.join(out, "xcodec"), spec["audio"])
    ios = build_ios(out)
    model, vm = make_model(out, ios)
    with torch.no_grad():
        model.stream_emb.weight.normal_(0, spec.get("stream_emb_std", 0.5))
        for name, p in model.named_parameters():
            if p.dim() == 2 and name != "stream_emb.weight" and "multimodal_io_dict" not in name:
                p.mul_(spec.get("weight_scale", 1.0))
    keys = set(model.state_dict())  # what a checkpoint holds (prepare_inference adds buffers)
    model.prepare_inference()
    model.eval()
    pre = base.preprocessor(ios, vm)
    inf = spec["inference"]
    clips = spec["clips"]
    batches = {c["name"]: batch(pre, c, clips) for c in job["cases"]}
    if job.get("calibrate", True):
        calibrate(model, vm, list(batches.values()), inf)
    torch.save(
        {"module": {k: v for k, v in model.state_dict().items() if k in keys}}, os.path.join(out, "model.pt")
    )
    train = {
        "job_type": "speechlm",
        "multimodal_io": {
            "text": {"tokenizer_name": bdir},
            "discrete_audio": {
                "codec_choice": "Xcodec",
                "codec_hf_model_tag": os.path.join(out, "xcodec"),
                "codec_max_token_per_frame": 8,
                "delay_interleave": True,
            },
        },
        "vocab_intervals": {k: [list(p) for p in v] for k, v in vm["vocab_intervals"].items()},
        "model": {
            "model_choice": "parallel",
            "model_hf_tag": bdir,
            "model_conf": {"attn_implementation": "eager"},
        },
        "preprocessor": {
            "audio_input": "discrete_audio",
            "audio_output": "discrete_audio",
            "loss_region": "assistant",
        },
    }
    import yaml

    with open(os.path.join(out, "train_bagpiper_asr.yaml"), "w") as f:
        yaml.safe_dump(train, f, sort_keys=False)
    with open(os.path.join(out, "inference.yaml"), "w") as f:
        yaml.safe_dump(dict(inf, dtype="float32"), f, sort_keys=False)

    results = {
        "cases": {},
        "codec": {},
        "clips": {k: clip(c)[0] for k, c in clips.items()},
        "bandwidth": ios["discrete_audio"].codec_bandwidth,
    }
    for case in job["cases"]:
        torch.manual_seed(42)  # bin/inference.py reseeds per sample
        rec, msgs, filled = infer(model, batches[case["name"]], inf)
        texts = [c[0] for r, m, c in msgs if m == "text"]
        results["cases"][case["name"]] = {"seqs": filled[0].clone(), "segments": rec.segments, "texts": texts}
        print(
            case["name"],
            "prompt",
            tuple(filled[0].shape),
            "segments",
            [tuple(s.shape) for s in rec.segments],
            "texts",
            texts,
        )
    codec = ios["discrete_audio"].codec_model
    g = torch.Generator().manual_seed(7)
    for n in job["codec_lengths"]:
        x = (0.3 * torch.randn(1, 1, n, generator=g)).clamp(-1, 1)
        with torch.no_grad():
            codes = codec.encode(x, bandwidth=ios["discrete_audio"].codec_bandwidth, return_dict=False)
        T_s = codec.encoder_semantic(codec._extract_semantic_features(x).transpose(1, 2)).shape[2]
        padded = codec._get_conv1d_output_lengths(n, codec.acoustic_encoder) != T_s
        results["codec"][n] = {"x": x[0, 0].clone(), "codes": codes[0].clone(), "padded": padded}
        print(
            "codec",
            n,
            tuple(codes.shape),
            "padded" if padded else "unpadded",
            "distinct codes",
            int(codes[0, 0].unique().numel()),
        )
    torch.save(results, result_path)


def time_sequential(out, job_path, n):
    """ESPnet's own serving loop on the checkpoint `all` built: one request at a time (bin/inference.py),
    the first case's clip, the text rules of the job (min_step = max_step: exactly that many tokens)."""
    import time

    job = json.load(open(job_path))
    ios = build_ios(out)
    model, vm = make_model(out, ios)
    model.load_state_dict(torch.load(os.path.join(out, "model.pt"), weights_only=True)["module"], strict=True)
    model.prepare_inference()
    model = model.eval()
    pre = base.preprocessor(ios, vm)
    b = batch(pre, job["cases"][0], job["spec"]["clips"])
    inf = job["spec"]["inference"]
    infer(model, b, inf)  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    steps = 0
    for _ in range(n):
        rec, _, _ = infer(model, b, inf)
        steps += sum(len(s) for s in rec.segments)
    print(
        json.dumps(
            {
                "wall_s": time.perf_counter() - wall,
                "cpu_s": time.process_time() - cpu,
                "requests": n,
                "tokens": steps,
            }
        )
    )


if __name__ == "__main__":
    torch.set_num_threads(2)
    if sys.argv[1] == "all":
        run_all(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "time":
        time_sequential(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]}")
