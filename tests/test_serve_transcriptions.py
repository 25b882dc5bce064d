"""`POST /v1/audio/transcriptions` on the tiny demo-speechlm (real cpu engine): the official `openai`
client's `audio.transcriptions.create` (json, text, verbose_json, and stream=True as transcript.text.delta /
transcript.text.done events) gets the text `vox transcribe` prints; bad uploads are a 4xx with one
sentence; a model that cannot hear is a 400."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
openai = pytest.importorskip("openai", reason="openai is not installed (the test extra)")
sf = pytest.importorskip("soundfile")

from support.serve_util import running_server  # noqa: E402

URL = "/v1/audio/transcriptions"


def _wav(seconds: float = 1.2, rate: int = 16000, seed: int = 4) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    g = np.random.default_rng(seed)
    buf = io.BytesIO()
    sf.write(buf, 0.3 * np.sin(2 * np.pi * 250 * t) + 0.05 * g.standard_normal(t.size), rate, format="WAV")
    return buf.getvalue()


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    # the cache for this module only: later modules see the VOX_CACHE they had
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VOX_CACHE", str(tmp_path_factory.getbasetemp() / "speechlm_cli_cache"))
        session = open_session(EngineOptions(model="demo-speechlm"))
        with running_server(SpeechService(session)) as u:
            yield u


def test_the_openai_client_transcribes(url):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    clip = _wav()
    got = client.audio.transcriptions.create(model="demo-speechlm", file=("a.wav", clip, "audio/wav"))
    assert got.text
    plain = client.audio.transcriptions.create(model="m", file=("a.wav", clip), response_format="text")
    assert plain.strip() == got.text
    verbose = httpx.post(f"{url}{URL}", data={"model": "m", "response_format": "verbose_json"},
                         files={"file": ("a.wav", clip)}, timeout=120)
    assert verbose.status_code == 200 and verbose.json()["text"] == got.text
    assert verbose.json()["token_ids"] and abs(verbose.json()["duration"] - 1.2) < 1e-3
    events = list(client.audio.transcriptions.create(model="m", file=("a.wav", clip), stream=True))
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and set(kinds[:-1]) == {"transcript.text.delta"}
    assert len(kinds) > 2 and "".join(e.delta for e in events[:-1]) == events[-1].text == got.text


def test_bad_uploads_are_4xx_sentences(url):
    for kwargs, status, words in (
        ({"data": {"model": "m"}, "files": {"file": ("x.wav", b"not audio")}}, 400, "not audio"),
        ({"data": {"model": "m"}, "files": {"file": ("x.wav", b"")}}, 400, "empty"),
        ({"data": {"model": "m"}, "files": {"nofile": ("x.wav", _wav())}}, 400, "field file is required"),
        ({"files": {"file": ("x.wav", _wav())}}, 400, "field model is required"),
        ({"data": {"model": "m", "response_format": "srt"}, "files": {"file": ("x.wav", _wav())}}, 400,
         "response_format"),
        ({"json": {"model": "m"}}, 400, "multipart/form-data"),
        ({"data": {"model": "m"}, "files": {"file": ("x.wav", _wav(0.005))}}, 400, "at least one"),
        ({"data": {"model": "m"}, "files": {"file": ("x.wav", _wav(601, rate=1000))}}, 400, "at most 600 s"),
    ):
        r = httpx.post(f"{url}{URL}", timeout=60, **kwargs)
        assert r.status_code == status, (kwargs.get("data"), r.text)
        assert words in r.json()["error"]["message"], r.text


def test_a_model_that_cannot_hear_is_a_400():
    from support.serve_util import sim_service

    with running_server(sim_service()) as url:
        r = httpx.post(f"{url}{URL}", data={"model": "m"}, files={"file": ("a.wav", _wav())}, timeout=30)
    assert r.status_code == 400 and "cannot hear" in r.json()["error"]["message"], r.text
