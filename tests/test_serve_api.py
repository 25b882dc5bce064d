"""`vox serve`'s HTTP API on a real loopback socket, over the real-time simulated H100 (the sim's
SyntheticProgram: silent audio of exactly `fixed_frames` frames, so lengths are exact)."""

from __future__ import annotations

import base64
import json
import struct
import threading
import time

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")

from support.serve_util import metric, running_server, sim_service, wait_until  # noqa: E402

SAMPLES_PER_FRAME = 1920  # SyntheticProgram: 24 kHz, 12.5 frames/s
MODEL = "qwen3-tts-1.7b"


@pytest.fixture(scope="module")
def server():
    service = sim_service()
    with running_server(service) as url:
        yield url, service


def speech(url: str, **fields):
    body = {"model": MODEL, "input": "Hello there.", "fixed_frames": 20, **fields}
    return httpx.post(f"{url}/v1/audio/speech", json=body, timeout=30)


def test_health_models_voices(server):
    url, _ = server
    h = httpx.get(f"{url}/health").json()
    assert h["status"] == "ok" and h["model"] == MODEL
    assert httpx.get(f"{url}/v1/models").json()["data"][0]["id"] == MODEL
    v = httpx.get(f"{url}/v1/audio/voices").json()
    assert v["sample_rate"] == 24000 and "wav" in v["response_formats"] and "pcm" in v["response_formats"]


def test_streamed_wav_has_open_ended_header_and_every_sample(server):
    url, _ = server
    r = speech(url, response_format="wav")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav" and r.headers.get("transfer-encoding") == "chunked"
    data = r.content
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    riff_size, = struct.unpack("<I", data[4:8])
    data_size, = struct.unpack("<I", data[40:44])
    assert riff_size == 0xFFFFFFFF and data_size == 0xFFFFFFFF  # length unknown while streaming
    assert len(data) - 44 == 2 * 20 * SAMPLES_PER_FRAME
    pcm = speech(url, response_format="pcm")
    assert pcm.status_code == 200 and pcm.content == data[44:]


def test_sse_framing(server):
    url, _ = server
    r = speech(url, response_format="pcm", stream_format="sse")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = r.text.split("\n\n")
    assert events[-1] == ""  # every event ends with a blank line
    parsed = []
    for raw in events[:-1]:
        assert raw.startswith("data: ") and "\n" not in raw
        parsed.append(json.loads(raw[len("data: "):]))
    deltas = [e for e in parsed if e["type"] == "speech.audio.delta"]
    assert len(deltas) >= 2 and parsed[-1]["type"] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert len(audio) == 2 * 20 * SAMPLES_PER_FRAME
    assert parsed[-1]["usage"]["output_audio_seconds"] == pytest.approx(20 / 12.5)


@pytest.mark.parametrize(("fields", "status", "needle"), [
    ({"speed": 1.5}, 400, "speed 1.5 is not supported"),
    ({"response_format": "ogg-vorbis"}, 400, "response_format 'ogg-vorbis' is not available"),
    ({"model": "nope"}, 400, "model 'nope' is not served here"),
    ({"input": "   "}, 400, "input is empty"),
    ({"input": "Refuse me [fail:input]"}, 400, "this request asked to be refused"),  # the model's check
    ({"stream_format": "sse", "response_format": "flac"}, 400, "stream_format sse carries wav or pcm"),
    ({"colour": "blue"}, 422, "field colour is not a field"),
    ({"fixed_frames": "many"}, 400, "field fixed_frames"),
    ({"stream_format": "smoke"}, 400, "field stream_format"),
])
def test_bad_input_is_one_sentence_400_or_422(server, fields, status, needle):
    url, _ = server
    r = speech(url, **fields)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert needle in err["message"], err
    assert err["message"].count(". ") == 0 or err["message"].endswith(".")


