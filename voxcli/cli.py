"""`vox`: the command line. Commands: say, batch (`voxcli.cli_speech`), voices, models (+ pull), and the
bench engineer's bench/profile and `vox serve` when installed (registered by their own modules).

Every error reaches the user as one line on stderr and a non-zero exit code (`voxcli.console`); `vox
--debug …` shows the traceback instead. Heavy imports (torch, the engine, the models) happen inside the
commands so that `vox --help` stays instant. Engines open through the session layer (`voxcli.session`),
never here.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from voxcli import __version__, console
from voxcli.cli_options import DeviceOpt, ModelOpt
from voxcli.cli_speech import BATCH_EXAMPLES, BATCH_HELP, SAY_EXAMPLES, SAY_HELP, batch, say
from voxcli.cli_transcribe import register as register_audio_in
from voxcli.console import ExamplesGroup, click_exception_type, friendly_errors, with_examples

__all__ = ["app", "main", "friendly_errors"]  # friendly_errors: what `vox bench` reports errors with


class OneLineErrors(ExamplesGroup):
    """Usage mistakes (a bad option value, a missing argument, an unknown flag) as ONE line on stderr —
    `vox: error: Invalid value for '--seed': ... (see vox say --help)` — instead of click's usage box,
    so every user mistake reads the same way, in a terminal and in a log."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_exception_type() as e:
            if not standalone_mode:
                raise
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `vox`: the help, as click prints it
                e.show()
                sys.exit(e.exit_code)
            message = " ".join(e.format_message().split())
            ctx = getattr(e, "ctx", None)
            hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            typer.echo(f"vox: error: {message}{hint}", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:  # public in every typer (click's Abort before 0.20, typer's own after)
            if not standalone_mode:
                raise
            typer.echo("vox: aborted.", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(name="vox", no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
                  cls=with_examples('vox say -m demo "Hello there." -o hello.wav',
                                    'echo "Hello. How are you?" | vox say -m demo - -o hello.wav',
                                    "vox batch -m demo lines.txt -o out/",
                                    "vox voices -m demo", base=OneLineErrors),
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Streaming text-to-speech with speech language models.")
models_app = typer.Typer(help="Known models and the local cache.", invoke_without_command=True,
                         no_args_is_help=False,
                         cls=with_examples("vox models",
                                           "vox models pull Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
                                           base=ExamplesGroup))
app.add_typer(models_app, name="models")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vox {__version__}")
        raise typer.Exit()


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
          version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    console.STATE.debug = debug


app.command(help=SAY_HELP, cls=with_examples(*SAY_EXAMPLES))(say)
app.command(help=BATCH_HELP, cls=with_examples(*BATCH_EXAMPLES))(batch)
register_audio_in(app)  # vox transcribe, vox reply (a model that hears: voxcli/cli_transcribe.py)


@app.command(help="List a model's voices, languages, modes and request options (what a JSONL line's, an "
                  "HTTP body's or a Python call's `options` may hold, from its family's schema).",
             cls=with_examples("vox voices -m demo", "vox voices -m Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"))
def voices(model: ModelOpt = None, device: DeviceOpt = None) -> None:
    with friendly_errors():
        from voxcli.cli_preflight import check_model
        from voxcli.models.registry import default_model

        source = model or default_model()
        check_model(source)  # a name that names nothing: "did you mean", at once
        console.announce_demo(source, quiet=True)  # a listing: no note, and no loader warning either
        from voxcli.models import describe_model

        # from config.json alone where the family can (no torch): `vox voices` answers at once
        spec = describe_model(source, device if device not in (None, "auto") else "cpu", "float32")
        typer.echo(f"model:     {source}")
        from voxcli.models_cmd import option_lines, voice_lines

        for line in voice_lines(spec):  # through the one resolver's catalog (models/voices.py)
            typer.echo(line)
        languages = ["auto", *(x for x in spec.languages if x.lower() != "auto")]
        typer.echo(f"languages: {', '.join(languages)}")
        typer.echo(f"modes:     {', '.join(spec.modes)}")
        typer.echo(f"audio:     {spec.sample_rate} Hz, {spec.frame_rate:g} frames/s")
        lines = option_lines(source)  # from the family's schema (models/<family>/options.py)
        typer.echo(f"options:   {lines[0] if lines else '(none)'}")
        for line in lines[1:]:
            typer.echo(f"           {line}")


@models_app.callback()
def models_list(ctx: typer.Context) -> None:
    """List known models and which are cached locally."""
    if ctx.invoked_subcommand is not None:
        return
    with friendly_errors():
        from rich.console import Console

        from voxcli.models_cmd import list_models, models_table

        Console().print(models_table(list_models()))


@models_app.command("pull", help="Download a model into the Hugging Face cache.",
                    cls=with_examples("vox models pull Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"))
def models_pull(model_id: Annotated[str, typer.Argument(help="Hugging Face model id.")]) -> None:
    with friendly_errors():
        from voxcli.models_cmd import pull

        path = pull(model_id)
        typer.echo(f"{model_id} → {path}")


def _register_extensions() -> None:
    """`vox bench` / `vox profile` (voxcli.cli_bench) and `vox serve` (voxcli.server.cli) when present and
    importable. A broken extension must never break `vox say`, so problems here only show up under
    --debug."""
    import importlib

    for name in ("voxcli.cli_bench", "voxcli.server.cli"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        register = getattr(module, "register", None)
        if register is None:
            continue
        try:
            register(app)
        except Exception:  # noqa: BLE001
            if "--debug" in sys.argv:
                raise


_register_extensions()


# Commands whose whole output is text for a person or a pager: a reader that leaves early (`| head`)
# took what it wanted, so that is success, not an error (audio cut short by its reader still fails).
TEXT_COMMANDS = ("models", "voices")


def _reads_text_only(argv: list[str]) -> bool:
    if any(a in ("-h", "--help") for a in argv):
        return True
    words = [a for a in argv if not a.startswith("-")]
    return bool(words) and words[0] in TEXT_COMMANDS


def _stdout_identity() -> tuple[int, int] | None:
    import os

    try:
        st = os.fstat(1)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def main() -> None:
    """Console-script entry point (`vox`)."""
    try:
        _run()
    except SystemExit as e:
        from voxcli.stopping import leave_without_workers

        leave_without_workers(e.code)  # a preparation past its limit still running: no abort at exit
        raise


def _run() -> None:
    stdout_before = _stdout_identity()
    text_only = _reads_text_only(sys.argv[1:])
    try:
        app()
    except BrokenPipeError:  # `vox … | head`: the reader left; not an error worth a traceback
        sys.stderr.close()
        sys.exit(0 if text_only else 1)
    except SystemExit as e:
        # rich answers a broken pipe by pointing stdout at /dev/null and exiting 1: for help and listings
        # that is the reader leaving (`vox say --help | head -1`), so exit 0
        if e.code not in (0, None) and text_only and _stdout_identity() != stdout_before:
            sys.exit(0)
        raise


if __name__ == "__main__":
    main()
