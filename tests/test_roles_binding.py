"""Per-request codec slot state across the LM -> codec hop (no Ray): what a program binds to a request's codec
slot at prefill (Qwen3-TTS voice-clone reference codes, CosyVoice 3's voice and codec mode) is made as plain
data on the LM side (`codec_binding`), travels with chunk 0 and is bound by the codec engine through the same
`bind_codec_slot`, so split audio equals the both engine's; state that cannot travel is refused."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest
from support.roles_harness import sim_role_engine, split_submit, wait_until
from voxcli.models.base import InputError, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.roles import CodecEngine, CodeChunk, LMEngine
from voxcli.engine.stream import RequestFailed

CFG = EngineConfig(executor="cpu", policy="full", chunk=ChunkSchedule(first=3, ramp=(5,), steady=8),
                   kv_pages=64, kv_page_size=16, codec_slots=4, max_running=4, background_min_batch=2,
                   threads=1)


def _both_and_split(programs, reqs, cfg=CFG):
    """Each request's audio from the both engine, then split (LM engine -> codec engine), and the chunks
    the LM sent."""
    both_p, lm_p, codec_p = programs
    with Engine(both_p, cfg) as both:
        ref = [s.wait(120) for s in [both.submit(r) for r in reqs]]
    lm, codec = LMEngine(lm_p, cfg), CodecEngine(codec_p, cfg)
    try:
        runs = [split_submit(lm, codec, r, f"b{i}") for i, r in enumerate(reqs)]
        got = [out.wait(120) for out, _, _ in runs]
        chunks = [list(lm_stream._chunks) for _, lm_stream, _ in runs]
        wait_until(lambda: lm.scheduler.kv.used == 0 and codec.scheduler.slots.used == 0)
    finally:
        lm.close()
        codec.close()
    return ref, got, chunks


def _assert_close(got, ref):
    for a, b in zip(got, ref, strict=True):
        # the codec batched these chunks with other requests' than the both engine did: float rounding of
        # a different batch composition, as in test_split_tiny_qwen_audio_equals_both_engine
        assert a.shape == b.shape and np.abs(a - b).max() < 1e-4


def test_split_qwen_voice_clone_audio_equals_both_engine(tiny_base_proj):
    from voxcli.models import load_model

    programs = [load_model(str(tiny_base_proj)) for _ in range(3)]  # both, lm, codec
    wav = (0.1 * np.sin(np.arange(24000) / 10)).astype(np.float32)
    g = SamplingParams(greedy=True)
    reqs = [SynthesisRequest(text="the clone speaks", ref_audio=wav, ref_sample_rate=24000, ref_text="Hello.",
                             seed=7, sampling=g, fixed_frames=11, max_frames=40),  # ICL: reference codes
            SynthesisRequest(text="x-vector only", ref_audio=wav, ref_sample_rate=24000, seed=8, sampling=g,
                             fixed_frames=6, max_frames=40)]
    ref, got, chunks = _both_and_split(programs, reqs)
    _assert_close(got, ref)
    ref_codes = chunks[0][0].binding
    assert isinstance(ref_codes, np.ndarray) and ref_codes.ndim == 2 and ref_codes.shape[0] > 0
    assert chunks[0][0].nbytes == chunks[0][0].codes.nbytes + ref_codes.nbytes  # the relay counts both
    assert chunks[1][0].binding is None  # an x-vector clone's codec needs nothing but codes
    assert all(c.binding is None for cs in chunks for c in cs[1:])  # chunk 0 only
    pickle.loads(pickle.dumps(chunks[0][0]))  # plain data: it crosses processes
    assert not programs[2].slot_refs  # released on the codec side when the requests ended


@pytest.fixture(scope="module")
def cosy_programs(cosyvoice_ckpt):  # conftest.py: tiny CosyVoice 3 with a second speaker
    from voxcli.models import load_model

    return [load_model(str(cosyvoice_ckpt)) for _ in range(3)]


def test_split_cosyvoice_voice_and_mode_audio_equals_both_engine(cosy_programs):
    g = SamplingParams(greedy=True)
    reqs = [SynthesisRequest(text="Hello there.", voice="second", options={"codec_mode": "offline"}, seed=3,
                             sampling=g, fixed_frames=30),
            SynthesisRequest(text="Hello world.", voice="second", seed=4, sampling=g, fixed_frames=25)]
    ref, got, chunks = _both_and_split(cosy_programs, reqs)
    _assert_close(got, ref)
    first = [cs[0].binding for cs in chunks]
    assert [b["mode"] for b in first] == ["offline", "stream"]
    voice = cosy_programs[0].speakers["second"].voice
    assert np.array_equal(first[0]["prompt_tokens"][0], voice.prompt_tokens.cpu().numpy())
    pickle.loads(pickle.dumps(chunks[0][0]))
    assert not cosy_programs[2].codec_stage.voices  # released on the codec side


def test_codec_state_that_cannot_travel_is_refused_at_submit():
    lm = sim_role_engine("lm")
    try:
        def cannot(prompt):
            raise InputError("this request's voice cannot leave its LM replica; serve it on a both replica")

        lm.program.codec_binding = cannot
        with pytest.raises(InputError, match="cannot leave its LM replica"):
            lm.submit(SynthesisRequest(text="x", fixed_frames=5), key="k")
        assert not lm.scheduler.requests and lm.scheduler.kv.used == 0
    finally:
        lm.close()


def test_a_slot_that_takes_no_state_fails_that_request_alone():
    """The codec program refuses the state sent (the sim's program binds none): that request fails with the
    reason and frees its slot; the neighbour waiting for that slot plays."""
    codec = sim_role_engine("codec", codec_slots=1)
    try:
        books = codec.spec.codebooks

        def chunk0(key, binding):
            return CodeChunk(key=key, index=0, start=0, codes=np.zeros((3, books), np.int64), last=True,
                             deadline_epoch=0.0, arrival_epoch=time.time(), ttfa_target_s=0.2,
                             schedule=ChunkSchedule(first=3), sent_epoch=time.time(), binding=binding)

        bad = codec.feed(chunk0("bad", {"voice": "?"}))
        good = codec.feed(chunk0("good", None))
        with pytest.raises(RequestFailed, match="codec slot could not take the request's state"):
            bad.wait(10)
        assert good.wait(10).shape[0] == 3 * 1920
        wait_until(lambda: codec.scheduler.slots.used == 0)
    finally:
        codec.close()


def test_chunk_bytes_count_the_binding():
    """`CodeChunk.nbytes` (the relay's byte count): the codes, and on chunk 0 the binding it carries."""
    codes = np.zeros((4, 16), np.int64)
    voice = {"mode": "stream", "prompt_mel": (np.zeros((80, 30), np.float32), "float32"), "speed": 1.0}

    def chunk(binding):
        return CodeChunk(key="k", index=0, start=0, codes=codes, last=False, deadline_epoch=0.0,
                         arrival_epoch=0.0, ttfa_target_s=0.2, schedule=ChunkSchedule(first=4),
                         sent_epoch=0.0, binding=binding)

    assert chunk(None).nbytes == codes.nbytes
    ref = np.ones((50, 16), np.int64)
    assert chunk(ref).nbytes == codes.nbytes + ref.nbytes
    # keys and strings as UTF-8, arrays' own bytes, 8 per number
    want = len("mode") + len("stream") + len("prompt_mel") + 80 * 30 * 4 + len("float32") + len("speed") + 8
    assert chunk(voice).nbytes == codes.nbytes + want
