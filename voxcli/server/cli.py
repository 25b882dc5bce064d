"""`vox serve`, registered on the main Typer app by `voxcli.cli` (like `vox bench`)."""

from __future__ import annotations

import ipaddress
import sys
from typing import Annotated

import typer

from voxcli.errors import VoxError

SWITCH_INTERVAL_S = 0.0005

SERVE_HELP = """Serve the OpenAI speech API (POST /v1/audio/speech) over the engine.

Streams audio as it is generated (wav with an open-ended header, pcm, or SSE events), cancels a request
the moment its client disconnects, answers 503 + Retry-After when the engine is full. Also: GET
/v1/audio/voices, /v1/models, /health, /metrics (Prometheus), and the WebSocket /v1/audio/speech/live
for text that streams in. Bound to 127.0.0.1 unless --host says otherwise.

[bold]Examples[/bold]

  vox serve -m demo

  vox serve -m Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice --port 8000 --api-key "$KEY"

  vox serve --executor sim --gpu h100 -m qwen3-tts-1.7b        (a real-time simulated H100)

  vox serve --executor sim --gpu h100 -m qwen3-tts-1.7b --replicas 2   (Ray Serve)

  curl -s localhost:8000/v1/audio/speech -d '{"model":"demo","input":"Hello there."}' -o hello.wav
"""


def serve(
    model: Annotated[str | None, typer.Option("--model", "-m", help="Hub id, checkpoint folder, 'demo', or a "
                                              "model recipe (qwen3-tts-1.7b) with --executor sim.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default; anything else needs "
                                      "--api-key).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="VOX_API_KEY",
                                                help="Require Authorization: Bearer <key> (env "
                                                     "VOX_API_KEY).")]
    = None,
    executor: Annotated[str | None, typer.Option(help="cpu, cuda, or sim (a real-time simulated GPU).")]
    = None,
    gpu: Annotated[str, typer.Option(help="Cost profile for --executor sim: h100, h200 or b200.")] = "",
    replicas: Annotated[int, typer.Option(help="Engine replicas on Ray Serve (1 = this process, no "
                                          "Ray).")] = 1,
    recipe: Annotated[str | None, typer.Option(help="Engine recipe name or TOML file.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Engine setting key=value (repeatable).")]
    = None,
    policy: Annotated[str | None, typer.Option(help="Scheduling policy: sync, sync2, lanes, full.")] = None,
    device: Annotated[str | None, typer.Option(help="Torch device: cpu or cuda.")] = None,
    max_input_chars: Annotated[int, typer.Option(help="Longest input text per request.")] = 4096,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body.")] = 64 * 1024,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only errors on stderr.")] = False,
) -> None:
    from voxcli.cli import _err, friendly_errors

    with friendly_errors():
        if not 0 < port < 65536:
            raise VoxError(f"--port must be 1..65535, got {port}.", 2)
        if replicas < 1:
            raise VoxError(f"--replicas must be at least 1, got {replicas}.", 2)
        if executor not in (None, "cpu", "cuda", "sim"):
            raise VoxError(f"--executor must be cpu, cuda or sim, got {executor!r}.", 2)
        if max_input_chars < 1 or max_body_bytes < 1024:
            raise VoxError("--max-input-chars must be >= 1 and --max-body-bytes >= 1024.", 2)
        if not _is_loopback(host) and not api_key:
            raise VoxError(f"--host {host} exposes the server beyond this machine; set --api-key (or "
                           "VOX_API_KEY) as well, or bind 127.0.0.1.", 2)
        try:
            import uvicorn

            from voxcli.server.app import create_app
            from voxcli.server.service import Limits, SpeechService
        except ImportError as e:
            raise VoxError(f"vox serve needs the serve extra ({e.name} is missing): pip install "
                           "'voxcli[serve]'.", 2) from None
        _check_port(host, port)  # before minutes of model loading, not after
        limits = Limits(max_input_chars=max_input_chars, max_body_bytes=max_body_bytes)
        if replicas > 1:
            from voxcli.server.ray_app import run_ray

            run_ray(replicas=replicas, model=model, executor=executor, gpu=gpu, recipe=recipe,
                    sets=set_ or [], policy=policy, device=device, host=host, port=port, api_key=api_key,
                    limits=limits, quiet=quiet)
            return
        from voxcli.cli import announce_demo
        from voxcli.server.sessions import open_session

        announce_demo(model, quiet)
        session = open_session(model, executor, gpu, recipe, set_ or [], policy, device)
        app = create_app(SpeechService(session, limits), api_key=api_key)
        if not quiet:
            _err(f"serving {session.model} on http://{host}:{port} (POST /v1/audio/speech; Ctrl-C stops)")
            plan = getattr(session.engine, "memory_plan", None)
            if plan is not None:
                _err(f"  {plan.summary()}")
        # The engine's host loop shares the GIL with the event loop and the job threads: a waiting thread
        # gets it only at the switch interval (5 ms by default), which a deadline scheduler feels.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        uvicorn.run(app, host=host, port=port, log_level="warning" if quiet else "info",
                    timeout_graceful_shutdown=5)


def _check_port(host: str, port: int) -> None:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise VoxError(f"cannot listen on {host}:{port} ({e.strerror or e}); choose another --port or "
                           "--host.", 2) from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(app: typer.Typer) -> None:
    app.command("serve", help=SERVE_HELP)(serve)

