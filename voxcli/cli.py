"""`vox`: the command line. Commands: say, batch, voices, models (+ pull), and the bench engineer's
bench/profile when installed.

Every error reaches the user as one line on stderr and a non-zero exit code; `vox --debug …` shows the
traceback instead. Heavy imports (torch, the engine, the models) happen inside the commands so that
`vox --help` stays instant.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from voxcli import __version__
from voxcli.errors import VoxError


def click_exception_type() -> type[Exception]:
    """The ClickException class this typer raises for usage mistakes, found through typer's public
    `BadParameter` (a ClickException subclass): click's own in typer < 0.20, typer's vendored copy in newer
    ones. Never a private module path, so a typer that moves its internals cannot break error handling."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class OneLineErrors(TyperGroup):
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


app = typer.Typer(name="vox", cls=OneLineErrors, no_args_is_help=True, add_completion=False,
                  rich_markup_mode="rich",
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Streaming text-to-speech with speech language models.\n\n"
                       "[bold]Examples[/bold]\n\n"
                       "  vox say -m demo \"Hello there.\" -o hello.wav\n\n"
                       "  echo \"Hello. How are you?\" | vox say - --play\n\n"
                       "  vox batch lines.txt -o out/\n\n"
                       "  vox voices -m demo")
models_app = typer.Typer(help="Known models and the local cache.\n\n[bold]Examples[/bold]\n\n"
                              "  vox models\n\n  vox models pull Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
                         invoke_without_command=True, no_args_is_help=False)
app.add_typer(models_app, name="models")


@dataclass
class _State:
    debug: bool = False


STATE = _State()
DEMO_NOTE = "note: the demo model has tiny random weights; its audio is noise-like, not speech."


def _err(message: str) -> None:
    typer.echo(f"vox: {message}", err=True)


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
            _err(f"error: {e}")
            raise typer.Exit(e.exit_code) from None
        usage, failure = _known_error_types()
        if isinstance(e, usage + failure):
            _err(f"error: {e}")
            raise typer.Exit(2 if isinstance(e, usage) else 1) from None
        _err(f"internal error: {type(e).__name__}: {e} (run vox --debug … for the traceback, and please "
             "report it).")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        if STATE.debug:
            raise
        _err("interrupted.")
        raise typer.Exit(130) from None


# The error classes that read as one sentence: (module, class, a usage mistake -> exit 2 else 1). Looked
# up only among modules already imported (a class whose module never loaded cannot have been raised),
# so handling errors imports nothing: `vox --help` and `vox models` stay free of numpy and torch.
KNOWN_ERRORS = (("voxcli.text", "TextInputError", True), ("voxcli.config", "ConfigError", True),
                ("voxcli.audio", "AudioOutputError", False), ("voxcli.playback", "PlaybackError", False),
                ("voxcli.models.base", "ModelError", False), ("voxcli.speak", "SpeechFailed", False))


def _known_error_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    usage: list[type] = []
    failure: list[type] = []
    for module, name, is_usage in KNOWN_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            (usage if is_usage else failure).append(cls)
    return tuple(usage), tuple(failure)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vox {__version__}")
        raise typer.Exit()


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
          version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    STATE.debug = debug


# --- engine setup shared by say and batch ------------------------------------------------------


@dataclass
class EngineOptions:
    model: str | None
    recipe: str | None
    sets: list[str]
    policy: str | None
    executor: str | None
    device: str | None


@dataclass
class Session:
    engine: Any
    spec: Any  # ModelSpec
    model: str
    # The model's cheap request check (ModelProgram.check): voice, language, options... before synthesis.
    check: Callable[[Any], None]
    # Bounds generation when the user gave no --max-frames: set for the demo model, whose random
    # weights would otherwise run to the engine's hard cap (minutes of noise).
    frame_cap: Any = None
    backend: str = ""  # "cuda executor on cuda" / "cpu executor on cpu", shown in the timing line


