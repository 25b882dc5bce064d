"""How the command-line front ends (`vox`, `vox serve`, `vox bench`, the Ray launchers) talk on stderr.

Every error reaches the user as one line on stderr and a non-zero exit code (`friendly_errors`); `vox
--debug …` shows the traceback instead (`STATE.debug`). This module sits below every front end and
imports none of them, so `vox serve` and the cluster launchers report errors the way `vox say` does
without importing the CLI. It imports nothing heavy: handling an error must not load numpy or torch.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer
import typer.core

from voxcli import stopping
from voxcli.errors import VoxError

# after a stop signal, the longest a front end may take to leave: its workers' and the engine's bounds
# (stopping.STOP_BOUND_S each) plus a margin
HARD_STOP_S = 2 * stopping.STOP_BOUND_S + 2.0


@dataclass
class _State:
    debug: bool = False


STATE = _State()
DEMO_NOTE = "note: the demo model has tiny random weights; its audio is noise-like, not speech."


def say_line(message: str) -> None:
    """One line for the user on stderr, prefixed `vox: `."""
    typer.echo(f"vox: {message}", err=True)


# --- help examples -----------------------------------------------------------------------------------
# Examples are printed after rich's help, as plain lines: rich wraps and pads its text to the terminal's
# width, so a command it printed could break in two at 80 columns, or carry spaces after a `\` that stop
# the continuation when pasted. Here each example is one whole line (a terminal wraps it softly, and
# copies it as one line); a line starting with `#` says what the next one does (a shell comment, so a
# pasted block still runs).
EXAMPLES_HEADING = "Examples:"


def examples_text(examples: tuple[str, ...]) -> str:
    return "\n".join([EXAMPLES_HEADING, *(f"  {line}" for line in examples)]) + "\n"


def _no_flag_placeholders(command: Any, ctx: Any) -> None:
    """A flag takes no value: typer's help would still show a `<bool>` placeholder beside it."""
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


def _print_examples(examples: tuple[str, ...], formatter: Any, before: int) -> None:
    if not examples:
        return
    if len(formatter.getvalue()) > before:  # click's plain formatter (no rich): into its buffer
        formatter.write("\n" + examples_text(examples))
    else:  # rich printed the help itself
        typer.echo(examples_text(examples))


class ExamplesCommand(typer.core.TyperCommand):
    """A command whose help ends with `examples`, printed whole (see examples_text)."""

    examples: tuple[str, ...] = ()

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _no_flag_placeholders(self, ctx)
        before = len(formatter.getvalue())
        super().format_help(ctx, formatter)
        _print_examples(self.examples, formatter, before)


class ExamplesGroup(typer.core.TyperGroup):
    """A command group (`vox`, `vox models`) whose help ends with `examples`."""

    examples: tuple[str, ...] = ()

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _no_flag_placeholders(self, ctx)
        before = len(formatter.getvalue())
        super().format_help(ctx, formatter)
        _print_examples(self.examples, formatter, before)


def with_examples(*examples: str, base: type = ExamplesCommand) -> Any:
    """The `cls=` for a Typer command (or group: base=ExamplesGroup or a subclass) with these examples."""
    return type(base.__name__, (base,), {"examples": tuple(examples)})


def click_exception_type() -> type[Exception]:
    """The ClickException class this typer raises for usage mistakes, found through typer's public
    `BadParameter` (a ClickException subclass): click's own in typer < 0.20, typer's vendored copy in newer
    ones. Never a private module path, so a typer that moves its internals cannot break error handling."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


# The error classes that read as one sentence: (module, class, a usage mistake -> exit 2 else 1). Looked
# up only among modules already imported (a class whose module never loaded cannot have been raised),
# so handling errors imports nothing: `vox --help` and `vox models` stay free of numpy and torch.
#
# The rule for exit codes: 2 when the command as typed cannot work (a flag, an argument, a model name, a
# voice, an output path, the input text, a request field the model refuses), 1 when it was fine but
# running it failed (model files missing or broken, not downloaded, synthesis, a full disk, no audio
# device), 130 when interrupted. tests/test_exit_codes.py holds the rule over many cases.
KNOWN_ERRORS = (("voxcli.text", "TextInputError", True), ("voxcli.config", "ConfigError", True),
                ("voxcli.audio", "AudioFormatError", True), ("voxcli.models.errors", "InputError", True),
                ("voxcli.audio", "AudioOutputError", False), ("voxcli.playback", "PlaybackError", False),
                ("voxcli.models.base", "ModelError", False), ("voxcli.speak", "SpeechFailed", False))


def known_error_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(usage mistakes, failures) among the KNOWN_ERRORS whose modules are loaded."""
    usage: list[type] = []
    failure: list[type] = []
    for module, name, is_usage in KNOWN_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            (usage if is_usage else failure).append(cls)
    return tuple(usage), tuple(failure)


@contextlib.contextmanager
def friendly_errors() -> Iterator[None]:
    """Known failures -> one sentence on stderr + exit code; anything else too, with a hint to --debug."""
    try:
        yield
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except Exception as e:
        if isinstance(e, click_exception_type()):
            raise
        if STATE.debug:
            raise
        if isinstance(e, VoxError):
            say_line(f"error: {e}")
            raise typer.Exit(e.exit_code) from None
        usage, failure = known_error_types()
        if isinstance(e, usage + failure):
            say_line(f"error: {e}")
            # a sentence the model refused (SpeechFailed around an InputError) is the input's mistake too
            refused = type(e).__name__ == "SpeechFailed" and any(isinstance(c, usage) for c in _causes(e))
            raise typer.Exit(2 if isinstance(e, usage) or refused else 1) from None
        say_line(f"internal error: {type(e).__name__}: {e} (run vox --debug … for the traceback, and please "
                 "report it).")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        if STATE.debug:
            raise
        say_line("interrupted.")
        raise typer.Exit(130) from None


def _causes(e: BaseException) -> list[BaseException]:
    """What `e` was raised from, nearest first (a few levels: the engine wraps a model's error once)."""
    out: list[BaseException] = []
    cause = e.__cause__
    while cause is not None and len(out) < 4:
        out.append(cause)
        cause = cause.__cause__
    return out


def announce_demo(model: str | None, quiet: bool) -> None:
    """One note for a demo model (random weights), unless --quiet; the loader's own warning is then
    suppressed, so the note is never said twice and --quiet means quiet (say, batch, serve)."""
    if model is None:
        return
    from voxcli.models import is_demo

    if not is_demo(model):
        return
    if not quiet:
        say_line(DEMO_NOTE)
    import voxcli.models as models

    models._demo_warned.add(model)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """A run told to stop (SIGTERM, or Ctrl-C's SIGINT) stops as cleanly as it can, and within a bound
    whatever it was doing: the first signal raises KeyboardInterrupt (the run's own cleanup: cancels,
    .part files, the engine's close) and arms a hard exit, checked every `HARD_STOP_S`, that leaves once
    the cleanup stops progressing (an interrupt that lands where cleanup cannot finish: inside a lock's
    wait, a stuck close; `stopping.HardExit`); a second signal exits at once. Both leave with status 130."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if stopping.hard_exit_armed():
            stopping.exit_now(130)  # told twice: no more waiting
        stopping.arm_hard_exit(HARD_STOP_S, 130)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
