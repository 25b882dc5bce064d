"""A client that reads the whole body gets a WAV with its real length; a streaming client still gets its
first audio before the synthesis ends (issue 32: a WAV saved by the OpenAI client's `create` said
2,147,483,647 frames to stdlib `wave`). Over the real-time simulated H100 (exact lengths: fixed_frames)."""

from __future__ import annotations

import asyncio
import io
import threading
import wave

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
openai = pytest.importorskip("openai", reason="the openai client is not installed (the test extra)")

from support.serve_util import running_server, sim_service  # noqa: E402

from voxcli.server.streaming_choice import client_streams  # noqa: E402

FRAMES = 20
SAMPLES = FRAMES * 1920  # SyntheticProgram: 24 kHz, 12.5 frames/s
MODEL = "qwen3-tts-1.7b"


class HeldAfterFirst:
    """Wraps the service's jobs: every item after a job's first waits for `gate` (the test's hand on the
    synthesis: until it opens, the route cannot have seen the end)."""

    def __init__(self, service) -> None:
        self.gate = threading.Event()
        self._make = service.job
        service.job = self.job

    def job(self, loop):
        job = self._make(loop)
        real_next, seen = job.next, []

        async def held_next():
            if seen:
                await asyncio.to_thread(self.gate.wait)
            seen.append(1)
            return await real_next()

        job.next = held_next
        return job


@pytest.fixture(scope="module")
def served():
    service = sim_service()
    held = HeldAfterFirst(service)
    with running_server(service) as url:
        yield url, held


def _client(url: str):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=60, max_retries=0)


def _frames(data: bytes) -> int:
    with wave.open(io.BytesIO(data)) as w:
        return w.getnframes()


def test_the_openai_clients_create_saves_a_wav_with_its_real_length(served):
    url, held = served
    held.gate.set()
    audio = _client(url).audio.speech.create(model=MODEL, voice="alloy", input="Hello there.",
                                             response_format="wav", extra_body={"fixed_frames": FRAMES})
    assert _frames(audio.content) == SAMPLES  # was 2,147,483,647: the streamed header's "unknown"
    assert audio.response.headers["content-length"] == str(len(audio.content))
    raw = _client(url).audio.speech.with_raw_response.create(model=MODEL, voice="alloy", input="Hello there.",
                                                            response_format="wav",
                                                            extra_body={"fixed_frames": FRAMES})
    assert _frames(raw.content) == SAMPLES


def test_stream_false_asks_any_client_for_the_whole_file(served):
    url, held = served
    held.gate.set()
    body = {"model": MODEL, "input": "Hello there.", "fixed_frames": FRAMES}
    whole = httpx.post(f"{url}/v1/audio/speech", json={**body, "stream": False}, timeout=60)
    assert whole.status_code == 200 and _frames(whole.content) == SAMPLES
    assert "content-length" in whole.headers and "transfer-encoding" not in whole.headers
    streamed = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=60)  # curl's case: no signal
    assert streamed.headers.get("transfer-encoding") == "chunked"
    assert streamed.content[44:] == whole.content[44:]  # the same samples either way
    pcm = httpx.post(f"{url}/v1/audio/speech", json={**body, "stream": False, "response_format": "pcm"},
                     timeout=60)
    assert pcm.content == whole.content[44:]
    both = httpx.post(f"{url}/v1/audio/speech", json={**body, "stream": False, "stream_format": "sse"},
                      timeout=60)
    assert both.status_code == 400 and both.json()["error"]["param"] == "stream"


def test_a_streaming_client_gets_its_first_bytes_before_the_synthesis_ends(served):
    url, held = served
    held.gate.clear()
    try:
        with _client(url).audio.speech.with_streaming_response.create(
                model=MODEL, voice="alloy", input="Hello there.", response_format="wav",
                extra_body={"fixed_frames": FRAMES}) as response:
            chunks = response.iter_bytes()
            first = next(chunks)  # the synthesis is held after its first chunk: this is that chunk
            assert first[:4] == b"RIFF" and len(first) > 44
            assert not held.gate.is_set()
            held.gate.set()
            data = first + b"".join(chunks)
    finally:
        held.gate.set()
    assert len(data) - 44 == 2 * SAMPLES


@pytest.mark.parametrize("stream, stream_format, headers, expected", [
    (None, "audio", {}, True),  # curl, a browser: no signal, streamed as OpenAI's API does
    (False, "audio", {}, False),
    (True, "audio", {"x-stainless-lang": "python"}, True),
    (None, "sse", {"x-stainless-lang": "python"}, True),
    (None, "audio", {"x-stainless-lang": "python"}, False),  # openai: speech.create
    (None, "audio", {"x-stainless-lang": "python", "x-stainless-raw-response": "raw"}, False),
    (None, "audio", {"x-stainless-lang": "python", "x-stainless-raw-response": "stream"}, True),
    (None, "audio", {"x-stainless-lang": "js"}, True),  # the JS client hands back a streamable body
])
def test_which_signal_decides(stream, stream_format, headers, expected):
    assert client_streams(stream, stream_format, headers) is expected
