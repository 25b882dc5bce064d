"""The smaller things a new user tripped on (issue 32), each checked where it lives: the JSONL error's
wording, the help's flags and dtypes, a WAV appended to a file, the server's error `param` and its count
of a 413, the clone messages offline (item 6) and finding a part a checkpoint names by its path (item 13)."""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from voxcli import cli


def test_a_jsonl_syntax_error_says_at_once():
    from voxcli.text import read_batch_inputs

    item = read_batch_inputs(["-"], stdin=io.StringIO('{"id": "a", "text": "unterminated\n'))[0]
    assert item.error is not None and "at at" not in item.error
    assert "Unterminated string starting at column" in item.error


@pytest.mark.parametrize("command", ["say", "batch", "serve"])
def test_flags_show_no_value_placeholder_and_dtype_lists_every_value(command):
    from voxcli.config import DTYPES

    r = CliRunner().invoke(cli.app, [command, "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "<bool>" not in r.stdout, r.stdout
    if command != "serve":
        dtype_line = next(line for line in r.stdout.splitlines() if "--dtype" in line)
        for value in DTYPES:
            assert value in dtype_line, (value, dtype_line)


def test_a_wav_appended_to_a_new_file_gets_its_real_length(tmp_path):
    """`vox say ... -o - >> x.wav`: the stream was opened for appending, where a seek does not move the
    writes; the header still gets the real length (it said 2,147,483,647 frames to stdlib wave)."""
    from voxcli.audio import StreamSink

    path = tmp_path / "x.wav"
    with open(path, "ab") as f:
        sink = StreamSink(f, 24000, "wav")
        sink.write(np.zeros(2400, np.float32))
        sink.close()
    with wave.open(str(path)) as w:
        assert w.getnframes() == 2400
    assert path.stat().st_size == 44 + 2 * 2400


def test_server_errors_name_the_field_the_sentence_is_about():
    from voxcli.server.routes import SpeechBody, param_of

    cases = {
        "the instructions are empty; describe how to speak or drop --instructions": "instructions",
        "max_frames must be >= 1, got 0": "max_frames",
        "model demo has no voice 'zed'; choose one of a, b": "voice",
        "model demo does not speak language 'kl'; choose one of auto": "language",
        "unknown option 'foo' for this model": "options",
        "model demo has no classifier-free guidance: leave cfg_scale unset or 1, got 2": "cfg_scale",
        "the text is empty": None,
    }
    for message, field in cases.items():
        assert param_of(message, SpeechBody) == field, message


def test_a_body_too_large_counts_in_vox_requests_total():
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
    from support.serve_util import metric, running_server, sim_service

    with running_server(sim_service(max_body_bytes=2048)) as url:
        before = httpx.get(f"{url}/metrics").text
        r = httpx.post(f"{url}/v1/audio/speech", json={"model": "x", "input": "x" * 3000}, timeout=10)
        assert r.status_code == 413
        after = httpx.get(f"{url}/metrics").text
    key = ("vox_requests_total", 'outcome="invalid"')
    assert metric(after, *key) == metric(before, *key) + 1


# --- item 6: cloning offline, said truthfully ------------------------------------------------------------

def test_a_custom_voice_model_says_how_to_get_a_base_model_offline(tiny_custom_voice):
    from voxcli.models.base import InputError, SynthesisRequest
    from voxcli.models.locate import read_json
    from voxcli.models.qwen3_tts.config import parse_config
    from voxcli.models.qwen3_tts.validate import validate_request

    cfg = parse_config(read_json(Path(tiny_custom_voice) / "config.json"))
    request = SynthesisRequest(text="hi", ref_audio=np.zeros(2400, np.float32), ref_sample_rate=24000)
    with pytest.raises(InputError) as e:
        validate_request(cfg, request, model="demo")
    message = str(e.value)
    assert "Base model" in message and "make_tiny.py OUT --family qwen3_tts --variant base" in message


def test_the_cosyvoice_demo_says_it_has_no_speech_tokenizer_and_how_to_build_one(tmp_path):
    from voxcli.models.base import InputError
    from voxcli.models.flowlm.onnx_models import SPEECH_TOKENIZER, session

    with pytest.raises(InputError) as e:
        session(tmp_path / SPEECH_TOKENIZER)
    message = str(e.value)
    assert "demo never does" in message and "--clone-models" in message and "onnx" in message


def test_the_builders_the_messages_name_exist():
    """make_tiny.py's --family takes the registry's builder names; the messages name these builders."""
    from voxcli.models.registry import families

    builders = {t.name: t for f in families() for t in f.tiny}
    assert "variant" in builders["qwen3_tts"].options and "clone_models" in builders["cosyvoice3"].options


# --- item 13: a part named by its path is found at that path ----------------------------------------------

def test_a_higgs_tokenizer_named_by_a_local_path_is_that_path(tmp_path, monkeypatch):
    from voxcli.models.higgs_audio.codec import resolve_tokenizer

    tokenizer = tmp_path / "somewhere" / "my-tokenizer"
    tokenizer.mkdir(parents=True)
    (tokenizer / "config.json").write_text("{}")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "processor_config.json").write_text(json.dumps(
        {"audio_tokenizer": {"audio_tokenizer_name_or_path": str(tokenizer)}}))
    assert resolve_tokenizer(ckpt) == tokenizer
    monkeypatch.chdir(tmp_path)  # a relative path is one too (what save_pretrained may write)
    (ckpt / "processor_config.json").write_text(json.dumps(
        {"audio_tokenizer": {"audio_tokenizer_name_or_path": "somewhere/my-tokenizer"}}))
    assert resolve_tokenizer(ckpt).resolve() == tokenizer


def test_a_part_not_found_lists_every_place_tried(tmp_path, monkeypatch):
    import huggingface_hub.constants as hfc
    from voxcli.models.base import CheckpointError
    from voxcli.models.locate import locate_component

    monkeypatch.setattr(hfc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hfc, "HF_HUB_OFFLINE", True)
    ckpt = tmp_path / "ckpt"
    (ckpt / "inside").mkdir(parents=True)
    (ckpt / "inside" / "config.json").write_text("{}")
    assert locate_component("inside", ckpt, "the codec") == ckpt / "inside"  # a folder in the checkpoint
    (ckpt / "codec").mkdir()
    (ckpt / "codec" / "config.json").write_text("{}")
    assert locate_component("owner/codec", ckpt, "the codec", folder="codec") == ckpt / "codec"
    with pytest.raises(CheckpointError) as e:
        locate_component("owner/other", tmp_path / "bare", "the codec", folder="codec")
    message = str(e.value)
    for tried in ("owner/other", str(tmp_path / "bare" / "owner" / "other"), str(tmp_path / "bare" / "codec"),
                  "Hugging Face cache", "vox models pull owner/other"):
        assert tried in message, (tried, message)
