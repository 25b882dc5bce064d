"""OpenAI voice names on `vox serve` (voxcli/server/voices.py) and the `vox serve --help` curl example
(issue 23: `voice="alloy"` got 400; the example lacked its content-type header and curl wrote the 422
JSON into hello.wav)."""

from __future__ import annotations

import io
import json
import re
import shlex
import wave

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")

from support.serve_util import running_server  # noqa: E402

from voxcli.errors import VoxError  # noqa: E402
from voxcli.server.voices import OPENAI_VOICES, default_table, map_voice, parse_voice_map  # noqa: E402

QWEN_VOICES = ("aiden", "dylan", "eric", "ono_anna", "ryan", "serena", "sohee", "uncle_fu", "vivian")
DEMO_VOICES = ("dylan", "eric", "serena", "uncle_fu", "vivian")


def test_every_openai_voice_maps_to_a_voice_the_model_has():
    for voices in (QWEN_VOICES, DEMO_VOICES):
        table = default_table(voices)
        assert set(table) == set(OPENAI_VOICES)
        assert all(v in voices for v in table.values()), table
    assert default_table(QWEN_VOICES)["onyx"] == "uncle_fu" and default_table(QWEN_VOICES)["echo"] == "ryan"
    assert default_table(DEMO_VOICES)["echo"] == "eric"  # the demo has no ryan: the next preference


def test_a_model_without_named_voices_takes_every_openai_name_as_its_default_voice():
    assert default_table(()) == dict.fromkeys(OPENAI_VOICES)
    assert map_voice("alloy", default_table(()), ()) is None


def test_the_model_s_own_names_win_and_unknown_names_pass_through_to_its_check():
    table = default_table(DEMO_VOICES)
    assert map_voice("Vivian", table, DEMO_VOICES) == "Vivian"
    assert map_voice("ALLOY", table, DEMO_VOICES) == "vivian"
    assert map_voice("nobody", table, DEMO_VOICES) == "nobody"
    assert map_voice(None, table, DEMO_VOICES) is None


def test_voice_map_overrides():
    table = parse_voice_map(["alloy=Eric", "nova=default,robot=serena"], DEMO_VOICES)
    assert table["alloy"] == "eric" and table["nova"] is None and table["robot"] == "serena"
    assert table["onyx"] == "uncle_fu"  # the rest of the default table stays
    assert parse_voice_map(["off"], DEMO_VOICES) == {}
    with pytest.raises(VoxError, match="no voice 'bob'.*dylan, eric"):
        parse_voice_map(["alloy=bob"], DEMO_VOICES)
    with pytest.raises(VoxError, match="NAME=VOICE"):
        parse_voice_map(["alloy"], DEMO_VOICES)


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    """One server over the demo model for the module (a server closes its engine when it stops)."""
    import os

    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    before = os.environ.get("VOX_CACHE")
    os.environ["VOX_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        service = SpeechService(open_session(EngineOptions(model="demo")))
        with running_server(service) as url:
            yield url, service
    finally:
        if before is None:
            os.environ.pop("VOX_CACHE", None)
        else:
            os.environ["VOX_CACHE"] = before


def test_alloy_is_served_as_the_mapped_voice_and_off_gives_the_400_listing_voices(demo_server):
    url, service = demo_server
    body = {"model": "demo", "input": "Hello there.", "greedy": True, "max_frames": 6,
            "response_format": "pcm"}
    alloy = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": "alloy"}, timeout=120)
    vivian = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": "vivian"}, timeout=120)
    assert alloy.status_code == 200 and vivian.status_code == 200, (alloy.text, vivian.text)
    assert alloy.content == vivian.content and alloy.content  # the same greedy samples: the same voice
    shown = httpx.get(f"{url}/v1/audio/voices").json()
    assert shown["openai_voices"]["alloy"] == "vivian"
    service.voice_map = parse_voice_map(["off"], service.spec.voices)
    try:
        off = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": "alloy"}, timeout=120)
    finally:
        service.voice_map = None
    assert off.status_code == 400
    message = off.json()["error"]["message"]
    assert "no voice 'alloy'" in message and all(v in message for v in DEMO_VOICES), message


def test_the_help_curl_example_works_as_written(demo_server):
    """The example's own header and body, sent as curl would send them, get audio; without the header the
    server answers 422 (what curl used to write into hello.wav)."""
    from voxcli.server.cli import SERVE_EXAMPLES

    example = next(e for e in SERVE_EXAMPLES if e.startswith("curl "))  # printed whole, one line
    words = shlex.split(example)
    headers = dict(h.split(": ", 1) for h in (words[i + 1] for i, w in enumerate(words) if w == "-H"))
    data = words[words.index("-d") + 1]
    assert {k.lower(): v for k, v in headers.items()}.get("content-type") == "application/json"
    assert "-f" in words or "-sSf" in words  # curl fails on an HTTP error instead of saving the error body
    path = re.search(r"localhost:8000(/\S+)", example).group(1)
    url, _ = demo_server
    ok = httpx.post(f"{url}{path}", content=data, headers=headers, timeout=120)
    assert ok.status_code == 200 and ok.content[:4] == b"RIFF", ok.text
    with wave.open(io.BytesIO(ok.content)) as saved:  # a file: its header has its length (issue 32)
        assert saved.getnframes() * 2 == len(ok.content) - 44
    bare = httpx.post(f"{url}{path}", content=data, headers={"content-type": ""}, timeout=120)
    assert bare.status_code == 422, bare.text
    assert json.loads(data)["voice"] in OPENAI_VOICES  # the example shows an OpenAI name working


def test_serve_refuses_a_voice_map_to_a_voice_the_model_lacks(tmp_path):
    import os
    import subprocess
    import sys

    from support.serve_util import free_port

    env = {**os.environ, "VOX_CACHE": str(tmp_path / "cache")}
    args = ["serve", "-m", "demo", "-q", "--port", str(free_port()), "--voice-map", "alloy=bob"]
    p = subprocess.run([sys.executable, "-m", "voxcli", *args], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == ("vox: error: --voice-map alloy=bob: the model has no voice 'bob' (its "
                                "voices: dylan, eric, serena, uncle_fu, vivian).")
