"""Higgs Audio host logic without the oracle: the delay tracker (fill, staggered drain, aligned frames,
max_frames), its setup from the last prompt ids, the prompt text, the voice-clone rows, config checks."""

from __future__ import annotations

import numpy as np
import pytest
from voxcli.models.base import CheckpointError
from voxcli.models.higgs_audio.config import parse_v2
from voxcli.models.higgs_audio.delay import DelayTracker, init_counters
from voxcli.models.higgs_audio.prompt import delayed_clip, render

BOS, EOS, AUDIO, AUDIO_BOS, DELAY, TEXT_EOS = 1024, 1025, 90, 91, 92, 93


def _tracker(max_frames: int = 1000) -> DelayTracker:
    return DelayTracker([5, 6, AUDIO_BOS], 8, BOS, EOS, AUDIO, AUDIO_BOS, DELAY, TEXT_EOS, max_frames)


def _run(tr: DelayTracker, eos_at: int | None, eos_book: int = 0, steps: int = 200):
    """Sample 'code = 10 * step + codebook' except where forced; a natural EOS on `eos_book` at `eos_at`."""
    frames, forced = [], []
    for step in range(steps):
        fb, fe = tr.forced()
        forced.append((fb.copy(), fe.copy()))
        tok = np.array([(10 * step + k) % 1000 for k in range(8)])
        if step == eos_at:
            tok[eos_book] = EOS
        tok = np.where(fb, BOS, np.where(fe, EOS, tok))
        frames += tr.record(tok)
        if tr.done:
            return np.stack(frames), forced, step
    raise AssertionError("never done")


def test_fill_then_one_frame_per_step_then_the_staggered_drain():
    frames, forced, last = _run(_tracker(), eos_at=30)
    assert forced[0][0].all()  # step 0: every codebook forced to stream BOS
    for k in range(8):  # codebook k is free from step k + 1
        assert forced[k + 1][0][: k + 1].sum() == 0 and forced[k + 1][0][k + 1 :].all()
    for k in range(8):  # EOS at step 30 closes codebook k at step 31 + k
        assert forced[31 + k][1][: k + 1].all() and not forced[31 + k][1][k + 1 :].any()
    assert last == 38  # the all-EOS frame at 30 + 8 ends the request
    assert frames.shape == (30, 8)
    # aligned frame j = codebook k's token at step 1 + j + k (the EOS itself is clipped to 1023)
    j = 5
    assert [frames[j, k] for k in range(8)] == [(10 * (1 + j + k) + k) % 1000 for k in range(8)]
    assert frames[29, 0] == 1023 and frames.max() <= 1023


def test_any_codebook_starts_the_drain_and_max_frames_cuts():
    frames, _, last = _run(_tracker(), eos_at=20, eos_book=5)
    assert last == 28 and frames.shape == (20, 8)
    frames, _, last = _run(_tracker(max_frames=7), eos_at=None)
    assert frames.shape == (7, 8) and last == 7 + 7  # max_frames + C steps, as generate(max_new_tokens=15)


def test_counters_read_the_last_prompt_ids():
    bos, eos = init_counters([1, 2, AUDIO_BOS], 8, AUDIO_BOS, DELAY)
    assert bos.tolist() == list(range(8)) and eos.tolist() == list(range(1, 9))
    bos, _ = init_counters([1] * 20, 8, AUDIO_BOS, DELAY)
    assert bos.tolist() == [0] * 8  # no audio BOS among them: BOS forced on the first step only
    _, eos = init_counters([1] * 10 + [DELAY, 2, 3], 8, AUDIO_BOS, DELAY)
    assert eos.tolist() == [k - 3 for k in range(1, 9)]  # a delay token 3 from the end: draining


def test_prompt_text_and_clone_rows():
    text = render("  Hi there. ", bos="<B>")
    assert text == (
        "<B><|start_header_id|>system<|end_header_id|>\n\nGenerate audio following instruction."
        "\n\n<|scene_desc_start|>\nAudio is recorded from a quiet room.\n<|scene_desc_end|><|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n<|audio_out_bos|>"
    )
    codes = np.arange(24).reshape(3, 8)
    rows = delayed_clip(codes, BOS, EOS)
    assert rows.shape == (3 + 2 + 7, 8)
    assert (rows[0] == BOS).all() and (rows[-1] == EOS).all()
    assert rows[1, 0] == 0 and rows[1 + 7, 7] == codes[0, 7] and rows[1, 7] == BOS


def test_config_checks_name_the_field():
    with pytest.raises(CheckpointError, match="codebook_size 1024"):
        parse_v2({"codebook_size": 1024}, "config.json")
    with pytest.raises(CheckpointError, match="num_attention_heads 24 must be a multiple"):
        parse_v2({"num_key_value_heads": 7}, "config.json")
    with pytest.raises(CheckpointError, match="rope type 'yarn'"):
        parse_v2({"rope_parameters": {"rope_type": "yarn"}}, "config.json")
    cfg = parse_v2({}, "config.json")  # the released defaults
    assert (cfg.num_codebooks, cfg.codebook_size, cfg.delay) == (8, 1026, tuple(range(1, 9)))
    assert cfg.rope.rope_type == "llama3" and cfg.rope.factor == 32.0
