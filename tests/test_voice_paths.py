"""A voice is a file path only from a local front end (models/voices.py): `vox say --voice FILE` works for a
Kyutai checkpoint without a voices folder (the released kyutai/tts-1.6b-en_fr ships none), while over HTTP
the same field naming a `.safetensors` file on the server, or a name climbing out of the voices folder, is
a 400 and the engine is never asked, and so is a WebSocket start (the demo-kyutai checkpoint, offline)."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

pytest.importorskip("sentencepiece", reason="the kyutai extra is not installed: pip install 'voxcli[kyutai]'")


@pytest.fixture(scope="module")
def kyutai(tmp_path_factory):
    """demo-kyutai's checkpoint built once, and a copy of it without its voices folder."""
    import os

    from voxcli.models import load_model

    before = os.environ.get("VOX_CACHE")
    os.environ["VOX_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        program = load_model("demo-kyutai")
        root = program.root
        voice = sorted((root / "voices").glob("*.safetensors"))[0]
        outside = tmp_path_factory.mktemp("elsewhere") / "stolen.wav.1e68beda@240.safetensors"
        shutil.copy(voice, outside)  # a real voice file on the server, outside every voices folder
        bare = tmp_path_factory.mktemp("released") / "kyutai-no-voices"
        shutil.copytree(root, bare, ignore=shutil.ignore_patterns("voices"))
        yield root, outside, bare
    finally:
        if before is None:
            os.environ.pop("VOX_CACHE", None)
        else:
            os.environ["VOX_CACHE"] = before


def test_vox_say_takes_a_voice_file_for_a_checkpoint_without_a_voices_folder(kyutai, tmp_path, monkeypatch):
    from voxcli.models.voices import VOICES_DIR_ENV

    from voxcli.cli import app

    _, outside, bare = kyutai
    monkeypatch.delenv(VOICES_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # no kyutai/tts-voices cached either
    out = tmp_path / "say.wav"
    args = ["say", "-m", str(bare), "Hi there.", "--greedy", "--max-frames", "4", "--quiet", "-o", str(out)]
    res = CliRunner().invoke(app, [*args, "--voice", str(outside)])
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 44  # a WAV header and audio
    res = CliRunner().invoke(app, [*args, "--voice", "tiny-default.wav"])  # no folder: no names
    assert res.exit_code == 2 and "no voice 'tiny-default.wav'" in res.output, res.output
    assert "voice file (*.safetensors)" in res.output
    listed = CliRunner().invoke(app, ["voices", "-m", str(bare)])  # through the same catalog
    assert listed.exit_code == 0 and "kinds:     embedding, file (a *.safetensors path" in listed.output
    assert "folder:" not in listed.output, listed.output


@pytest.fixture(scope="module")
def served(kyutai):
    pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
    from fastapi.testclient import TestClient

    from voxcli.server.app import create_app
    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    root, outside, _ = kyutai
    service = SpeechService(open_session(EngineOptions(model=str(root))))
    asked: list[object] = []
    engine = service.session.engine
    submit = engine.submit

    def counted(request, *args, **kwargs):
        asked.append(request)
        return submit(request, *args, **kwargs)

    engine.submit = counted  # type: ignore[method-assign]
    with TestClient(create_app(service)) as client:
        yield client, outside, asked
    service.session.close()


@pytest.mark.parametrize("voice", ["OUTSIDE", "../voices/tiny-default.wav", "/etc/passwd",
                                   "a/../../tiny-default.wav", "voices/../../x.safetensors"])
def test_over_http_a_voice_is_a_name_never_a_file(served, voice):
    client, outside, asked = served
    voice = str(outside) if voice == "OUTSIDE" else voice
    before = len(asked)
    r = client.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi there.", "voice": voice,
                                              "max_frames": 4, "response_format": "pcm"})
    assert 400 <= r.status_code < 500, r.text
    message = r.json()["error"]["message"]
    assert repr(voice) in message or voice in message, message
    assert len(asked) == before  # refused before the engine saw a request


def test_over_http_a_listed_name_still_speaks(served):
    client, _, asked = served
    body = {"model": "tts-1", "input": "Hi there.", "voice": "tiny-other.wav", "greedy": True,
            "max_frames": 4, "response_format": "pcm"}
    r = client.post("/v1/audio/speech", json=body)
    assert r.status_code == 200, r.text
    assert len(r.content) > 0 and asked and asked[-1].voice == "tiny-other.wav"
    assert asked[-1].voice_paths is False  # the flag travels with the request to the engine


def test_the_websocket_start_refuses_a_server_file_as_its_voice(served):
    import json

    client, outside, asked = served
    before = len(asked)
    with client.websocket_connect("/v1/audio/speech/live") as ws:
        ws.send_text(json.dumps({"type": "start", "voice": str(outside)}))
        reply = json.loads(ws.receive_text())
    assert reply["type"] == "error" and reply["code"] == 400 and "never a file" in reply["message"], reply
    assert len(asked) == before