def build_config(o: EngineOptions) -> Any:
    from voxcli.config import EngineConfig, load_recipe, recipe_for_model, resolve_auto

    # No --recipe: the model's own shipped recipe (demo, qwen3-tts-0.6b, ...), else the defaults.
    recipe = o.recipe or recipe_for_model(o.model or EngineConfig.model)
    # Offline synthesis (say, batch) wants every request served, late or not: it queues them all (the
    # recipes' TTFA gate sheds load for serving) unless --set admission=... says otherwise.
    cfg = load_recipe(recipe).replace(admission="deadline").with_overrides(o.sets).validate()
    changes = {k: v for k, v in (("model", o.model), ("policy", o.policy), ("executor", o.executor),
                                 ("device", o.device)) if v is not None}
    return resolve_auto(cfg.replace(**changes) if changes else cfg)


def default_engine_factory(config: Any) -> Session:
    """Load the model and start an engine on it (the cpu executor unless the config says otherwise)."""
    from voxcli.models_cmd import ensure_available

    ensure_available(config.model)
    from voxcli.engine.engine import Engine
    from voxcli.models import load_model

    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    program = load_model(config.model, config.device, config.dtype)
    cap = None
    if _is_demo(config.model):
        from voxcli.speak import speech_length_cap

        cap = speech_length_cap(program.spec.frame_rate)
    return Session(engine=Engine(program, config), spec=program.spec, model=config.model, check=program.check,
                   frame_cap=cap, backend=f"{config.executor} executor on {config.device}")


def announce_demo(model: str | None, quiet: bool) -> None:
    """One note for a demo model (random weights), unless --quiet; the loader's own warning is then
    suppressed, so the note is never said twice and --quiet means quiet (say, batch, serve)."""
    if model is None or not _is_demo(model):
        return
    if not quiet:
        _err(DEMO_NOTE)
    import voxcli.models as models

    models._demo_warned.add(model)


def _is_demo(model: str) -> bool:
    from voxcli.models import is_demo

    return is_demo(model)


# Tests may replace this (monkeypatch) to run the CLI over a different engine.
engine_factory = default_engine_factory


@contextlib.contextmanager
def open_session(o: EngineOptions, quiet: bool) -> Iterator[Session]:
    config = build_config(o)
    announce_demo(config.model, quiet)
    session = engine_factory(config)
    try:
        yield session
    finally:
        close = getattr(session.engine, "close", None)
        if close is not None:
            close()


def _sampling(greedy: bool, temperature: float | None, top_k: int | None, top_p: float | None,
              repetition_penalty: float | None) -> Any:
    import math

    from voxcli.models.base import SamplingParams

    for name, value, hi in (("--temperature", temperature, None), ("--top-p", top_p, 1.0),
                            ("--repetition-penalty", repetition_penalty, None)):
        if value is not None and not (math.isfinite(value) and value > 0 and (hi is None or value <= hi)):
            upper = f" and at most {hi:g}" if hi is not None else ""
            raise VoxError(f"{name} must be a finite number above 0{upper}, got {value}.", 2)
    if top_k is not None and top_k < 0:
        raise VoxError(f"--top-k must be >= 0 (0 turns the top-k filter off), got {top_k}.", 2)
    return SamplingParams(greedy=greedy, temperature=temperature, top_k=top_k, top_p=top_p,
                          repetition_penalty=repetition_penalty)


def _check_request_flags(seed: int | None, max_frames: int | None) -> None:
    from voxcli.text import SEED_MAX

    if seed is not None and not 0 <= seed <= SEED_MAX:
        raise VoxError(f"--seed must be a whole number from 0 to {SEED_MAX}, got {seed}.", 2)
    if max_frames is not None and max_frames < 1:
        raise VoxError(f"--max-frames must be at least 1, got {max_frames}.", 2)


def _check_output_file(output: str | None) -> None:
    """Fail before the model loads (not after the synthesis) when -o cannot become a file."""
    if output is None or output == "-":
        return
    path = Path(output)
    if path.is_dir():
        raise VoxError(f"-o {output} is a directory; give a file name such as {path / 'speech.wav'}.", 2)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise VoxError(f"-o {output}: {parent} is not a directory; choose another output path.", 2)


