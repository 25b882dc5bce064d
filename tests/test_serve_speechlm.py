"""`vox serve` with a unified text+audio model (the tiny random demo-speechlm on the real cpu engine): the
OpenAI speech route streams its audio (CFG through the cfg_scale extension), and `show_text` carries the
text phase — header X-Vox-Text (UTF-8, percent-encoded) and, with stream_format sse, speech.text.delta
events before the audio that follows — equal to what `vox say --show-text` prints."""

from __future__ import annotations

import base64
import io
import json
from urllib.parse import unquote

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
sf = pytest.importorskip("soundfile")

from support.serve_util import running_server  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from voxcli import cli  # noqa: E402

TEXT = "w1 w2 w3"
FLAGS = ["--greedy", "--max-frames", "20", "--cfg-scale", "3"]
BODY = {"model": "demo-speechlm", "input": TEXT, "greedy": True, "max_frames": 20, "cfg_scale": 3,
        "response_format": "wav"}


@pytest.fixture
def said(tmp_path_factory, monkeypatch):
    """`vox say --show-text` of the request: (its int16 samples, the text lines it printed)."""
    monkeypatch.setenv("VOX_CACHE", str(tmp_path_factory.getbasetemp() / "serve_speechlm_cache"))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    out = tmp_path_factory.mktemp("said") / "say.wav"
    args = ["say", "-m", "demo-speechlm", *FLAGS, "--show-text", TEXT, "-o", str(out)]
    r = CliRunner().invoke(cli.app, args)
    assert r.exit_code == 0, r.output
    texts = [line[len("vox: text: "):] for line in r.output.splitlines() if line.startswith("vox: text: ")]
    samples, sr = sf.read(str(out), dtype="int16")
    assert sr == 16000 and samples.size == 20 * 320 and texts
    return samples, texts


def test_openai_route_streams_speechlm_audio_with_its_text(said):
    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    samples, texts = said
    session = open_session(EngineOptions(model="demo-speechlm"))
    with running_server(SpeechService(session)) as url:
        # plain OpenAI request (+ the cfg_scale extension): streamed wav, no text header
        with httpx.stream("POST", f"{url}/v1/audio/speech", json=BODY, timeout=120) as resp:
            assert resp.status_code == 200, resp.read()
            assert "x-vox-text" not in resp.headers
            pieces = [p for p in resp.iter_raw() if p]
        assert len(pieces) >= 2  # streamed: more than one piece on the wire
        served, sr = sf.read(io.BytesIO(b"".join(pieces)), dtype="int16")
        assert sr == 16000 and served.shape == samples.shape
        assert np.abs(served.astype(np.int32) - samples).max() <= 1  # batching noise may flip a rounding

        # show_text: the text phase in the header, the same audio
        with httpx.stream("POST", f"{url}/v1/audio/speech", json={**BODY, "show_text": True},
                          timeout=120) as resp:
            assert resp.status_code == 200, resp.read()
            assert unquote(resp.headers["x-vox-text"]).split("\n") == texts
            shown = b"".join(resp.iter_raw())
        assert np.abs(sf.read(io.BytesIO(shown), dtype="int16")[0].astype(np.int32) - samples).max() <= 1

        # sse: speech.text.delta before the audio it precedes, then the audio, then done
        resp = httpx.post(f"{url}/v1/audio/speech", timeout=120,
                          json={**BODY, "show_text": True, "stream_format": "sse", "response_format": "pcm"})
        assert resp.status_code == 200, resp.text
        events = [json.loads(line[len("data: "):]) for line in resp.text.splitlines()
                  if line.startswith("data: ")]
        kinds = [e["type"] for e in events]
        n = len(texts)
        assert kinds[:n] == ["speech.text.delta"] * n and [e["text"] for e in events[:n]] == texts
        assert kinds[n:-1] == ["speech.audio.delta"] * (len(kinds) - n - 1)
        assert kinds[-1] == "speech.audio.done"
        pcm = np.frombuffer(b"".join(base64.b64decode(e["audio"]) for e in events[n:-1]), dtype="<i2")
        assert pcm.shape == samples.shape and np.abs(pcm.astype(np.int32) - samples).max() <= 1

        # guidance is a real option: cfg 1 is another request (other audio), a bad scale is a 400
        with httpx.stream("POST", f"{url}/v1/audio/speech", json={**BODY, "cfg_scale": 1}, timeout=120) as r1:
            assert r1.status_code == 200
            plain = sf.read(io.BytesIO(b"".join(r1.iter_raw())), dtype="int16")[0]
        assert plain.shape == samples.shape and not np.array_equal(plain, samples)
        bad = httpx.post(f"{url}/v1/audio/speech", json={**BODY, "cfg_scale": 0.5}, timeout=30)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "cfg_scale", bad.text


def test_show_text_on_a_model_without_a_text_phase_is_a_400():
    from support.serve_util import sim_service

    service = sim_service()
    with running_server(service) as url:
        body = {"model": "qwen3-tts-1.7b", "input": "Hello.", "show_text": True}
        bad = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=30)
    assert bad.status_code == 400, bad.text
    err = bad.json()["error"]
    assert err["param"] == "show_text" and "writes no text phase" in err["message"]
