"""A non-causal codec holds the last h frames of each chunk's audio back until the next chunk
(ModelSpec.codec_lookahead_frames; Dia's DAC: 9.29 frames): the engine's playback deadlines and its
per-chunk audio accounting must count it, or a 12-frame first chunk is taken for 139 ms of audio when it
plays 31 ms, and chunk 1 is scheduled ~108 ms too late (request.py)."""

from __future__ import annotations

import numpy as np
import pytest
from voxcli.models.base import Prompt, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.request import Chunk, Request


def _request(hold: float) -> Request:
    r = Request(1, Prompt(length=4, data=None, max_frames=100), arrival=0.0,
                schedule=ChunkSchedule(first=12, ramp=(4,), steady=6), frame_s=0.01, ttfa_target=0.2,
                hold_frames=hold)
    r.t_first_audio = 0.15
    return r


def test_deadlines_start_the_hold_back_early():
    held, causal = _request(9.25), _request(0.0)
    assert causal.deadline_of(12) == pytest.approx(0.15 + 0.12)
    assert held.deadline_of(12) == pytest.approx(0.15 + 0.0275)  # 12 - 9.25 frames played
    assert held.deadline_of(16) == pytest.approx(0.15 + 0.0675)
    # the LM's slack key reads the same deadline (inlined there)
    held.next_start = held.gen_start = 12
    held.gen_end = 16
    held.gen_chunk = 1
    held.frames = [0] * 13
    assert held.slack_key(0.0, 0.0) == pytest.approx(held.deadline_of(12))


def test_released_audio_adds_up_to_every_frame():
    r = _request(9.25)
    spans = [(0, 12, False), (12, 16, False), (16, 22, True)]
    got = [r.released_audio_s(Chunk(r, i, a, b, last, 0.0, 0.0)) for i, (a, b, last) in enumerate(spans)]
    assert got == pytest.approx([0.0275, 0.04, 0.06 + 0.0925])
    assert sum(got) == pytest.approx(0.22)


def test_dia_chunks_account_the_audio_the_dac_really_releases(tmp_path):
    from voxcli.models import load_model
    from voxcli.models.dia.tiny import build_tiny

    from voxcli.engine.engine import Engine

    program = load_model(str(build_tiny(tmp_path / "ckpt")))
    codec = program.codec_model
    h = program.spec.codec_lookahead_frames
    # the spec's figure (from codec/config.json, no weights) is what the built decoder layers hold back
    assert h == pytest.approx(codec.lookahead_samples / codec.hop_length) and h > 9
    cfg = EngineConfig(executor="cpu", policy="full", chunk=ChunkSchedule(first=12, ramp=(4,), steady=8),
                       kv_pages=200, kv_page_size=8, codec_slots=2, max_running=2, threads=1)
    eng = Engine(program, cfg)
    try:
        stream = eng.submit(SynthesisRequest(text="[S1] Hello there.", cfg_scale=3.0, max_frames=30,
                                             sampling=SamplingParams(greedy=True)))
        pieces = list(stream)
    finally:
        eng.close()
    assert stream.status == "done" and len(pieces) >= 3
    sr, fs = program.spec.sample_rate, program.spec.frame_seconds
    records = sorted(stream.timeline.chunks, key=lambda c: c.index)
    offset = 0.0
    for piece, rec in zip(pieces, records, strict=True):
        assert rec.audio_s == pytest.approx(len(piece.pcm) / sr, abs=1.5 / sr), rec.index
        assert piece.audio_offset_s == pytest.approx(offset, abs=1.5 / sr), rec.index
        offset += len(piece.pcm) / sr
        if rec.index:  # due when the audio released before it has played
            assert rec.deadline == pytest.approx(stream.timeline.first_audio + (rec.start_frame - h) * fs)
    assert offset == pytest.approx(sum(r.frames for r in records) * fs, abs=1.5 / sr)
    assert np.isfinite(np.concatenate([p.pcm for p in pieces])).all()


def test_higgs_spec_holds_back_what_its_codec_layers_do(tmp_path):
    from voxcli.models import load_model
    from voxcli.models.higgs_audio.tiny import build_tiny

    program = load_model(str(build_tiny(tmp_path / "ckpt")))
    codec = program.codec_model
    assert program.spec.codec_lookahead_frames == pytest.approx(codec.lookahead_samples / codec.hop_length)
    assert program.spec.codec_lookahead_frames > 0