def _read_ref_audio(path: Path | None) -> tuple[Any, int | None]:
    if path is None:
        return None, None
    import numpy as np
    import soundfile as sf

    if not path.exists():  # soundfile would say "System error."
        raise VoxError(f"--ref-audio {path} does not exist; give a WAV/FLAC/OGG recording of the voice.", 2)
    if path.is_dir():
        raise VoxError(f"--ref-audio {path} is a directory; give a WAV/FLAC/OGG recording of the voice.", 2)
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as e:  # soundfile raises LibsndfileError (a RuntimeError)
        raise VoxError(f"cannot read reference audio {path}: {e}; give a WAV/FLAC/OGG file.", 2) from None
    if data.size == 0:
        raise VoxError(f"reference audio {path} is empty; give a few seconds of speech.", 2)
    if not np.isfinite(data).all():
        raise VoxError(f"reference audio {path} holds NaN or infinite samples; give a clean recording.", 2)
    return np.ascontiguousarray(data.mean(axis=1), dtype=np.float32), int(sr)


# Common options (typer Annotated aliases keep the command signatures readable).
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Hub id, local checkpoint folder, or "
                                              "'demo' (tiny, offline). Default: the recipe's model "
                                              "(Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice).")]
VoiceOpt = Annotated[str | None, typer.Option("--voice", "-v", help="Speaker name (see vox voices).")]
LangOpt = Annotated[str | None, typer.Option("--lang", help="Language (see vox voices); default auto.")]
InstrOpt = Annotated[str | None, typer.Option("--instructions", help="Style / voice description for "
                                              "instructable models.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Sampling seed, for repeatable output.")]
GreedyOpt = Annotated[bool, typer.Option("--greedy", help="Greedy decoding with the model's own rules "
                                         "(reproducible).")]
TempOpt = Annotated[float | None, typer.Option("--temperature", help="Sampling temperature.")]
TopKOpt = Annotated[int | None, typer.Option("--top-k", help="Top-k sampling (0 = off).")]
TopPOpt = Annotated[float | None, typer.Option("--top-p", help="Top-p (nucleus) sampling.")]
RepOpt = Annotated[float | None, typer.Option("--repetition-penalty", help="Repetition penalty.")]
CfgOpt = Annotated[float | None, typer.Option("--cfg-scale", help="Classifier-free guidance scale for "
                                              "models with CFG (Dia); 1 = off. Default: the model's.")]
MaxFramesOpt = Annotated[int | None, typer.Option("--max-frames", help="Cap on audio frames per sentence.")]
RecipeOpt = Annotated[str | None, typer.Option("--recipe", help="Engine recipe name or TOML file.")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Engine setting key=value (repeatable), "
                                                   "e.g. --set policy=sync --set chunk.first=2.")]
PolicyOpt = Annotated[str | None, typer.Option("--policy", help="Scheduling policy: sync, sync2, lanes, "
                                               "full.")]
ExecOpt = Annotated[str | None, typer.Option(
    "--executor", help="Executor backend: auto (cuda when torch sees a GPU, else cpu), cpu, cuda, sim.")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="Torch device: auto, cpu or cuda.")]
DtypeOpt = Annotated[str | None, typer.Option("--dtype", help="Weights and KV: auto (bfloat16 on CUDA and on "
                                              "CPUs with bfloat16 instructions, else float32), float32 or "
                                              "bfloat16. Same as --set dtype=...")]


def _with_dtype(sets: list[str] | None, dtype: str | None) -> list[str]:
    """--dtype is --set dtype=...: the config validates it (naming the values it accepts)."""
    return [*(sets or []), f"dtype={dtype}"] if dtype is not None else list(sets or [])
FormatOpt = Annotated[str | None, typer.Option("--format", help="wav, flac, pcm (and mp3, opus, ogg when "
                                               "libsndfile can encode them). Default: from the file name, "
                                               "else wav.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or timing lines on stderr.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", help="Add the memory plan (KV pages, positions, "
                                          "codec slots, bytes) to the timing line.")]


def _plan_line(engine: Any) -> str:
    plan = getattr(engine, "memory_plan", None)
    return f"\n  {plan.summary()}" if plan is not None else "\n  memory plan: none (pools as configured)"


def _sentence_request(template: Any, frame_cap: Any) -> Any:
    def make(sentence: str) -> Any:
        req = template.request(sentence)
        if req.max_frames is None and frame_cap is not None:
            req.max_frames = frame_cap(sentence)
        return req
    return make


