"""ESPnet SpeechLM oracle (espnet==202611 + transformers 5.14.1, the speechlm oracle venv).

    run_speechlm.py build OUT SPEC.json     tiny random checkpoint built by ESPnet's own classes
    run_speechlm.py run OUT CASES.json RESULT.pt   ESPnet's ParallelLLM.inference on it, per case
    run_speechlm.py all ROOT JOBS.json RESULT.pt   both, for each job {name, spec, cases} (one start-up)
    run_speechlm.py time OUT N STEPS               seconds of N sequential `inference` calls (benchmark)

`build` writes the layout `espnet2/speechlm/bin/inference.py` reads: train.yaml (job config, with the
token layout recorded as `vocab_intervals`), inference.yaml, model.pt = {"module": state_dict}, and the
backbone (config.json + tokenizer) in OUT/backbone, which the train config's model_hf_tag names. The
discrete audio IO is ESPnet's DiscreteAudioIO built without codec weights (`__new__` plus its own
`_init_sanity_check`, as ../shared/oracle/opuslm does); its codec decode is the identity (codes out).

Natural ends: the text segment's <eot> row and the audio segment's <eos> row of lm_head are set so that
greedy decoding ends exactly at the steps the spec names (for the audio: at guidance 1 and 3 at once,
the row solved in the span of the two deciding hidden states), and every earlier step is checked to keep
its choice, so the trajectories before the ends are the random model's own.
"""

import importlib.machinery
import json
import os
import sys
import types

import torch
import transformers  # noqa: F401  (imported before the stubs exist)


def _stub(name, **attrs):
    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod


# loss.py imports liger_kernel (training loss only); audio.py imports torchaudio (resampling only)
_stub("liger_kernel")
_stub("liger_kernel.ops")
_stub("liger_kernel.ops.fused_linear_cross_entropy", LigerFusedLinearCrossEntropyFunction=None)
try:
    import torchaudio  # noqa: F401
except Exception:
    _stub("torchaudio")

