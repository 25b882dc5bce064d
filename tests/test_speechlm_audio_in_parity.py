"""Audio in for ESPnet SpeechLM, against espnet==202611 (the speechlm oracle venv): a tiny Bagpiper-like
Qwen3 8-stream checkpoint built by ESPnet's own classes whose audio IO is `DiscreteAudioIO("Xcodec")` over a
tiny random `XcodecModel` with its real encoder (HuBERT + DAC encoder + RVQ), its weights in model.pt as a
released checkpoint carries them; loaded through our normal loader.

Checked: our X-Codec codes == `XcodecModel.encode` at ESPnet's bandwidth on four clip lengths, two per
padding branch; the prompt rows for an audio_to_text user turn (16 kHz clip; a 22.05 kHz clip resampled
with torchaudio's `resample` as the preprocessor does; the dialogue form with a system text turn) == the
rows `_embed` fills; and greedy text tokens + detokenized text == `ParallelLLM.inference` with a natural
end (`<|eos|>` at the text rules' min_step, calibrated by the builder for the three prompts at once).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from oracle.interpreters import oracle_python, run_oracle
from support.dia_driver import run_alone
from voxcli.models.base import SamplingParams, SynthesisRequest

pytestmark = pytest.mark.oracle

MIN_STEP = 6
SPEC = {
    "seed": 0,
    "text_vocab": 64,
    "weight_scale": 4.0,
    "backbone": {
        "arch": "qwen3",
        "hidden": 64,
        "mlp": 128,
        "layers": 2,
        "heads": 4,
        "kv_heads": 2,
        "head_dim": 16,
        "rope_theta": 50000.0,
    },
    # codebook 16 (4 bits) at 50 frames/s: 8 streams = 1.6 kbps, the closer of the two targets
    "audio": {
        "n_ssl": 0,
        "ssl_k": 0,
        "n_codec": 8,
        "codec_k": 16,
        "xcodec": {"ratios": [2, 4, 5, 8], "decoder_hidden": 32, "latent": 8, "bandwidths": [0.8, 1.6]},
    },
    "inference": {
        "enforce_modality": ["text"],
        "text": {"temperature": 0.0, "topk": 20, "cfg": 1, "max_step": 30, "min_step": MIN_STEP},
    },
    "clips": {
        "c16": {"seed": 1, "samples": 24200, "rate": 16000},
        "c22": {"seed": 2, "samples": 30000, "rate": 22050},
    },
}
CASES = [
    {"name": "a16", "clip": "c16"},
    {"name": "a22", "clip": "c22"},
    {"name": "dialogue", "clip": "c16", "dialogue": True, "system": "w3 w5"},
]
# 320 T: whole frames (the conv arithmetic gives T_s: unpadded); 320 T + r: the padded branch
CODEC_LENGTHS = [24000, 6400, 24200, 9777]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    py = oracle_python(
        "VOX_SPEECHLM_ORACLE_PYTHON", ".oracle-speechlm-venv", "scripts/setup_oracle_speechlm.sh"
    )
    root = tmp_path_factory.mktemp("speechlm_audio_in")
    (root / "job.json").write_text(json.dumps({"spec": SPEC, "cases": CASES, "codec_lengths": CODEC_LENGTHS}))
    run_oracle(
        "run_speechlm_audio_in.py",
        "all",
        str(root / "ckpt"),
        str(root / "job.json"),
        str(root / "out.pt"),
        python=py,
        timeout=1200,
    )
    return root / "ckpt", torch.load(root / "out.pt", weights_only=False)


@pytest.fixture(scope="module")
def program(oracle):
    from voxcli.models import load_model

    return load_model(str(oracle[0]))


def _request(case: dict, clips: dict) -> SynthesisRequest:
    rate = SPEC["clips"][case["clip"]]["rate"]
    return SynthesisRequest(
        text="",
        input_audio=np.asarray(clips[case["clip"]]),
        input_sample_rate=rate,
        instructions=case.get("system"),
        sampling=SamplingParams(greedy=True),
    )


def test_xcodec_codes_equal_the_reference_on_both_padding_branches(program, oracle):
    res = oracle[1]
    assert res["bandwidth"] == 1.6
    assert sorted(r["padded"] for r in res["codec"].values()) == [False, False, True, True]
    enc = program.audio_encoder
    for n, r in res["codec"].items():
        got = enc.encode(r["x"][None, None])[0]
        assert got.shape == r["codes"].shape, n
        assert torch.equal(got, r["codes"]), f"{n} samples ({'padded' if r['padded'] else 'unpadded'})"
        assert r["codes"][0].unique().numel() > 3  # the encoder's output spreads over the codebook


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_prompt_rows_equal_the_reference(program, oracle, case):
    ref = oracle[1]["cases"][case["name"]]["seqs"].numpy()
    tokens, _ = program.prompt_tokens(_request(case, oracle[1]["clips"]))
    assert tokens.shape == ref.shape
    np.testing.assert_array_equal(tokens, ref)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_greedy_text_equals_the_reference(program, oracle, case):
    ref = oracle[1]["cases"][case["name"]]
    (segment,) = ref["segments"]
    assert segment.shape[0] == MIN_STEP + 1 and int(segment[-1, 0]) == 2  # a natural end: <|eos|>
    texts, ids = [], []

    def written(e):
        texts.append(e.text)
        ids.append(list(e.token_ids))

    stop = program.text_written.listen(written)
    try:
        frames = run_alone(program, program.prepare(_request(case, oracle[1]["clips"])), page_size=4)
    finally:
        stop()
    assert frames.shape[0] == 0  # text only: no audio frame
    start = program.cfg.layout.text_start
    assert ids == [[int(t) - start for t in segment[:-1, 0]]]
    assert texts == ref["texts"]