@app.command(help="Speak text: to the speakers, a file, or stdout.\n\n[bold]Examples[/bold]\n\n"
                  "  vox say -m demo \"Hello there.\" -o hello.wav\n\n"
                  "  vox say \"Hello there.\" --voice Ryan --play\n\n"
                  "  echo \"Hello. How are you?\" | vox say -m demo - -o - > hello.wav\n\n"
                  "  vox say -m demo \"Raw audio.\" --raw -o - | aplay -r 24000 -f S16_LE -c 1")
def say(
    text: Annotated[str | None, typer.Argument(help="Text to say; '-' or nothing reads stdin (each "
                                                    "sentence is spoken as soon as it is complete).")]
    = None,
    output: Annotated[str | None, typer.Option("--output", "-o",
                                               help="Output file, or '-' for stdout.")] = None,
    play: Annotated[bool, typer.Option("--play", help="Play through the speakers while it streams.")] = False,
    fmt: FormatOpt = None,
    raw: Annotated[bool, typer.Option("--raw", help="Headerless 16-bit little-endian PCM.")] = False,
    text_file: Annotated[Path | None, typer.Option("--text-file", "-f",
                                                   help="Read the text from a file.")] = None,
    model: ModelOpt = None, voice: VoiceOpt = None, lang: LangOpt = None, instructions: InstrOpt = None,
    ref_audio: Annotated[Path | None, typer.Option("--ref-audio", help="Reference speech to clone the voice "
                                                   "of (Base models).")] = None,
    ref_text: Annotated[str | None, typer.Option("--ref-text", help="Transcript of --ref-audio (better "
                                                 "clone).")] = None,
    seed: SeedOpt = None, greedy: GreedyOpt = False, temperature: TempOpt = None, top_k: TopKOpt = None,
    top_p: TopPOpt = None, repetition_penalty: RepOpt = None, max_frames: MaxFramesOpt = None,
    cfg_scale: CfgOpt = None, recipe: RecipeOpt = None, set_: SetOpt = None, policy: PolicyOpt = None,
    executor: ExecOpt = None, device: DeviceOpt = None, quiet: QuietOpt = False, verbose: VerboseOpt = False,
    dtype: DtypeOpt = None,
    show_text: Annotated[bool, typer.Option("--show-text", help="Print what a unified text+audio model "
                                            "writes before it speaks (its text phase) to stderr.")] = False,
) -> None:
    with friendly_errors():
        from voxcli.audio import open_sink, resolve_format
        from voxcli.playback import Player
        from voxcli.speak import RequestTemplate, segment_requests, speak
        from voxcli.text import read_say_text

        set_ = _with_dtype(set_, dtype)
        # stdin streams in: each sentence is spoken once complete, not after EOF (`llm ... | vox say -`)
        live_stdin = text_file is None and (text == "-" or (text is None and not _isatty(sys.stdin)))
        words = "" if live_stdin else read_say_text(text, text_file=text_file)
        if live_stdin:
            from voxcli.textstream import open_stdin_text

            live_text = open_stdin_text(sys.stdin)  # up to the first words: an empty input fails here
        stdout_tty = _isatty(sys.stdout)
        if output is None and not play:
            if stdout_tty:
                play = True  # nothing else was asked for: the speakers are the natural place
            else:
                output = "-"  # piped: `vox say hi | aplay`
        if output == "-" and stdout_tty and not raw and fmt is None:
            raise VoxError("refusing to write binary audio to a terminal; redirect it (> out.wav) or pipe "
                           "it.", 2)
        audio_format = resolve_format(output, fmt, raw) if output is not None else None
        if output == "-" and audio_format not in ("wav", "pcm"):
            raise VoxError(f"--format {audio_format} cannot be streamed to standard output; use wav or --raw "
                           "there, or give a file name with -o.", 2)
        _check_output_file(output)
        _check_request_flags(seed, max_frames)
        template = RequestTemplate(voice=voice, language=lang, instructions=instructions, seed=seed,
                                   sampling=_sampling(greedy, temperature, top_k, top_p, repetition_penalty),
                                   max_frames=max_frames, cfg_scale=cfg_scale)
        template.ref_audio, template.ref_sample_rate = _read_ref_audio(ref_audio)
        template.ref_text = ref_text
        if play:
            from voxcli.playback import check_playback

            check_playback()  # before minutes of model loading, not after
        with open_session(EngineOptions(model, recipe, set_, policy, executor, device), quiet) as session, \
                _sigterm_as_interrupt():
            if show_text:
                _show_text(session)
            requests: Any = segment_requests(words, template, frame_cap=session.frame_cap,
                                             split=session.spec.split_sentences)
            if requests:
                session.check(requests[0])  # before any synthesis; every segment shares the settings
            if live_stdin:
                from voxcli.textstream import speak_live, stdin_requests

                session.check(template.request("(flags check)"))  # the flags, before the text arrives
                if session.spec.split_sentences:
                    requests = stdin_requests(live_text, _sentence_request(template, session.frame_cap))
                else:  # a model that speaks whole texts gets the whole input (at its end)
                    requests = segment_requests("".join(live_text).strip(), template,
                                                frame_cap=session.frame_cap, split=False)
            sr = session.spec.sample_rate
            backend = session.backend
            plan = _plan_line(session.engine) if verbose else ""
            sink: Any = None
            player: Any = None
            try:  # the sink is opened inside: a SIGTERM landing right after the .part appears still aborts it
                sink = open_sink(output, sr, audio_format) if output is not None else None
                player = Player(sr) if play else None

                def on_audio(pcm: Any) -> None:
                    if sink is not None:
                        sink.write(pcm)
                    if player is not None:
                        player.feed(pcm)

                stats = (speak_live if live_stdin else speak)(session.engine, requests, on_audio, sr)
                if stats.samples == 0:
                    raise VoxError("the model produced no audio for this text.")
                if player is not None:
                    player.finish()
                if sink is not None:
                    sink.close()
            except BaseException:
                if sink is not None:
                    sink.abort()
                if player is not None:
                    player.abort()
                raise
        if not quiet:
            where = "" if output in (None, "-") else f" → {output}"
            rtf = f"{stats.rtf:.2f}" if stats.rtf is not None else "n/a"
            seg = f" in {stats.segments} sentences" if stats.segments > 1 else ""
            on = f" · {backend}" if backend else ""
            _err(f"TTFA {stats.ttfa_s * 1000:.0f} ms · {stats.audio_s:.2f} s audio{seg} in "
                 f"{stats.wall_s:.2f} s (RTF {rtf}){on}{where}{plan}")


