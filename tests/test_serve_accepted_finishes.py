"""What is accepted finishes: admission decides once per user request (all its sentences).

40 concurrent 3-sentence requests at the real-time simulated H100 held to 12 running rows (over 3x):
every response is either a 503 before any body or the complete audio of all three sentences; none is
cut mid-body (a later sentence of an admitted request used to be refused by the TTFA gate). The same
with a full queue (`max_queue=1`, `max_running=2`), where sentence 2 used to meet "the queue is full".
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")

from support.serve_util import running_server, sim_service  # noqa: E402

SAMPLES_PER_FRAME = 1920  # SyntheticProgram: 24 kHz, 12.5 frames/s
TEXT = "The first sentence is here. The second one follows it. And the third one ends it."


BODY = {"model": "qwen3-tts-1.7b", "input": TEXT, "response_format": "pcm"}  # split into 3 sentences


def _drive(url: str, n: int) -> list[tuple[int, int, str]]:
    """n concurrent requests; per request (status, body bytes, error while reading the body or "")."""
    body = BODY
    out: list[tuple[int, int, str]] = []
    lock = threading.Lock()
    go = threading.Barrier(n)

    def one() -> None:
        status, size, error = 0, 0, ""
        try:
            with httpx.Client(timeout=60) as client:
                go.wait(30)
                with client.stream("POST", f"{url}/v1/audio/speech", json=body) as r:
                    status = r.status_code
                    for piece in r.iter_bytes():
                        size += len(piece)
        except Exception as e:  # noqa: BLE001 - a body cut mid-stream: recorded, judged below
            error = f"{type(e).__name__}: {e}"
        with lock:
            out.append((status, size, error))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


# 12 running rows: 40 three-sentence requests at once are over 3x what the engine holds; the TTFA gate
# refuses by predicted wait, the second case by a full queue.
@pytest.mark.parametrize("sets", [("max_running=12",), ("max_queue=1", "max_running=2")],
                         ids=["ttfa-gate", "queue-full"])
def test_every_response_is_a_503_or_complete_audio(sets):
    with running_server(sim_service(*sets)) as url:
        alone = httpx.post(f"{url}/v1/audio/speech", json=BODY, timeout=60)
        assert alone.status_code == 200
        whole = len(alone.content)  # the stand-in model's length for this text: every sentence's frames
        assert whole > 3 * SAMPLES_PER_FRAME * 2
        results = _drive(url, 40)
    assert len(results) == 40
    cut = [r for r in results if r[0] == 200 and (r[2] or r[1] != whole)]
    assert not cut, f"{len(cut)} accepted responses were cut mid-body: {cut[:3]}"
    odd = [r for r in results if r[0] not in (200, 503) or r[2]]
    assert not odd, odd
    codes = [r[0] for r in results]
    print(f"{codes.count(200)} complete, {codes.count(503)} refused before any body")
    assert codes.count(200) >= 2 and codes.count(503) >= 1, codes  # overloaded, and still serving


def test_a_continuation_is_never_refused_and_goes_ahead_of_new_requests():
    """The scheduler alone: with the queue full and the TTFA gate predicting a miss for anything new, a
    continuation is still queued, ahead of the new requests already waiting, its first chunk's deadline
    the end of the audio delivered so far."""
    from voxcli.models.base import SynthesisRequest

    from voxcli.config import EngineConfig
    from voxcli.engine.estimates import LatencyEstimator, default_profile
    from voxcli.engine.scheduler import Scheduler
    from voxcli.sim.synthetic import SyntheticProgram

    cfg = EngineConfig(executor="sim", admission="ttfa-gate", max_queue=2, max_running=1,
                       ttfa_target_s=0.2)
    prog = SyntheticProgram()
    sched = Scheduler(cfg, prog.spec, LatencyEstimator(default_profile(), cfg), prog.kv_tokens)

    def new(rid: int):
        return sched.new_request(rid, prog.prepare(SynthesisRequest(text="hello", fixed_frames=400)), 0.0)

    outcomes = [sched.add(new(rid), 0.0) for rid in range(1, 9)]
    refused = [rid for rid, ev in zip(range(1, 9), outcomes, strict=True) if ev]
    assert refused, "the engine should be past capacity"
    waiting_before = [r.id for r in sched.waiting]
    late = new(100)
    sched.continue_after(late, playback_end=3.5)
    assert sched.add(late, 0.0) == []  # not refused: neither the gate nor the full queue applies
    assert [r.id for r in sched.waiting] == [100, *waiting_before]
    assert late.deadline_of(0) == 3.5
    late.t_first_audio = 0.5  # its first audio came early: its later chunks play after 3.5 all the same
    assert late.deadline_of(10) == 3.5 + 10 * prog.spec.frame_seconds
    second = new(101)
    sched.continue_after(second, playback_end=1.0)
    assert sched.add(second, 0.0) == [] and [r.id for r in sched.waiting][:2] == [100, 101]  # FIFO among them