import yaml  # noqa: E402
from espnet2.speechlm.model.speechlm.lm.parallel import ParallelHFModel  # noqa: E402
from espnet2.speechlm.model.speechlm.multimodal_io.abs_io import AbsIO  # noqa: E402
from espnet2.speechlm.model.speechlm.multimodal_io.audio import DiscreteAudioIO  # noqa: E402
from espnet2.speechlm.model.speechlm.multimodal_io.text import HuggingFaceTextIO  # noqa: E402
from espnet2.speechlm.model.speechlm.speechlm_job import (  # noqa: E402
    SpeechLMJobTemplate,
    SpeechLMPreprocessor,
)
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import (  # noqa: E402
    LlamaConfig,
    LlamaForCausalLM,
    Olmo2Config,
    Olmo2ForCausalLM,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

EOS, EOT = 2, 3


def tiny_audio_io(n_ssl, ssl_k, n_codec, codec_k):
    io = DiscreteAudioIO.__new__(DiscreteAudioIO)
    AbsIO.__init__(io, modality="audio", is_discrete=True)
    io.codec_choice, io.ssl_choice = "fake", ("fake" if n_ssl else None)
    io.use_codec, io.use_ssl = True, n_ssl > 0
    io.codec_model = io.ssl_model = io.km_model = None
    io.codec_n_streams, io.codec_vocab_size = n_codec, [codec_k] * n_codec
    io.ssl_n_streams, io.ssl_vocab_size = n_ssl, [ssl_k] * n_ssl
    io.codec_sample_rate = io.ssl_sample_rate = 16000
    io.codec_frame_shift = io.ssl_frame_shift = 320
    io.codec_frame_per_second = io.ssl_frame_per_second = 50
    io.stream_weights, io.delay_interleave, io.device = None, True, "cpu"
    io._init_sanity_check()
    io._codec_decode_batch = lambda codes, lengths: (codes, lengths)  # identity: the codes come out
    return io


def build_ios(out, spec):
    a = spec["audio"]
    return {"text": HuggingFaceTextIO(os.path.join(out, "backbone")),
            "discrete_audio": tiny_audio_io(a["n_ssl"], a["ssl_k"], a["n_codec"], a["codec_k"])}


def vocab_meta(ios):
    job = SpeechLMJobTemplate.__new__(SpeechLMJobTemplate)
    job.config, job.is_train, job.multimodal_io = {}, False, ios
    job._build_vocabulary()
    return job.vocab_meta


def make_model(out, spec, ios, attn="eager"):
    vm = vocab_meta(ios)
    conf = {"tie_word_embeddings": True} if spec.get("tie_word_embeddings") else {}
    model = ParallelHFModel(model_hf_tag=os.path.join(out, "backbone"), multimodal_io=ios, vocab_meta=vm,
                            is_train=False, attn_implementation=attn, dtype=torch.float32, **conf)
    return model, vm


def preprocessor(ios, vm):
    return SpeechLMPreprocessor(is_train=False, multimodal_io=ios, vocab=vm["vocab"],
                                vocab_intervals=vm["vocab_intervals"], audio_input="discrete_audio",
                                audio_output="discrete_audio", loss_region="assistant")


def prompt_batch(pre, case):
    if case.get("instructions"):
        data = {"dialogue": [["system", "text", case["instructions"]], ["user", "text", case["text"]]]}
        key = ("dialogue", "tiny", "ex")
    else:
        data = {"text1": case["text"]}
        key = ("text_to_audio", "tiny", "ex")
    return pre.collate_fn([(key, data)])


class Recorder:
    """Per sampling step: the stream-0 input of lm_head ([B, H]; B = 2 under CFG) and the sampled tokens;
    per segment: the hypotheses inference_segment returned (eos/eot included)."""

    def __init__(self, model):
        self.model = model
        self.h, self.steps, self.segments, self.cfgs = [], [], [], []
        self._last = None
        def hook(mod, args, out):
            self._last = args[0][:, -1, 0].detach().clone()

        model.lm_head.register_forward_hook(hook)
        orig_tok, orig_seg = model._logits_to_token, model.inference_segment

        def tok(logits, temperature, topk):
            t = orig_tok(logits, temperature=temperature, topk=topk)
            self.h.append(self._last)
            self.steps.append(t[0, 0].clone())
            return t

        def seg(config, cache, prev_token, mask):
            self.cfgs.append(config.get("cfg", 1))
            hypos, cache, last = orig_seg(config=config, cache=cache, prev_token=prev_token, mask=mask)
            self.segments.append(hypos[0].clone())
            return hypos, cache, last

        model._logits_to_token, model.inference_segment = tok, seg


def run_inference(model, seqs, inference_config):
    rec = Recorder(model)
    msgs, _ = model.inference(inference_config, seqs=seqs.clone())
    model.__dict__.pop("_logits_to_token", None)
    model.__dict__.pop("inference_segment", None)
    return rec, msgs


def _effective(h, w):
    return h[0] if h.shape[0] == 1 else w * h[0] + (1 - w) * h[1]


def _round(t, spec):
    """What the saved checkpoint will hold: BF16 when the spec asks for it (as released checkpoints are)."""
    return t.to(torch.bfloat16).float() if spec.get("bf16") else t


def _solve(rows, targets):
    """The least-norm vector r with r . rows[i] = targets[i]."""
    M = torch.stack(rows).detach()
    return torch.linalg.solve(M @ M.T, torch.tensor(targets, dtype=M.dtype)) @ M


def calibrate(model, vm, seqs, inf, spec):
    """Natural ends at the first steps the rules allow: <eot> and <eos> are masked on stream 0 until a
    segment's min_step, so rows that win exactly at step min_step (text: <eot>; audio: <eos>, at every
    guidance of the spec from one row) end the segments there without touching any earlier step. The
    rows are solved from the deciding hidden states; a rerun checks the ends."""
    cal = spec["calibrate"]
    W = model.lm_head.weight
    t0, t1 = vm["vocab_intervals"]["text"][0]
    a0, a1 = vm["vocab_intervals"]["discrete_audio"][0]
    Tt, Ta = inf["text"]["min_step"], inf["audio"]["min_step"]
    guid = [float(w) for w in cal["audio_cfgs"]]
    with torch.no_grad():
        W[EOT].zero_()
        W[EOS].zero_()
    li = json.loads(json.dumps(inf))  # collect with the ends masked throughout (min_step past max_step)
    li["text"].update(max_step=Tt + 1, min_step=Tt + 5)
    li["audio"].update(max_step=1, min_step=5)
    rec, _ = run_inference(model, seqs, li)
    ht = rec.h[Tt][0].detach()
    bt = float((W[t0:t1] @ ht).max())
    with torch.no_grad():
        W[EOT] = _round(_solve([ht], [2 * abs(bt) + 1.0]), spec)
    li["text"].update(max_step=Tt + 1, min_step=Tt)
    li["audio"].update(max_step=Ta + 1, min_step=Ta + 5)
    # With tied embeddings the <eot> row is also what the audio segment is fed first, so solving it moves
    # the audio's hidden states: iterate until the rerun proves both ends (untied: the first round does).
    for _ in range(6):
        ha, ba = [], []
        for w in guid:
            li["audio"]["cfg"] = w
            rec, _ = run_inference(model, seqs, li)
            h = _effective(rec.h[Tt + 1 + Ta], w).detach()
            ha.append(h)
            ba.append(float((W[a0:a1] @ h).max()))
        with torch.no_grad():
            W[EOS] = _round(_solve(ha, [2 * abs(b) + 1.0 for b in ba]), spec)
            eos_t = float(W[EOS] @ ht)
            W[EOT] = _round(_solve([ht, *ha], [2 * max(abs(bt), abs(eos_t)) + 1.0, *[-abs(b) for b in ba]]),
                            spec)
        got = []
        for w in guid:  # the proof
            pi = json.loads(json.dumps(inf))
            pi["audio"]["cfg"] = w
            try:
                rec, _ = run_inference(model, seqs, pi)
            except AttributeError:  # a third segment whose detected modality has no IO
                got.append(None)
                continue
            got.append([(len(x), int(x[-1, 0])) for x in rec.segments])
        if all(g == [(Tt + 1, EOT), (Ta + 1, EOS)] for g in got):
            break
    else:
        raise SystemExit(f"calibration check failed: segments (length, last) per guidance {got}")
    cal["found"] = {"text_eot": Tt, "audio_eos": Ta}


def build_xcodec(folder, a):
    """A tiny random XcodecModel (transformers' own class; HuBERT semantic side included, as the class
    needs it) with codebooks and a louder output layer, so waveform tolerances mean something."""
    from transformers import XcodecConfig, XcodecModel

    x = a["xcodec"]
    cfg = XcodecConfig(
        acoustic_model_config={"encoder_hidden_size": 4, "downsampling_ratios": x["ratios"],
                               "decoder_hidden_size": x["decoder_hidden"],
                               "upsampling_ratios": x["ratios"][::-1], "hidden_size": x["latent"]},
        semantic_model_config={"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                               "intermediate_size": 16, "conv_dim": [8], "conv_stride": [5],
                               "conv_kernel": [10], "num_conv_pos_embeddings": 16,
                               "num_conv_pos_embedding_groups": 2},
        codebook_size=a["codec_k"], target_bandwidths=x["bandwidths"], sample_rate=16000)
    model = XcodecModel(cfg).eval()
    with torch.no_grad():
        for q in model.quantizer.quantizers:
            q.codebook.embed.normal_(0, 1.0)
        model.acoustic_decoder.conv2.weight.mul_(x.get("gain", 30.0))
    assert model.config.num_quantizers >= a["n_codec"], model.config.num_quantizers
    model.save_pretrained(folder)


def build(out, spec_path):
    spec = json.load(open(spec_path))
    torch.manual_seed(spec.get("seed", 0))
    bdir = os.path.join(out, "backbone")
    V = spec["text_vocab"]
    words = ["[UNK]", "<pad>"] + [f"w{i}" for i in range(V - 2)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="<pad>").save_pretrained(bdir)
    b = spec["backbone"]
    common = dict(vocab_size=V, hidden_size=b["hidden"], intermediate_size=b["mlp"],
                  num_hidden_layers=b["layers"], num_attention_heads=b["heads"],
                  num_key_value_heads=b["kv_heads"], max_position_embeddings=1024,
                  rope_theta=b.get("rope_theta", 10000.0))
    if b["arch"] == "olmo2":
        Olmo2ForCausalLM(Olmo2Config(**common)).save_pretrained(bdir)
    elif b["arch"] == "llama":  # SmolLM2 (OpusLM-Dialogue's backbone) is a Llama
        LlamaForCausalLM(LlamaConfig(head_dim=b["head_dim"], **common)).save_pretrained(bdir)
    else:
        Qwen3ForCausalLM(Qwen3Config(head_dim=b["head_dim"], **common)).save_pretrained(bdir)
    if "xcodec" in spec["audio"]:
        build_xcodec(os.path.join(out, "xcodec"), spec["audio"])
    ios = build_ios(out, spec)
    model, vm = make_model(out, spec, ios)
    with torch.no_grad():
        model.stream_emb.weight.normal_(0, spec.get("stream_emb_std", 0.5))
        # larger random weights than ESPnet's 0.02 init: a tiny greedy model then wanders instead of
        # settling into a loop, where no <eos> row could pick one step without firing at an earlier one
        for name, p in model.named_parameters():
            if p.dim() == 2 and name != "stream_emb.weight":
                p.mul_(spec.get("weight_scale", 1.0))
    keys = set(model.state_dict())
    with torch.no_grad():  # calibrate the weights the checkpoint will hold
        for k, v in model.state_dict().items():
            if v.is_floating_point() and k != "vocab_weight":
                v.copy_(_round(v, spec))
    model.prepare_inference()
    model.eval()
    inf = spec["inference"]
    if "calibrate" in spec:
        pre = preprocessor(ios, vm)
        calibrate(model, vm, prompt_batch(pre, {"text": spec["calibrate"]["text"]})["seqs"], inf, spec)
    sd = {k: v.to(torch.bfloat16) if v.is_floating_point() and k != "vocab_weight" and spec.get("bf16")
          else v for k, v in model.state_dict().items() if k in keys}
    torch.save({"module": sd}, os.path.join(out, "model.pt"))
    a = spec["audio"]
    model_conf = {"attn_implementation": "eager"}
    if spec.get("tie_word_embeddings"):
        model_conf["tie_word_embeddings"] = True
    train = {
        "job_type": "speechlm",
        "multimodal_io": {
            "text": {"tokenizer_name": bdir},
            "discrete_audio": {"codec_choice": a.get("codec_choice", "Xcodec"),
                               "codec_hf_model_tag": os.path.join(out, "xcodec") if "xcodec" in a else None,
                               "codec_max_token_per_frame": a["n_codec"],
                               "ssl_choice": "ESPnet" if a["n_ssl"] else None,
                               "ssl_hf_model_tag": "espnet/xeus" if a["n_ssl"] else None,
                               "delay_interleave": True},
        },
        "vocab_intervals": {k: [list(p) for p in v] for k, v in vm["vocab_intervals"].items()},
        "model": {"model_choice": "parallel", "model_hf_tag": bdir, "model_conf": model_conf},
        "preprocessor": {"audio_input": "discrete_audio", "audio_output": "discrete_audio",
                         "loss_region": "assistant"},
        "data_loading": {"batchfy_method": "bucket"},
        "oracle_audio": a,  # how run mode rebuilds the codec-less audio IO
    }
    with open(os.path.join(out, spec.get("train_name", "train.yaml")), "w") as f:
        yaml.safe_dump(train, f, sort_keys=False)
    with open(os.path.join(out, "inference.yaml"), "w") as f:
        yaml.safe_dump(dict(inf, dtype="float32"), f, sort_keys=False)
    with open(os.path.join(out, "oracle_build.json"), "w") as f:
        json.dump({"calibrated": spec.get("calibrate", {}).get("found")}, f)
    print("built", out, "vocab", vm["vocab_size"], "streams", vm["num_stream"])


def run(out, cases_path, result_path):
    torch.save(run_cases(out, json.load(open(cases_path))), result_path)


def run_cases(out, cases):
    import glob

    train = yaml.safe_load(open(glob.glob(os.path.join(out, "train*.yaml"))[0]))
    inf = yaml.safe_load(open(os.path.join(out, "inference.yaml")))
    spec = {"audio": train["oracle_audio"],
            "tie_word_embeddings": train["model"]["model_conf"].get("tie_word_embeddings", False)}
    ios = build_ios(out, spec)
    model, vm = make_model(out, spec, ios)
    ckpt = torch.load(os.path.join(out, "model.pt"), map_location="cpu", weights_only=True)
    model.load_state_dict(ckpt["module"], strict=True)  # bin/inference.py's load_checkpoint
    model.prepare_inference()
    model = model.to(dtype=torch.float32).eval()
    pre = preprocessor(ios, vm)
    codec = None
    if os.path.isdir(os.path.join(out, "xcodec")):
        from transformers import XcodecModel

        codec = XcodecModel.from_pretrained(os.path.join(out, "xcodec")).eval()
    results = {}
    for case in cases:
        ci = json.loads(json.dumps(inf))
        for m, over in case.get("override", {}).items():
            ci[m].update(over)
        seqs = prompt_batch(pre, case)["seqs"]
        torch.manual_seed(case.get("seed", 42))  # bin/inference.py reseeds per sample
        rec, msgs = run_inference(model, seqs, ci)
        texts = [c[0] for r, m, c in msgs if m == "text"]
        audio = [c[0][0].clone() for r, m, c in msgs if m == "audio"]  # identity codec: [frames, streams]
        # the conditional sequence as fed (teacher forcing): prompt, then per segment <assistant>, modality,
        # its tokens but the last, then the last with streams >= 1 zeroed
        S = vm["num_stream"]
        fed = [seqs[0]]
        enforce = ci.get("enforce_modality", [])
        for n, seg in enumerate(rec.segments):
            tok = torch.zeros(2, S, dtype=torch.long)
            tok[0, 0] = 6
            tok[1, 0] = {"text": 7, "audio": 8}[enforce[n]]
            last = seg[-1:].clone()
            last[:, 1:] = 0
            fed += [tok, seg[:-1], last]
        fed = torch.cat(fed)
        logits, _ = model._step(input_ids=fed[None].clone())
        results[case["name"]] = {"seqs": seqs[0], "segments": rec.segments, "texts": texts, "audio": audio,
                                 "fed": fed, "logits": logits[0].detach(), "cfgs": rec.cfgs}
        if codec is not None:  # what DiscreteAudioIO._codec_decode_batch does with "Xcodec"
            with torch.no_grad():
                wav = codec.decode(audio[0].T[None].clone()).audio_values
            results[case["name"]]["wav"] = wav[0, 0].float()
        print(case["name"], "segments", [tuple(s.shape) for s in rec.segments], "texts", texts,
              "audio", [tuple(a.shape) for a in audio])
    return results


def time_sequential(out, n, steps):
    """ESPnet's own serving loop: one request at a time (bin/inference.py), each `inference` call audio
    only, exactly `steps` interleaved steps (<eos> masked until min_step = max_step). Prints JSON."""
    import glob
    import time

    train = yaml.safe_load(open(glob.glob(os.path.join(out, "train*.yaml"))[0]))
    inf = yaml.safe_load(open(os.path.join(out, "inference.yaml")))
    ios = build_ios(out, {"audio": train["oracle_audio"]})
    model, vm = make_model(out, {}, ios, attn="sdpa")
    model.load_state_dict(torch.load(os.path.join(out, "model.pt"), weights_only=True)["module"], strict=True)
    model.prepare_inference()
    model = model.eval()
    pre = preprocessor(ios, vm)
    results = {}
    for w in (1.0, 3.0):
        ci = dict(inf, enforce_modality=["audio"])
        ci["audio"] = dict(inf["audio"], cfg=w, max_step=steps, min_step=steps, temperature=0.0)
        seqs = prompt_batch(pre, {"text": "w1 w2 w3 w4 w5 w6 w7 w8"})["seqs"]
        model.inference(ci, seqs=seqs.clone())  # warm-up
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            model.inference(ci, seqs=seqs.clone())
        results[str(w)] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                           "requests": n, "steps": n * steps}
    print(json.dumps(results))


def run_all(root, jobs_path, result_path):
    results = {}
    for job in json.load(open(jobs_path)):  # {name, spec, cases}
        out = os.path.join(root, job["name"])
        os.makedirs(out, exist_ok=True)
        spec_path = os.path.join(out, "spec.json")
        json.dump(job["spec"], open(spec_path, "w"))
        build(out, spec_path)
        results[job["name"]] = run_cases(out, job["cases"])
    torch.save(results, result_path)


if __name__ == "__main__":
    torch.set_num_threads(2)
    mode = sys.argv[1]
    if mode == "build":
        build(sys.argv[2], sys.argv[3])
    elif mode == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4])
    elif mode == "all":
        run_all(sys.argv[2], sys.argv[3], sys.argv[4])
    elif mode == "time":
        time_sequential(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown mode {mode}")