def _show_text(session: Session) -> None:
    """`--show-text`: the program calls `on_text(request id, text)` as each text segment ends."""
    program = session.engine.program
    if not hasattr(program, "on_text"):
        raise VoxError(f"--show-text: model {session.model} writes no text phase (a unified text+audio model "
                       "such as Bagpiper does)", 2)
    program.on_text = lambda _key, text: _err(f"text: {text}")


def _text_tap(session: Session) -> Any:
    from voxcli.text_phase import NoTextPhase, TextTap

    try:
        return TextTap(session.engine.program, session.model)
    except NoTextPhase as e:
        raise VoxError(f"--show-text: {e}", 2) from None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@app.command(help="Synthesize many lines into one file each, resumably.\n\n"
                  "Inputs: text files (one utterance per line), TSV (id<TAB>text), JSONL "
                  "({\"id\", \"text\", \"voice\", \"language\", \"instructions\", \"seed\", \"options\"}), "
                  "or '-' for stdin. "
                  "Outputs <id>.<format> and manifest.jsonl in DIR; rerunning the same command skips "
                  "finished items and retries failed ones.\n\n[bold]Examples[/bold]\n\n"
                  "  vox batch lines.txt -o out/\n\n"
                  "  vox batch -m demo prompts.jsonl -o out/ --format flac --concurrency 16\n\n"
                  "  cat lines.txt | vox batch - -o out/")
