"""OpusLM's codec: ESPnet's DAC decoder ported to plain torch (models/speechlm/espnet_dac*.py).

Parity (the speechlm oracle venv): ESPnet's own ESPnetGANCodecModel(DAC) with tiny random weights, written
as an espnet_model_zoo pack and decoded by its `decode`; ours reads the same pack: offline and streamed
(chunk splits from one frame at a time to the first chunk being the whole utterance, several requests
interleaved over reused slots) within 1e-4. Two generator shapes: ESPnet's defaults in small (Snake, a
2-layer LSTM, one residual layer) and a variant (ELU, no LSTM, two residual layers with dilation 2, a
plain skip, a final Tanh). Without the oracle: streamed = offline on our own random packs (also causal),
and an OpusLM-like 9-stream checkpoint speaks through the engine with the SSL stream dropped.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from oracle.interpreters import oracle_python, run_oracle
from voxcli.models.base import CodecItem, SamplingParams, SynthesisRequest

SPLITS = ([47], [1] * 47, [10, 25, 12], [3, 4, 40], [6, 1, 1, 39], [2, 2, 2, 2, 39], [5, 42])
SHORT = ([30], [1] * 30, [10, 12, 8], [3, 4, 23], [6, 1, 1, 22], [5, 25])  # 30 frames
BASE = {"hidden_dim": 16, "codebook_dim": 8, "encdec_n_filters": 4, "encdec_ratios": [8, 5, 4, 2],
        "quantizer_n_q": 8, "quantizer_bins": 64}
VARIANT = {**BASE, "encdec_activation": "ELU", "encdec_activation_params": {"alpha": 1.0}, "encdec_lstm": 0,
           "encdec_n_residual_layers": 2, "encdec_true_skip": True, "decoder_final_activation": "Tanh",
           "encdec_ratios": [4, 2], "encdec_kernel_size": 5, "encdec_residual_kernel_size": 3}


def _codes(seed: int, lengths: tuple[int, ...], bins: int = 64) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, bins, size=(n, 8)) for n in lengths]


def _streamed(dec, codes: np.ndarray, splits: list[int], slot: int = 0) -> np.ndarray:
    out, pos = [], 0
    for i, n in enumerate(splits):
        item = CodecItem(slot=slot, codes=codes[pos:pos + n], first=i == 0, last=i == len(splits) - 1)
        out.append(dec.decode([item])[0])
        pos += n
    return np.concatenate(out)


def _interleaved(dec, utterances: list[np.ndarray], chunk: int) -> list[np.ndarray]:
    """Several requests at once, one chunk of each per pass, slots handed on as requests end."""
    pos = [0] * len(utterances)
    out: list[list[np.ndarray]] = [[] for _ in utterances]
    slot_of = {i: i % dec.num_slots for i in range(min(len(utterances), dec.num_slots))}
    waiting = list(range(len(slot_of), len(utterances)))
    while slot_of:
        items, owners = [], []
        for u, s in slot_of.items():
            c = utterances[u]
            n = min(chunk + u % 3, c.shape[0] - pos[u])
            items.append(CodecItem(slot=s, codes=c[pos[u]:pos[u] + n], first=pos[u] == 0,
                                   last=pos[u] + n == c.shape[0]))
            owners.append(u)
            pos[u] += n
        for u, pcm, it in zip(owners, dec.decode(items), items, strict=True):
            out[u].append(pcm)
            if it.last:
                dec.release_slot(it.slot)
                del slot_of[u]
                if waiting:
                    slot_of[waiting.pop(0)] = it.slot
    return [np.concatenate(o) for o in out]


@pytest.mark.oracle
def test_offline_and_streamed_equal_espnet_dac(tmp_path):
    from voxcli.models.speechlm.espnet_dac_stream import EspnetDacDecoder

    py = oracle_python("VOX_SPEECHLM_ORACLE_PYTHON", ".oracle-speechlm-venv",
                       "scripts/setup_oracle_speechlm.sh")
    lengths = (47, 3, 1, 2, 20, 33)
    specs = [{"seed": i, "sampling_rate": 16000, "generator_params": gp,
              "codes": [c.tolist() for c in _codes(i, lengths)]} for i, gp in enumerate((BASE, VARIANT))]
    (tmp_path / "specs.json").write_text(json.dumps(specs))
    run_oracle("run_espnet_dac.py", str(tmp_path / "ck"), str(tmp_path / "specs.json"),
               str(tmp_path / "r.pt"), python=py, timeout=600)
    results = torch.load(tmp_path / "r.pt")
    for i, (spec, res) in enumerate(zip(specs, results, strict=True)):
        dec = EspnetDacDecoder.load(tmp_path / "ck" / str(i), n_streams=8)
        assert res["meta"]["frame_shift"] == dec.hop_length and res["meta"]["fs"] == dec.sample_rate
        refs = [w.numpy() for w in res["wavs"]]
        codes = [np.array(c) for c in spec["codes"]]
        assert np.abs(refs[0]).max() > 1e-3  # a signal, not silence
        for c, ref in zip(codes, refs, strict=True):
            off = dec.decode_offline(c)
            assert off.shape == ref.shape and np.abs(off - ref).max() <= 1e-4, (i, c.shape)
        dec.init_slots(3)
        for splits in SPLITS:
            got = _streamed(dec, codes[0], splits, slot=1)
            assert got.shape == refs[0].shape and np.abs(got - refs[0]).max() <= 1e-4, (i, splits)
        for got, ref in zip(_interleaved(dec, codes, chunk=2), refs, strict=True):  # 6 requests, 3 slots
            assert got.shape == ref.shape and np.abs(got - ref).max() <= 1e-4, i


@pytest.mark.parametrize("params", [BASE, {**BASE, "encdec_causal": True, "encdec_pad_mode": "constant"},
                                    {**VARIANT, "encdec_lstm": 1, "encdec_dilation_base": 3}],
                         ids=["default", "causal", "dilated"])
def test_streamed_equals_offline_on_our_own_pack(tmp_path, params):
    """In float64 the streamed waveform IS the offline one (the stages are exact, not approximations);
    float32 differs by rounding only (the LSTM stepped vs one pass)."""
    from voxcli.models.speechlm.espnet_dac_stream import EspnetDacDecoder
    from voxcli.models.speechlm.tiny_opuslm import write_dac_pack

    write_dac_pack(tmp_path, params, torch.Generator().manual_seed(3))
    codes = _codes(5, (30, 4, 9))
    for dtype, tol, splits_of in ((torch.float64, 1e-12, SHORT), (torch.float32, 2e-5, SHORT[1:3])):
        dec = EspnetDacDecoder.load(tmp_path, n_streams=8, dtype=dtype)
        dec.init_slots(2)
        offline = [dec.decode_offline(c) for c in codes]
        scale = np.abs(offline[0]).max()
        assert 1e-3 < scale < 1e3  # a signal at a sane scale
        for splits in splits_of:
            got = _streamed(dec, codes[0], splits)
            assert np.abs(got - offline[0]).max() <= tol * scale, (dtype, splits)
            first = dec.decode([CodecItem(slot=1, codes=codes[0][:splits[0]], first=True,
                                          last=len(splits) == 1)])
            held = 0 if len(splits) == 1 else dec.holdback_frames
            assert first[0].size == max(0, splits[0] - held) * dec.hop_length  # exactly the look-ahead held
            dec.release_slot(1)
        for got, off in zip(_interleaved(dec, codes, chunk=1), offline, strict=True):
            assert np.abs(got - off).max() <= tol * scale, dtype
    if params.get("encdec_causal"):
        assert dec.holdback_frames == 0  # a causal decoder holds nothing back


def test_holdback_of_opuslm_shaped_dac_is_five_frames(tmp_path):
    from voxcli.models.speechlm.espnet_dac_stream import EspnetDacDecoder
    from voxcli.models.speechlm.tiny_opuslm import DAC_REAL, write_dac_pack

    write_dac_pack(tmp_path, {**DAC_REAL, "encdec_n_filters": 2, "hidden_dim": 8},
                   torch.Generator().manual_seed(0))  # the real kernels and ratios, narrow channels
    dec = EspnetDacDecoder.load(tmp_path, n_streams=8)
    assert (dec.pad_right, dec.ctx_right, dec.holdback_frames, dec.hop_length) == (3, 2, 5, 320)


def test_opuslm_like_checkpoint_speaks_through_the_engine(tmp_path):
    """9 streams (1 SSL + 8 DAC): the engine's waveform is the DAC's offline decode of the program's codes
    (the SSL stream dropped), streamed through codec slots."""
    from voxcli.models import load_model
    from voxcli.models.speechlm.tiny_opuslm import build_opuslm

    from voxcli.config import ChunkSchedule, EngineConfig
    from voxcli.engine.engine import Engine

    ckpt = build_opuslm(tmp_path / "opuslm")
    program = load_model(str(ckpt))
    assert program.spec.codebooks == 8 and program.cfg.layout.num_stream == 9
    seen: list[CodecItem] = []
    decode = program.codec_model.decode

    def spy(items):
        seen.extend(items)
        return decode(items)

    program.codec_model.decode = spy
    cfg = EngineConfig(executor="cpu", policy="full", chunk=ChunkSchedule(first=10, ramp=(6,), steady=8),
                       kv_pages=200, kv_page_size=8, codec_slots=2, max_running=4, threads=1)
    eng = Engine(program, cfg)
    req = SynthesisRequest(text="w1 w2 w3", sampling=SamplingParams(greedy=True), max_frames=30)
    pcm = eng.submit(req).wait(timeout=300)
    eng.close()
    codes = np.concatenate([it.codes for it in seen])
    assert codes.shape == (30, 8) and pcm.shape == (30 * 320,)
    offline = program.codec_model.decode_offline(codes)
    scale = np.abs(offline).max()
    assert scale > 1e-3 and np.abs(pcm - offline).max() <= 1e-5 * scale  # float32 rounding only
