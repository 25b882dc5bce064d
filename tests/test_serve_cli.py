"""`vox serve` as a command: its flags fail as one sentence before any model load."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from voxcli import cli

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")


def vox(*args: str):
    return CliRunner().invoke(cli.app, list(args))


@pytest.fixture(autouse=True)
def _state(monkeypatch):
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())

    def no_model(config):  # any model load here is a test failure: the errors come first
        raise AssertionError("the model was loaded before the flags were checked")

    monkeypatch.setattr("voxcli.session.engine_factory", no_model)


@pytest.mark.parametrize(("args", "needle"), [
    (["--port", "0"], "--port must be 1..65535"),
    (["--replicas", "0"], "--replicas must be at least 1"),
    (["--executor", "tpu"], "--executor must be cpu, cuda or sim"),
    (["--host", "0.0.0.0"], "set --api-key"),
    (["--executor", "sim"], "--executor sim needs --gpu"),
])
def test_bad_flags_are_one_sentence(args, needle):
    r = vox("serve", "-m", "demo", *args)
    assert r.exit_code == 2, r.output
    assert needle in r.stderr and "Traceback" not in r.output


def test_port_in_use_is_named_before_loading():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = vox("serve", "-m", "demo", "--port", str(port))
    assert r.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in r.stderr, r.output


def test_serve_is_listed_in_help():
    r = vox("--help")
    assert r.exit_code == 0 and "serve" in r.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--executor", "sim"], "--executor sim needs --gpu"),
    (["--executor", "sim", "--gpu", "h100", "--recipe", "demo"], "--recipe does not apply"),
    (["--set", "kv_pages=0"], "kv_pages must be >= 1"),
    (["--set", "threads=100000"], "threads must be at most"),
])
def test_flag_mistakes_come_before_the_port_probe(monkeypatch, args, needle):
    """Whatever listens on the port (8000 by default), a flag mistake is the first thing reported."""
    from voxcli.server import cli as serve_cli

    def port_busy(host, port):
        raise AssertionError("the port was probed before the flags were checked")

    monkeypatch.setattr(serve_cli, "_check_port", port_busy)
    r = vox("serve", "-m", "demo", *args)
    assert r.exit_code == 2 and needle in r.stderr, r.output


@pytest.mark.parametrize("flag", ["--header-timeout", "--body-timeout"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "99999"])
def test_timeouts_are_bounded(flag, value):
    r = vox("serve", "-m", "demo", flag, value)
    assert r.exit_code == 2 and f"{flag} must be from 0.1 to 3600 seconds" in r.stderr, r.output