def batch(
    inputs: Annotated[list[str], typer.Argument(help="Input files (text, TSV or JSONL), '-' for stdin.")],
    out_dir: Annotated[Path, typer.Option("--output", "-o", help="Output directory.")],
    fmt: FormatOpt = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", help="Items in the engine at once.")] = 8,
    force: Annotated[bool, typer.Option("--force", help="Regenerate items that are already done.")] = False,
    model: ModelOpt = None, voice: VoiceOpt = None, lang: LangOpt = None, instructions: InstrOpt = None,
    seed: SeedOpt = None, greedy: GreedyOpt = False, temperature: TempOpt = None, top_k: TopKOpt = None,
    top_p: TopPOpt = None, repetition_penalty: RepOpt = None, max_frames: MaxFramesOpt = None,
    cfg_scale: CfgOpt = None, recipe: RecipeOpt = None, set_: SetOpt = None, policy: PolicyOpt = None,
    executor: ExecOpt = None, device: DeviceOpt = None, quiet: QuietOpt = False, verbose: VerboseOpt = False,
    dtype: DtypeOpt = None,
    replicas: Annotated[int, typer.Option(help="Spread the items over this many engine replicas on Ray "
                                          "Serve (the ray extra; 1 = this process).")] = 1,
    placement: Annotated[str | None, typer.Option(
        help="Roles of the replicas on Ray Serve, e.g. both=1,lm=2,codec=1 (vox serve --help).")] = None,
    show_text: Annotated[bool, typer.Option("--show-text", help="Keep what a unified text+audio model "
                                            "writes before it speaks: <id>.txt and the manifest's "
                                            "model_text.")] = False,
) -> None:
    with friendly_errors():
        import os

        from voxcli.audio import resolve_format
        from voxcli.batch import BatchOptions, all_finished, prepare_out_dir, run_batch
        from voxcli.speak import RequestTemplate
        from voxcli.text import read_batch_inputs

        if concurrency < 1:
            raise VoxError(f"--concurrency must be at least 1, got {concurrency}.", 2)
        set_ = _with_dtype(set_, dtype)
        _check_request_flags(seed, max_frames)
        audio_format = resolve_format(None, fmt, False) if fmt else "wav"
        if audio_format == "pcm":
            audio_format = "pcm"
        template = RequestTemplate(voice=voice, language=lang, instructions=instructions, seed=seed,
                                   sampling=_sampling(greedy, temperature, top_k, top_p, repetition_penalty),
                                   max_frames=max_frames, cfg_scale=cfg_scale)
        items = read_batch_inputs(inputs)
        prepare_out_dir(out_dir)  # fail before loading a model
        hook = os.environ.get("VOX_TEST_INTERRUPT_AFTER")  # tests: simulate Ctrl-C after N items
        opts = BatchOptions(out_dir=out_dir, fmt=audio_format, concurrency=concurrency, force=force,
                            progress=not quiet, interrupt_after=int(hook) if hook else None)
        if replicas < 1:
            raise VoxError(f"--replicas must be at least 1, got {replicas}.", 2)
        chosen = None
        if placement is not None:
            from voxcli.placement import parse_placement

            chosen = parse_placement(placement)
            if chosen is None:
                raise VoxError("--placement auto ranks placements on a cost profile, which vox batch does "
                               "not take; give role counts (both=1,lm=2,codec=1) or use vox serve --gpu.", 2)
            if replicas > 1:
                raise VoxError("--placement names every replica; drop --replicas.", 2)
        if show_text and (replicas > 1 or chosen is not None):
            raise VoxError("--show-text runs in this process only; drop --replicas / --placement (or "
                           "--show-text).", 2)
        if not force and all_finished(items, out_dir, audio_format, show_text):  # a rerun with nothing to do
            if not quiet:
                _err(f"0 written, 0 failed, {len(items)} already done → {out_dir}")
            return
        engine_options = EngineOptions(model, recipe, set_ or [], policy, executor, device)
        if chosen is not None:
            build_config(engine_options)  # every flag mistake before Ray starts
            from voxcli.server.ray_app import ReplicaSpec
            from voxcli.server.ray_front import batch_placement_session

            opened: Any = batch_placement_session(chosen, ReplicaSpec(
                model=model, executor=executor, recipe=recipe, sets=set_ or [], policy=policy, device=device),
                quiet)
        elif replicas > 1:
            from voxcli.server.ray_app import batch_session

            opened = batch_session(replicas, model, executor, recipe, set_ or [], policy, device, quiet)
        else:
            opened = open_session(engine_options, quiet)
        with opened as session:
            # command-wide flags fail the command (a placeholder text stands in for the items')
            session.check(template.request("(flags check)"))
            opts.frame_cap, opts.check = session.frame_cap, session.check
            if show_text:
                opts.text = _text_tap(session)
            backend = session.backend
            plan = _plan_line(session.engine) if verbose else ""
            with _sigterm_as_interrupt():
                result = run_batch(session.engine, session.spec, session.model, items, template, opts)
        summary = (f"{result.done} written, {result.failed} failed, {result.skipped} already done "
                   f"({result.audio_s:.1f} s audio in {result.wall_s:.1f} s"
                   + (f", RTF {result.rtf:.2f}" if result.rtf else "")
                   + (f", {backend}" if backend else "") + f") → {out_dir}{plan}")
        if not quiet or result.failed:  # -q silences progress, never the news that items failed
            _err(summary)
            for line in result.errors[:20]:
                _err(f"  failed {line}")
            if len(result.errors) > 20:
                _err(f"  … and {len(result.errors) - 20} more; see {out_dir / 'manifest.jsonl'}")
        if result.disk_full:
            raise VoxError(result.disk_full, 1)
        if result.interrupted:
            raise VoxError("interrupted; nothing half-written was kept. Run the same command again to finish "
                           "the rest.", 130)
        if result.failed:
            raise typer.Exit(1)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A batch killed politely (SIGTERM) stops as cleanly as one interrupted with Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command(help="List a model's voices, languages and modes.\n\n[bold]Examples[/bold]\n\n"
                  "  vox voices -m demo\n\n  vox voices -m Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")
