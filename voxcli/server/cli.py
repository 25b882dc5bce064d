"""`vox serve`, registered on the main Typer app by `voxcli.cli` (like `vox bench`)."""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import asdict
from typing import Annotated

import typer

from voxcli.console import announce_demo, friendly_errors, say_line, sigterm_as_interrupt, with_examples
from voxcli.errors import VoxError

SERVE_HELP = """Serve the OpenAI speech API (POST /v1/audio/speech) over the engine.

Streams audio as it is generated (wav with an open-ended header, pcm, or SSE events), cancels a request
the moment its client disconnects, answers 503 + Retry-After when the engine is full. Also: GET
/v1/audio/voices, /v1/models, /health, /metrics (Prometheus), and the WebSocket /v1/audio/speech/live
for text that streams in. Bound to 127.0.0.1 unless --host says otherwise.

OpenAI voice names (alloy, ash, ballad, coral, echo, fable, nova, onyx, sage, shimmer, verse) map to the
model's voices by a default table (GET /v1/audio/voices shows it); --voice-map alloy=ryan overrides an
entry, --voice-map off turns the table off.
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
                                          "Ray); with --placement auto, the GPUs to place roles on.")] = 1,
    placement: Annotated[str | None, typer.Option(
        help="Roles of the replicas on Ray Serve: both=1,lm=2,codec=1 (LM-only replicas share the codec-only "
             "ones), or auto: the best of `vox profile --gpus N` (N = --replicas, --gpu).")] = None,
    recipe: Annotated[str | None, typer.Option(help="Engine recipe name or TOML file.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Engine setting key=value (repeatable).")]
    = None,
    policy: Annotated[str | None, typer.Option(help="Scheduling policy: sync, sync2, lanes, full.")] = None,
    device: Annotated[str | None, typer.Option(help="Torch device: cpu or cuda.")] = None,
    max_input_chars: Annotated[int, typer.Option(help="Longest input text per request.")] = 4096,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body.")] = 64 * 1024,
    header_timeout: Annotated[float, typer.Option(help="Seconds a connection has to send its request "
                                                  "headers (slowloris bound; 408 and closed).")] = 10.0,
    body_timeout: Annotated[float, typer.Option(help="Seconds a request has to send its body after the "
                                                "headers (408).")] = 10.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only errors on stderr.")] = False,
    voice_map: Annotated[list[str] | None, typer.Option(
        "--voice-map", help="OpenAI voice name -> model voice, e.g. alloy=ryan (repeatable or "
        "comma-separated; NAME=default: the model's default voice; off: no mapping).")] = None,
) -> None:
    with friendly_errors():
        if not 0 < port < 65536:
            raise VoxError(f"--port must be 1..65535, got {port}.", 2)
        if replicas < 1:
            raise VoxError(f"--replicas must be at least 1, got {replicas}.", 2)
        if executor not in (None, "cpu", "cuda", "sim"):
            raise VoxError(f"--executor must be cpu, cuda or sim, got {executor!r}.", 2)
        if max_input_chars < 1 or max_body_bytes < 1024:
            raise VoxError("--max-input-chars must be >= 1 and --max-body-bytes >= 1024.", 2)
        for flag, value in (("--header-timeout", header_timeout), ("--body-timeout", body_timeout)):
            if not 0.1 <= value <= 3600:  # also refuses nan
                raise VoxError(f"{flag} must be from 0.1 to 3600 seconds, got {value:g}.", 2)
        if not _is_loopback(host) and not api_key:
            raise VoxError(f"--host {host} exposes the server beyond this machine; set --api-key (or "
                           "VOX_API_KEY) as well, or bind 127.0.0.1.", 2)
        try:
            import uvicorn

            from voxcli.server.app import create_app
            from voxcli.server.service import SWITCH_INTERVAL_S, Limits, SpeechService
        except ImportError as e:
            raise VoxError(f"vox serve needs the serve extra ({e.name} is missing): pip install "
                           "'voxcli[serve]'.", 2) from None
        from voxcli.session import open_session, runnable_config, serving_options

        options = serving_options(model, executor, gpu, recipe, set_ or [], policy, device)
        chosen = None
        if placement is not None:
            from voxcli.placement import parse_placement
            from voxcli.sim.placement_rank import auto_placement

            chosen = parse_placement(placement)
            if chosen is not None and replicas > 1:
                raise VoxError("--placement names every replica; drop --replicas (it counts GPUs only for "
                               "--placement auto).", 2)
            if voice_map:
                raise VoxError("--voice-map works with one engine for now; a --placement uses the default "
                               "table (GET /v1/audio/voices shows it).", 2)
            runnable_config(options)  # every flag mistake before Ray starts
            if chosen is None:
                from voxcli.models.registry import default_model

                chosen, rps = auto_placement(model or default_model(simulated=True), gpu, replicas)
                if not quiet:
                    say_line(f"--placement auto over {replicas} GPUs: {chosen.describe()} (predicted "
                             f"{rps:.1f} req/s by the throughput model of `vox profile`)")
        if replicas == 1 and chosen is None:  # every flag mistake first (a busy port is not the first one)
            runnable_config(options)
        _check_port(host, port)  # before minutes of model loading, not after
        limits = Limits(max_input_chars=max_input_chars, max_body_bytes=max_body_bytes,
                        header_timeout_s=header_timeout, body_timeout_s=body_timeout)
        if chosen is not None:
            from voxcli.cluster.ray_app import ReplicaSpec
            from voxcli.cluster.ray_front import run_placement

            spec = ReplicaSpec(model=model, executor=executor, gpu=gpu, recipe=recipe, sets=set_ or [],
                               policy=policy, device=device, api_key=api_key, limits=asdict(limits))
            with sigterm_as_interrupt():  # a start still waiting for its replicas stops too
                run_placement(chosen, spec, host, port, quiet)
            return
        if replicas > 1:
            if voice_map:
                raise VoxError("--voice-map works with one engine for now; the replicas of --replicas use "
                               "the default table (GET /v1/audio/voices shows it).", 2)
            from voxcli.cluster.ray_app import run_ray

            with sigterm_as_interrupt():  # a start still waiting for its replicas stops too
                run_ray(replicas=replicas, model=model, executor=executor, gpu=gpu, recipe=recipe,
                        sets=set_ or [], policy=policy, device=device, host=host, port=port,
                        api_key=api_key, limits=limits, quiet=quiet)
            return
        announce_demo(model, quiet)
        session = open_session(options)
        service = SpeechService(session, limits)
        if voice_map:
            from voxcli.server.voices import parse_voice_map

            try:
                service.voice_map = parse_voice_map(voice_map, session.spec.voices)
            except VoxError:
                session.engine.close()
                raise
        app = create_app(service, api_key=api_key)
        if not quiet:
            say_line(f"serving {session.model} on http://{host}:{port} (POST /v1/audio/speech; Ctrl-C stops)")
            plan = getattr(session.engine, "memory_plan", None)
            if plan is not None:
                say_line(f"  {plan.summary()}")
        sys.setswitchinterval(SWITCH_INTERVAL_S)  # the engine's host loop gets the GIL sooner (service.py)
        from voxcli.server.protocol import server_config

        uvicorn.Server(server_config(app, host, port, limits, log_level="warning" if quiet else "info")).run()
        if getattr(app.state, "close_stuck", False):
            from voxcli.stopping import STOP_BOUND_S, exit_now

            say_line(f"error: the engine did not stop within {STOP_BOUND_S:g} s of the shutdown (a request "
                     "is stuck on its thread); exiting without it.")
            exit_now(1)


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


SERVE_EXAMPLES = (
    "vox serve -m demo",
    'vox serve -m Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice --port 8000 --api-key "$KEY"',
    "# a real-time simulated H100",
    "vox serve --executor sim --gpu h100 -m qwen3-tts-1.7b",
    "# two replicas on Ray Serve (the ray extra)",
    "vox serve --executor sim --gpu h100 -m qwen3-tts-1.7b --replicas 2",
    "# from another terminal, while vox serve -m demo runs (stream false: a WAV header with its length)",
    "curl -sSf localhost:8000/v1/audio/speech -H 'content-type: application/json' -d '{\"model\": \"demo\", "
    "\"input\": \"Hello there.\", \"voice\": \"alloy\", \"stream\": false}' -o hello.wav",
)


def register(app: typer.Typer) -> None:
    app.command("serve", help=SERVE_HELP, cls=with_examples(*SERVE_EXAMPLES))(serve)

