"""`vox serve` with CosyVoice 3 (the offline demo-cosyvoice checkpoint, real cpu engine): the OpenAI speech
route streams the samples `vox say` writes for the same greedy request, its voice and model lists name the
checkpoint's saved speaker, and a voice it lacks is a 400 before any synthesis. (`vox batch` writing files,
both codec modes, and `vox voices` / `vox models`: tests/test_cosyvoice_cli.py.)"""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
sf = pytest.importorskip("soundfile")

from support.serve_util import running_server  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from voxcli import cli  # noqa: E402

TEXT = "You are a helpful assistant, please say it again."  # the demo's greedy LM runs 122 tokens here
# engine chunks of 28 and 50 tokens complete one block-causal hop (the demo voice's 25 + pad = 38, + 3
# look-ahead) at the second chunk, whose audio streams before the last chunk's full-attention re-run
FRAMES = 80


def test_streamed_wav_equals_vox_say(tmp_path_factory, tmp_path, monkeypatch, demo_store):
    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    # the demo cache the cli tests use (the session's built copy)
    cache = demo_store.cache(tmp_path_factory.getbasetemp() / "cosy_cli_cache", "demo-cosyvoice")
    monkeypatch.setenv("VOX_CACHE", str(cache))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    out = tmp_path / "say.wav"
    r = CliRunner().invoke(cli.app, ["say", "-m", "demo-cosyvoice", "--greedy", "--max-frames", str(FRAMES),
                                     "--quiet", TEXT, "-o", str(out)])
    assert r.exit_code == 0, r.output
    said, sr = sf.read(str(out), dtype="int16")
    assert sr == 24000 and said.size > 0

    session = open_session(EngineOptions(model="demo-cosyvoice"))
    with running_server(SpeechService(session)) as url:
        body = {"model": "demo-cosyvoice", "input": TEXT, "greedy": True, "max_frames": FRAMES,
                "response_format": "wav"}
        with httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=300) as resp:
            assert resp.status_code == 200, resp.read()
            pieces = [p for p in resp.iter_raw() if p]
        voices = httpx.get(f"{url}/v1/audio/voices", timeout=30)
        assert voices.status_code == 200 and "tiny_speaker" in voices.text, voices.text
        models = httpx.get(f"{url}/v1/models", timeout=30)
        assert models.status_code == 200 and "demo-cosyvoice" in models.text, models.text
        bad = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": "Nobody"}, timeout=30)
        assert bad.status_code == 400 and "no voice 'Nobody'" in bad.json()["error"]["message"], bad.text
    assert len(pieces) >= 2  # streamed: the first hop's audio before the last chunk's
    served, served_sr = sf.read(io.BytesIO(b"".join(pieces)), dtype="int16")
    assert served_sr == sr and served.shape == said.shape
    # one 16-bit step: batching companions may differ between the two runs (exact to ~1e-6 in fp32)
    assert int(np.abs(served.astype(np.int32) - said.astype(np.int32)).max()) <= 1