def voices(model: ModelOpt = None, device: DeviceOpt = None) -> None:
    with friendly_errors():
        from voxcli.config import EngineConfig
        from voxcli.models_cmd import ensure_available

        source = model or EngineConfig().model
        ensure_available(source)
        from voxcli.models import describe_model

        # from config.json alone where the family can (no torch): `vox voices` answers at once
        spec = describe_model(source, device if device not in (None, "auto") else "cpu", "float32")
        typer.echo(f"model:     {source}")
        typer.echo(f"voices:    {', '.join(spec.voices) or '(none: ' + ', '.join(spec.modes) + ')'}")
        languages = ["auto", *(x for x in spec.languages if x.lower() != "auto")]
        typer.echo(f"languages: {', '.join(languages)}")
        typer.echo(f"modes:     {', '.join(spec.modes)}")
        typer.echo(f"audio:     {spec.sample_rate} Hz, {spec.frame_rate:g} frames/s")


@models_app.callback()
def models_list(ctx: typer.Context) -> None:
    """List known models and which are cached locally."""
    if ctx.invoked_subcommand is not None:
        return
    with friendly_errors():
        from rich.console import Console
        from rich.table import Table

        from voxcli.models_cmd import list_models

        table = Table(box=None, pad_edge=False)
        table.add_column("model", no_wrap=True)
        for name in ("cached", "size", "about"):
            table.add_column(name)
        for e in list_models():
            size = f"{e.size_bytes / 1e9:.1f} GB" if e.size_bytes else ""
            table.add_row(e.name, "yes" if e.cached else "no", size, e.description)
        Console(soft_wrap=True).print(table)


@models_app.command("pull", help="Download a model into the Hugging Face cache.\n\n[bold]Example[/bold]\n\n"
                                 "  vox models pull Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")
def models_pull(model_id: Annotated[str, typer.Argument(help="Hugging Face model id.")]) -> None:
    with friendly_errors():
        from voxcli.models_cmd import pull

        path = pull(model_id)
        typer.echo(f"{model_id} → {path}")


def _register_extensions() -> None:
    """`vox bench` / `vox profile` (voxcli.bench.cli) and `vox serve` (voxcli.server.cli) when present and
    importable. A broken extension must never break `vox say`, so problems here only show up under
    --debug."""
    import importlib

    for name in ("voxcli.bench.cli", "voxcli.server.cli"):
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