def test_missing_field_text_limit_body_limit_and_404():
    service = sim_service(max_input_chars=50, max_body_bytes=2048)
    with running_server(service) as url:
        r = httpx.post(f"{url}/v1/audio/speech", json={"model": MODEL}, timeout=10)
        assert r.status_code == 422 and r.json()["error"]["message"] == "field input is required."
        r = httpx.post(f"{url}/v1/audio/speech", json={"model": MODEL, "input": "x" * 51}, timeout=10)
        assert r.status_code == 400 and "at most 50" in r.json()["error"]["message"]
        r = httpx.post(f"{url}/v1/audio/speech", json={"model": MODEL, "input": "x" * 3000}, timeout=10)
        assert r.status_code == 413 and "2048 bytes" in r.json()["error"]["message"]
        r = httpx.post(f"{url}/v1/audio/speech", content=b"{not json", timeout=10,
                       headers={"content-type": "application/json"})
        assert r.status_code == 422 and "not valid JSON" in r.json()["error"]["message"]
        r = httpx.post(f"{url}/v1/audio/speech", content=b"model=x&input=y", timeout=10,
                       headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 422 and "Content-Type: application/json" in r.json()["error"]["message"]
        r = httpx.get(f"{url}/v2/nothing", timeout=10)
        assert r.status_code == 404 and "no such endpoint" in r.json()["error"]["message"]


def test_flac_is_a_whole_file(server):
    sf = pytest.importorskip("soundfile")
    import io

    url, _ = server
    r = speech(url, response_format="flac")
    if r.status_code == 400:
        pytest.skip("this libsndfile cannot encode flac")
    data, sr = sf.read(io.BytesIO(r.content), dtype="int16")
    assert sr == 24000 and data.size == 20 * SAMPLES_PER_FRAME


def test_disconnect_cancels_and_frees_pages_and_slots(server):
    url, service = server
    sched = service.engine.scheduler
    assert sched.kv.free == sched.kv.num_pages and sched.slots.free == sched.slots.num_slots
    body = {"model": MODEL, "input": "A long one.", "fixed_frames": 2000, "response_format": "pcm"}
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", f"{url}/v1/audio/speech", json=body) as r:
            assert r.status_code == 200
            pieces = r.iter_raw()  # keep the iterator: a collected one closes the response (disconnects)
            assert next(pieces)
            held = (sched.kv.used, sched.slots.used, service.engine.timelines[-1])
            assert sched.kv.used > 0 and sched.slots.used > 0, held  # the request holds its resources
            t_close = time.monotonic()
    # the connection is gone: the engine must cancel it and give everything back promptly
    def full():
        return (sched.kv.free == sched.kv.num_pages and sched.slots.free == sched.slots.num_slots)
    assert wait_until(full, timeout=3.0)
    freed_after = time.monotonic() - t_close
    tl = service.engine.timelines[-1]
    assert wait_until(lambda: tl.status == "cancelled", timeout=1.0), tl.status
    assert tl.frames < 2000 and freed_after < 1.0
    assert wait_until(lambda: service.active == 0, timeout=2.0)


@pytest.mark.parametrize(("admission", "reason"), [("ttfa-gate", "ttfa_gate"), ("deadline", "queue_full")])
def test_forced_full_admission_is_503_with_retry_after(admission, reason):
    """Whichever admission refuses (the TTFA gate's prediction, or a full queue), the answer is the same
    503 with Retry-After and a JSON sentence."""
    service = sim_service(f"admission={admission}", "max_running=1", "max_queue=1")
    results: list[httpx.Response] = []
    lock = threading.Lock()
    body = {"model": MODEL, "input": "Busy now.", "fixed_frames": 300, "response_format": "pcm"}

    all_answered = threading.Event()

    with running_server(service) as url:
        def one() -> None:
            with httpx.Client(timeout=30) as client, client.stream("POST", f"{url}/v1/audio/speech",
                                                                   json=body) as r:
                pieces = r.iter_raw()  # kept alive: a collected iterator would close the connection
                r.read() if r.status_code != 200 else next(pieces)
                with lock:
                    results.append(r)
                    if len(results) == 4:
                        all_answered.set()
                all_answered.wait(30)  # hold the admitted streams open until every request has its answer

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        codes = sorted(r.status_code for r in results)
        assert len(codes) == 4 and codes.count(503) >= 2 and 200 in codes, codes
        refused = next(r for r in results if r.status_code == 503)
        assert int(refused.headers["retry-after"]) >= 1
        err = refused.json()["error"]
        assert err["type"] == "overloaded" and err["message"].startswith("the server is at capacity: ")
        text = httpx.get(f"{url}/metrics").text
        assert metric(text, "vox_rejections_total", f'reason="{reason}"') >= 2


def test_auth_on_and_off():
    service = sim_service()
    with running_server(service, api_key="sekret") as url:
        assert httpx.get(f"{url}/health").status_code == 200  # probes need no key
        r = httpx.get(f"{url}/v1/models")
        assert r.status_code == 401 and "Authorization: Bearer" in r.json()["error"]["message"]
        assert r.headers["www-authenticate"] == "Bearer"
        r = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and "not valid" in r.json()["error"]["message"]
        r = httpx.post(f"{url}/v1/audio/speech", headers={"Authorization": "Bearer sekret"},
                       json={"model": MODEL, "input": "Hi there.", "fixed_frames": 10}, timeout=30)
        assert r.status_code == 200 and len(r.content) == 44 + 2 * 10 * SAMPLES_PER_FRAME
        assert httpx.get(f"{url}/metrics").status_code == 401


def test_metrics_counters_move(server):
    url, _ = server
    before = httpx.get(f"{url}/metrics").text
    assert speech(url).status_code == 200
    assert speech(url, speed=2.0).status_code == 400
    after = httpx.get(f"{url}/metrics").text
    assert metric(after, "vox_requests_total", 'outcome="done"') == metric(before, "vox_requests_total",
                                                                          'outcome="done"') + 1
    assert metric(after, "vox_requests_total", 'outcome="invalid"') == metric(
        before, "vox_requests_total", 'outcome="invalid"') + 1  # the speed=2.0 request
    assert metric(after, "vox_ttfa_seconds_count") == metric(before, "vox_ttfa_seconds_count") + 1
    assert metric(after, "vox_stall_seconds_count") == metric(before, "vox_stall_seconds_count") + 1
    assert metric(after, "vox_audio_seconds_total") == pytest.approx(
        metric(before, "vox_audio_seconds_total") + 20 / 12.5)
    for gauge in ("vox_active_requests", "vox_queued_requests", "vox_kv_pages_used", "vox_codec_slots_used"):
        assert f"\n{gauge} " in after


def test_bench_http_target_plays_a_schedule(server):
    from voxcli.bench.client import burst
    from voxcli.bench.http_target import HttpTarget
    from voxcli.bench.workloads import Utterance

    url, _ = server
    target = HttpTarget(url, seed=3)
    assert target.model == MODEL and target.sample_rate == 24000
    utterances = [Utterance("u1", "Short one."), Utterance("u2", "A somewhat longer sentence here.")]
    arrivals = burst(3, utterances, 0)
    records = target.play(arrivals, timeout_s=30)
    for a, rec in zip(arrivals, records, strict=True):
        assert rec.status == "done", rec.reason
        assert sum(s for _, s in rec.deliveries) == pytest.approx(a.frames / 12.5)
        assert rec.deliveries[0][0] >= rec.sent  # first audio after the send


def test_leaving_while_queued_cancels_the_waiting_request():
    import socket

    service = sim_service("admission=deadline", "max_running=1", "max_queue=4")  # it queues, never refuses
    sched = service.engine.scheduler
    body = json.dumps({"model": MODEL, "input": "Wait.", "fixed_frames": 1000, "response_format": "pcm"})
    with running_server(service) as url:
        port = int(url.rsplit(":", 1)[1])
        with httpx.Client(timeout=30) as client, client.stream(
                "POST", f"{url}/v1/audio/speech", content=body,
                headers={"content-type": "application/json"}) as first:
            pieces = first.iter_raw()  # kept alive: a collected iterator would close the connection
            assert first.status_code == 200 and next(pieces)  # holds the only running row
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(f"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
            assert wait_until(lambda: len(sched.waiting) == 1)  # admitted to the queue, no audio yet
            s.close()  # the client gives up before its first audio
            assert wait_until(lambda: len(sched.waiting) == 0, timeout=3.0)
            assert service.engine.timelines[-1].status == "cancelled"
            assert service.engine.timelines[0].status == "decode"  # the running neighbour is untouched
