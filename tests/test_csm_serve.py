"""CSM through `vox serve`'s OpenAI API (the offline `demo-csm`: models/csm/tiny.py): OpenAI voice names map
to CSM's numbered speakers (models/csm/family.py OPENAI_VOICES) and are served as those speakers."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")

from support.serve_util import running_server  # noqa: E402


@pytest.fixture(scope="module")
def csm_server(tmp_path_factory):
    import os

    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    before = os.environ.get("VOX_CACHE")
    os.environ["VOX_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        service = SpeechService(open_session(EngineOptions(model="demo-csm")))
        with running_server(service) as url:
            yield url, service
    finally:
        if before is None:
            os.environ.pop("VOX_CACHE", None)
        else:
            os.environ["VOX_CACHE"] = before


def test_openai_voice_names_are_served_as_csm_speakers(csm_server):
    url, _ = csm_server
    body = {"model": "demo-csm", "input": "Hello there.", "greedy": True, "max_frames": 6,
            "response_format": "pcm"}

    def say(voice: str) -> bytes:
        r = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": voice}, timeout=300)
        assert r.status_code == 200, r.text
        return r.content

    echo, one, zero = say("echo"), say("1"), say("0")
    assert echo == one and len(echo) == 6 * 1920 * 2  # 16-bit PCM of 6 frames
    assert one != zero  # the speaker is part of the prompt: another speaker, other audio
    shown = httpx.get(f"{url}/v1/audio/voices").json()
    assert shown["openai_voices"]["echo"] == "1" and shown["openai_voices"]["alloy"] == "0"
    bad = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": "42"}, timeout=60)
    assert bad.status_code == 400 and "no voice '42'" in bad.json()["error"]["message"]
