"""ESPnet SpeechLM parity (espnet==202611 + transformers 5.14.1, the speechlm oracle venv): tiny random
checkpoints built by ESPnet's own classes (a Qwen3 8-stream Bagpiper-like with a tiny X-Codec, an OLMo-2
9-stream OpusLM-like, 1 SSL + 8 codec streams, and a Llama (SmolLM2, OpusLM-Dialogue) 9-stream one),
loaded through our normal loader (`load_model(folder)`).

Checked against `ParallelLLM.inference` (enforce_modality text then audio): the prompt as the
preprocessor lays it out, the greedy text phase (tokens and detokenized text) and the de-interleaved
audio codes, identical, at CFG 1 and 3, with natural ends (<eot> ends the text, <eos> the audio after
>= 40 frames; the builder calibrates those rows at each segment's min_step, see run_speechlm.py); a
system + user dialogue prompt; seeded sampling (temperature / top-k per modality) reproducing the
reference's draws; teacher-forced logits of the whole fed sequence within 1e-4; the waveform against
`XcodecModel.decode`, offline and streamed through the codec slots, within 1e-4.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from oracle.interpreters import oracle_python, run_oracle
from support.dia_driver import run_alone
from voxcli.models.base import SamplingParams, SynthesisRequest

pytestmark = pytest.mark.oracle

TEXT = "w1 w2 w3 w4 w5"
INFERENCE = {"enforce_modality": ["text", "audio"],
             "text": {"temperature": 0.0, "topk": 20, "cfg": 1, "max_step": 30, "min_step": 6},
             "audio": {"temperature": 0.0, "topk": 20, "cfg": 3, "max_step": 100, "min_step": 50}}
AUDIO_MIN = INFERENCE["audio"]["min_step"]
SPECS = {
    "qwen3": {"seed": 0, "text_vocab": 64, "weight_scale": 4.0, "bf16": True,
              "backbone": {"arch": "qwen3", "hidden": 64, "mlp": 128, "layers": 2, "heads": 4, "kv_heads": 2,
                           "head_dim": 16, "rope_theta": 50000.0},
              "audio": {"n_ssl": 0, "ssl_k": 0, "n_codec": 8, "codec_k": 16,
                        # X-Codec's real upsampling is 8, 5, 4, 2 (hop 320): the odd stride is what matters
                        "xcodec": {"ratios": [2, 4, 5, 8], "decoder_hidden": 32, "latent": 8,
                                   "bandwidths": [1.6]}},
              "train_name": "train_bagpiper_tiny.yaml"},
    "olmo2": {"seed": 1, "text_vocab": 64, "weight_scale": 4.0, "bf16": True,
              "backbone": {"arch": "olmo2", "hidden": 64, "mlp": 128, "layers": 2, "heads": 4, "kv_heads": 2,
                           "rope_theta": 50000.0},
              "audio": {"n_ssl": 1, "ssl_k": 10, "n_codec": 8, "codec_k": 16, "codec_choice": "ESPnet"}},
    # OpusLM-Dialogue's backbone family (SmolLM2 is a Llama): no q/k norm
    "llama": {"seed": 2, "text_vocab": 64, "weight_scale": 4.0, "bf16": True,
              "backbone": {"arch": "llama", "hidden": 64, "mlp": 128, "layers": 2, "heads": 4, "kv_heads": 2,
                           "head_dim": 16, "rope_theta": 50000.0},
              "audio": {"n_ssl": 1, "ssl_k": 10, "n_codec": 8, "codec_k": 16, "codec_choice": "ESPnet"}},
}
STREAMS = {"qwen3": 8, "olmo2": 9, "llama": 9}
CASES = [
    {"name": "c1", "text": TEXT, "override": {"audio": {"cfg": 1}}},
    {"name": "c3", "text": TEXT, "override": {"audio": {"cfg": 3}}},
    {"name": "dialogue", "text": "w9 w8 w7", "instructions": "w3 w3", "override": {"audio": {"cfg": 3}}},
    # sampled: the reference reseeds torch per sample (bin/inference.py) and draws one multinomial per
    # step over the top-k of every stream; our row's generator, seeded alike, makes the same calls. The
    # audio stops at max_step = min_step (a sampled <eot> there would start a third segment whose
    # detected modality may have no IO, which the reference does not survive)
    {"name": "sampled", "text": TEXT, "seed": 42,
     "override": {"text": {"temperature": 0.6, "topk": 5},
                  "audio": {"cfg": 3, "temperature": 0.8, "topk": 4, "max_step": AUDIO_MIN}}},
]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    py = oracle_python("VOX_SPEECHLM_ORACLE_PYTHON", ".oracle-speechlm-venv",
                       "scripts/setup_oracle_speechlm.sh")
    root = tmp_path_factory.mktemp("speechlm_oracle")
    jobs = []
    for name, spec in SPECS.items():
        spec = copy.deepcopy(spec)
        spec["inference"] = INFERENCE
        spec["calibrate"] = {"text": TEXT, "audio_cfgs": ["1", "3"]}
        jobs.append({"name": name, "spec": spec, "cases": CASES})
    (root / "jobs.json").write_text(json.dumps(jobs))
    run_oracle("run_speechlm.py", "all", str(root), str(root / "jobs.json"), str(root / "out.pt"), python=py,
               timeout=1200)
    import torch

    return root, torch.load(root / "out.pt", weights_only=False)


@pytest.fixture(scope="module", params=list(SPECS))
def model(request, oracle):
    from voxcli.models import load_model

    name = request.param
    return name, load_model(str(oracle[0] / name)), oracle[1][name]


def _request(case: dict, w: float) -> SynthesisRequest:
    return SynthesisRequest(text=case["text"], instructions=case.get("instructions"), cfg_scale=w,
                            sampling=SamplingParams(greedy=True))


def _generate(program, req: SynthesisRequest, page_size: int = 4) -> tuple[np.ndarray, list[str]]:
    texts: list[str] = []
    stop = program.text_written.listen(lambda e: texts.append(e.text))
    try:
        codes = run_alone(program, program.prepare(req), page_size=page_size)
    finally:
        stop()
    return codes, texts


def test_loader_reads_the_espnet_layout(model):
    name, program, _ = model
    lay = program.cfg.layout
    assert lay.num_stream == STREAMS[name] and lay.codec_streams == 8
    assert lay.ssl_streams == (0 if name == "qwen3" else 1)
    assert program.cfg.backbone.arch == name and program.cfg.backbone.block.rope_theta == 50000.0
    assert program.spec.codebooks == 8


GREEDY = [c for c in CASES if "seed" not in c]


@pytest.mark.parametrize("case", GREEDY, ids=[c["name"] for c in GREEDY])
def test_greedy_text_and_codes_identical_to_espnet_inference(model, case):
    name, program, ref = model
    r = ref[case["name"]]
    w = float(case["override"]["audio"]["cfg"])
    prompt = program.prepare(_request(case, w))
    assert np.array_equal(prompt.data.tokens, r["seqs"].numpy())  # the preprocessor's layout
    assert prompt.width == (2 if w > 1 else 1)
    codes, texts = _generate(program, _request(case, w))
    assert texts == r["texts"] and len(texts) == 1 and texts[0]
    want = r["audio"][0].numpy()
    assert want.shape[1] == 8  # the SSL stream is dropped at decode, as the reference does
    assert codes.shape == want.shape
    bad = np.argwhere(codes != want)
    assert bad.size == 0, f"first mismatch at frame/stream {bad[0].tolist()}"


def test_natural_ends_and_frame_count(model):
    name, _, ref = model
    N = STREAMS[name]
    for case in ("c1", "c3"):
        segs = ref[case]["segments"]
        assert [int(s[-1, 0]) for s in segs] == [3, 2]  # <eot> ends the text, <eos> the audio
        assert segs[1].shape[0] == AUDIO_MIN + 1  # stopped by itself (max_step is 100)
        frames = ref[case]["audio"][0].shape[0]
        assert frames == AUDIO_MIN - N + 1 >= 40  # no drain: T - N + 1 de-interleaved frames


def test_guidance_changes_the_audio(model):
    _, _, ref = model
    assert not np.array_equal(ref["c1"]["audio"][0].numpy(), ref["c3"]["audio"][0].numpy())
    assert ref["c1"]["texts"] == ref["c3"]["texts"]  # text cfg is 1: guidance touches the audio only


def test_sampled_decoding_reproduces_the_reference_draws(model):
    name, program, ref = model
    r = ref["sampled"]
    req = SynthesisRequest(text=TEXT, cfg_scale=3.0, seed=42, max_frames=AUDIO_MIN - STREAMS[name] + 1,
                           sampling=SamplingParams(temperature=0.8, top_k=4),
                           options={"text_temperature": 0.6, "text_top_k": 5})
    codes, texts = _generate(program, req)
    assert texts == r["texts"]
    want = r["audio"][0].numpy()
    assert codes.shape == want.shape and np.array_equal(codes, want)
    assert not np.array_equal(want, ref["c3"]["audio"][0].numpy())  # it did sample


@pytest.mark.parametrize("case", ["c1", "c3"])
def test_waveform_vs_xcodec_decode_offline_and_streamed(oracle, case):
    from voxcli.models import load_model
    from voxcli.models.base import CodecItem

    program = load_model(str(oracle[0] / "qwen3"))
    r = oracle[1]["qwen3"][case]
    codes, want = r["audio"][0].numpy(), r["wav"].numpy()
    assert np.abs(want).max() > 0.05  # loud enough for the tolerance to mean something
    codec = program.codec_model
    offline = codec.decode_offline(codes)
    assert offline.shape == want.shape == (codes.shape[0] * 320,)
    assert np.abs(offline - want).max() <= 1e-4
    program.init_codec_slots(2)
    parts, start = [], 0
    for i, n in enumerate((10, 25, 1)):  # the default schedule's first chunks, then the rest
        end = min(start + n, len(codes)) if i < 2 else len(codes)
        parts.append(program.codec([CodecItem(slot=1, codes=codes[start:end], first=i == 0,
                                              last=end == len(codes))])[0])
        start = end
    streamed = np.concatenate(parts)
    assert streamed.shape == want.shape and np.abs(streamed - want).max() <= 1e-4
    assert parts[0].shape[0] == max(0, 10 * 320 - codec.lookahead_samples)  # the held-back look-ahead


@pytest.mark.parametrize("case", ["c3", "dialogue"])
def test_teacher_forced_logits_within_1e_4(model, case):
    _, program, ref = model
    r = ref[case]
    got = program.score(r["fed"].numpy()).cpu()
    want = r["logits"].float()
    assert got.shape == want.shape
    assert float((got - want).abs().max()) <= 1e-4
