"""Audio in on the engine, our own tiny checkpoint (models/speechlm/tiny.py: X-Codec with its encoder).

A greedy transcription (user audio turn, text-only answer) alone vs the same request among 7 others on
the sim executor's virtual clock (TTS rows in their text and audio phases, CFG pairs and single rows,
other audio-in rows, staggered arrivals): the same text token for token. Also: the request emits no
audio chunk and its timeline has TTFT and tokens/s; the encode runs in the prefill (the LM lane); the
text streams as deltas that add up to the text; a clip it cannot take is refused in one sentence.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from voxcli.models.base import InputError, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

ARRIVALS = (0.0, 0.0, 0.05, 0.15, 0.30, 0.35, 0.40, 0.45)


def _clip(seconds: float, seed: int, rate: int = 16000) -> np.ndarray:
    g = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * (200 + 50 * seed) * t) + 0.05 * g.standard_normal(t.size)).astype(
        np.float32
    )


def _heard(seconds: float, seed: int, greedy: bool = True, rate: int = 16000) -> SynthesisRequest:
    return SynthesisRequest(
        text="",
        input_audio=_clip(seconds, seed, rate),
        input_sample_rate=rate,
        sampling=SamplingParams(greedy=greedy),
        seed=seed,
        options={"max_segments": 1},
    )


TARGET_SECONDS, TARGET_SEED = 1.2, 4  # its greedy text ends naturally (<|eos|>) after 10 tokens


def _others() -> list[SynthesisRequest]:
    tts = [
        SynthesisRequest(
            text=t,
            cfg_scale=(3.0, 1.0, 2.0)[i % 3],
            seed=i,
            max_frames=6 + 3 * i,
            sampling=SamplingParams(greedy=i % 2 == 0),
        )
        for i, t in enumerate(["w5", "w6 w7 w8 w9 w10 w11", "w12 w13", "w14 w15 w16"])
    ]
    heard = [_heard(0.7, 3), _heard(2.1, 4, greedy=False), _heard(1.0, 5, rate=22050)]
    return [tts[0], heard[0], tts[1], tts[2], heard[1], tts[3], heard[2]]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.speechlm.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("speechlm_audio_in") / "ckpt")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def _engine(ckpt, batches: list | None = None, kv_pages: int = 400) -> Engine:
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    if batches is not None:  # every prefill and decode batch: (request id, width, modality) per row
        for stage in ("prefill", "decode"):
            inner = getattr(program, stage)

            def run(rows, inner=inner, stage=stage):
                out = inner(rows)
                batches.append(
                    (stage, [(r.request_id, r.prompt.width, r.state.phase.modality) for r in rows])
                )
                return out

            setattr(program, stage, run)
    cfg = EngineConfig(
        executor="sim",
        policy="full",
        chunk=ChunkSchedule(first=10, ramp=(6,), steady=8),
        kv_pages=kv_pages,
        kv_page_size=8,
        codec_slots=3,
        max_running=8,
        background_min_batch=2,
        threads=1,
    )
    return Engine(program, cfg)


def _transcribe(eng: Engine, req: SynthesisRequest, at: float = 0.0):
    from voxcli.transcribe import tap_of

    heard = tap_of(eng).follow(req)
    return heard, eng.submit(req, at=at)


def test_alone_equals_among_seven_others(ckpt):
    eng = _engine(ckpt)
    heard, stream = _transcribe(eng, _heard(TARGET_SECONDS, TARGET_SEED))
    eng.run()
    audio = stream.wait(timeout=0)
    alone, tl = list(heard.token_ids), stream.timeline
    eng.close()
    assert stream.status == "done" and audio.size == 0 and tl.first_audio is None  # no audio chunk
    assert len(alone) == 10 and heard.text and "".join(heard.deltas) == heard.text
    assert tl.text_tokens == 10 and tl.ttft is not None and tl.ttft > 0 and tl.tokens_per_s > 0

    batches: list = []
    eng = _engine(ckpt, batches, kv_pages=200)  # pages reused
    others = _others()
    streams = [eng.submit(r, at=ARRIVALS[i]) for i, r in enumerate(others[:4])]
    heard2, target = _transcribe(eng, _heard(TARGET_SECONDS, TARGET_SEED), at=ARRIVALS[4])
    streams += [eng.submit(r, at=ARRIVALS[5 + i]) for i, r in enumerate(others[4:])]
    eng.run()
    sched = eng.scheduler
    eng.close()
    assert target.status == "done" and all(s.status == "done" for s in streams), [s.reason for s in streams]
    assert heard2.token_ids == alone and heard2.text == heard.text
    assert sched.kv.free == 200
    mine = [
        rows
        for stage, rows in batches
        if stage == "decode" and len(rows) > 1 and any(rid == target.request_id for rid, _, _ in rows)
    ]
    assert any({w for _, w, _ in b} == {1, 2} for b in mine)  # CFG pairs beside it
    assert any("audio" in {m for _, _, m in b} for b in mine)  # TTS rows speaking beside its text


def test_the_encode_runs_in_the_prefill(ckpt):
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    prompt = program.prepare(_heard(1.0, 2))
    assert prompt.data.audio and program._audio_encoder is None  # host work only: resampled, not encoded
    S = program.cfg.layout.num_stream
    assert prompt.length == 50 + S + 3 + 1  # T + S + 3 rows, then <assistant>
    assert not prompt.data.tokens[3 : 3 + 50 + S - 1].any()  # placeholders until the prefill fills them
    filled, _ = program.prompt_tokens(_heard(1.0, 2))
    assert filled[3 : 3 + 50 + S - 1].min() >= program.cfg.layout.intervals["discrete_audio"][0][0]


def test_clips_it_cannot_take_are_refused_in_one_sentence(ckpt):
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    base = dict(text="", options={"max_segments": 1})
    for req, msg in (
        (SynthesisRequest(input_audio=np.zeros(0, np.float32), input_sample_rate=16000, **base), "empty"),
        (
            SynthesisRequest(input_audio=np.full(16000, np.nan, np.float32), input_sample_rate=16000, **base),
            "NaN",
        ),
        (
            SynthesisRequest(input_audio=np.zeros(100, np.float32), input_sample_rate=16000, **base),
            "at least one 20 ms frame",
        ),
        (
            SynthesisRequest(input_audio=np.zeros(16000, np.float32), input_sample_rate=7, **base),
            "sample rate",
        ),
        (
            SynthesisRequest(
                text="w1",
                input_audio=np.zeros(16000, np.float32),
                input_sample_rate=16000,
                options={"max_segments": 1},
            ),
            "either text or input audio",
        ),
    ):
        with pytest.raises(InputError, match=msg):
            program.prepare(req)


def test_a_dialogue_turn_answers_in_text_then_speech(ckpt):
    """User audio in, one request through both phases: the text segment, then audio with CFG (a width-2
    row, as the TTS path runs it); its text is the transcription's (the text is decoded first, greedy)."""
    eng = _engine(ckpt)
    turn = _heard(TARGET_SECONDS, TARGET_SEED)
    turn.options, turn.cfg_scale, turn.max_frames = {}, 3.0, 12
    assert eng.program.prepare(turn).width == 2
    heard, stream = _transcribe(eng, turn)
    text_only, s2 = _transcribe(eng, _heard(TARGET_SECONDS, TARGET_SEED), at=0.0)
    eng.run()
    audio = stream.wait(timeout=0)
    tl = stream.timeline
    eng.close()
    assert stream.status == "done" and s2.status == "done"
    assert audio.shape[0] == 12 * 320 and np.abs(audio).max() > 0  # it speaks after the text
    assert heard.token_ids == text_only.token_ids and len(heard.token_ids) == 10
    assert tl.first_token is not None and tl.first_audio is not None and tl.first_token < tl.first_audio


def test_an_opuslm_checkpoint_refuses_audio_input_in_one_sentence(tmp_path):
    """OpusLM's input audio needs its SSL stream (XEUS + k-means), which no PyPI package provides."""
    from voxcli.models import load_model
    from voxcli.models.speechlm.tiny_opuslm import build_opuslm

    program = load_model(str(build_opuslm(tmp_path / "opuslm", size="tiny", seed=0)))
    assert "SSL stream (XEUS + k-means)" in program.hears()
    with pytest.raises(InputError, match="no PyPI package provides"):
        program.prepare(_heard(1.0, 1))
