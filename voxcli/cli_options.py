"""The flags `vox say` and `vox batch` share, and what they become: engine options, a request template.

Typer `Annotated` aliases keep the command signatures readable; the checks are `voxcli.request_fields`'
(one sentence naming the flag, before a model loads), and the engine opens through the session layer
(`voxcli.session`), as every front end's does. Nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from voxcli.console import announce_demo, sigterm_as_interrupt  # noqa: F401 - the CLI's import of it
from voxcli.errors import VoxError
from voxcli.session import EngineOptions, Session, engine_config, opened

# `--help` groups the flags by what they are about (Typer's rich panels); a flag without a panel (the text,
# --model) stays in the first, plain "Options" panel.
VOICE, SAMPLING, OUTPUT, ENGINE = "Voice", "Sampling", "Output", "Engine"


def flag(name: str, panel: str | None, help: str, *short: str) -> Any:
    """A command-line flag in its `--help` panel (None: the first, plain one), as every alias below is
    made: one call per flag instead of a `typer.Option(...)` block each."""
    return typer.Option(name, *short, rich_help_panel=panel, help=help)


# Common options (typer Annotated aliases keep the command signatures readable).
ModelOpt = Annotated[str | None, flag("--model", None, "Hub id, local checkpoint folder, or 'demo' (tiny, "
                                      "offline). Default: the recipe's model "
                                      "(Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice).", "-m")]
VoiceOpt = Annotated[str | None, flag("--voice", VOICE, "A voice name from vox voices -m MODEL, or a voice "
                                      "file (Kyutai *.safetensors, Zonos *.npy).", "-v")]
LangOpt = Annotated[str | None, flag("--lang", VOICE, "Language (see vox voices); default auto.")]
InstrOpt = Annotated[str | None, flag("--instructions", VOICE, "Style / voice description for instructable "
                                      "models.")]
SeedOpt = Annotated[int | None, flag("--seed", SAMPLING, "Sampling seed, for repeatable output.")]
GreedyOpt = Annotated[bool, flag("--greedy", SAMPLING, "Greedy decoding with the model's own rules "
                                 "(reproducible).")]
TempOpt = Annotated[float | None, flag("--temperature", SAMPLING, "Sampling temperature.")]
TopKOpt = Annotated[int | None, flag("--top-k", SAMPLING, "Top-k sampling (0 = off).")]
TopPOpt = Annotated[float | None, flag("--top-p", SAMPLING, "Top-p (nucleus) sampling.")]
RepOpt = Annotated[float | None, flag("--repetition-penalty", SAMPLING, "Repetition penalty.")]
CfgOpt = Annotated[float | None, flag("--cfg-scale", SAMPLING, "Classifier-free guidance scale for models "
                                      "with CFG (Dia); 1 = off. Default: the model's.")]
MaxFramesOpt = Annotated[int | None, flag("--max-frames", SAMPLING, "Cap on audio frames per sentence.")]
RecipeOpt = Annotated[str | None, flag("--recipe", ENGINE, "Engine recipe name or TOML file.")]
SetOpt = Annotated[list[str] | None, flag("--set", ENGINE, "Engine setting key=value (repeatable), e.g. "
                                          "--set policy=sync --set chunk.first=2.")]
PolicyOpt = Annotated[str | None, flag("--policy", ENGINE, "Scheduling policy: sync, sync2, lanes, full.")]
ExecOpt = Annotated[str | None, flag("--executor", ENGINE, "Executor backend: auto (cuda when torch sees a "
                                     "GPU, else cpu), cpu, cuda, sim.")]
DeviceOpt = Annotated[str | None, flag("--device", ENGINE, "Torch device: auto, cpu or cuda.")]
DtypeOpt = Annotated[str | None, flag("--dtype", ENGINE, "Weights and KV: auto (bfloat16 on CUDA and on "
                                      "CPUs with bfloat16 instructions, else float32), float32, bfloat16 "
                                      "or float16. Same as --set dtype=...")]
FormatOpt = Annotated[str | None, flag("--format", OUTPUT, "wav, flac, pcm (and mp3, opus, ogg when "
                                       "libsndfile can encode them). Default: from the file name, else wav.")]
QuietOpt = Annotated[bool, flag("--quiet", OUTPUT, "No progress or timing lines on stderr.", "-q")]
MkdirOpt = Annotated[bool, flag("--mkdir", OUTPUT, "Create the output's missing folders (otherwise a "
                                "missing folder is refused: it is usually a typo).")]
VerboseOpt = Annotated[bool, flag("--verbose", OUTPUT, "Add the memory plan (KV pages, positions, codec "
                                  "slots, bytes) to the timing line.")]


def engine_options(model: str | None, recipe: str | None, sets: list[str] | None, policy: str | None,
                   executor: str | None, device: str | None, dtype: str | None) -> EngineOptions:
    """Offline synthesis (say, batch) wants every request served, late or not: it queues them all (the
    recipes' TTFA gate sheds load for serving) unless --set admission=... says otherwise. --dtype is
    --set dtype=... (the config validates it, naming the values it accepts; Ray replicas get it so)."""
    sets = [*(sets or ()), *([f"dtype={dtype}"] if dtype is not None else [])]
    return EngineOptions(model=model, recipe=recipe, sets=tuple(sets), policy=policy, executor=executor,
                         device=device, admission="deadline")


@contextlib.contextmanager
def open_cli_session(options: EngineOptions, quiet: bool, voice: str | None = None,
                     language: str | None = None, ref_audio: bool = False) -> Iterator[Session]:
    """The flags checked, the demo note said (unless --quiet), then the engine; closed on the way out."""
    preflight_model(options, voice, language, ref_audio)
    config = engine_config(options)
    announce_demo(config.model, quiet)
    with opened(config) as session:
        yield session


def preflight_model(options: EngineOptions, voice: str | None, language: str | None,
                    ref_audio: bool = False) -> None:
    """The model's name, --voice and --lang checked from config files alone, before torch loads
    (`voxcli.cli_preflight`). Only for the model the real loader will load: a test's engine factory
    serves a model of its own, and the simulator has no checkpoint."""
    from voxcli import session as sessions

    if options.executor == "sim" or sessions.engine_factory is not sessions.default_engine_factory:
        return
    from voxcli.cli_preflight import preflight

    preflight(engine_config(options, resolve_devices=False).model, voice, language, ref_audio)


def request_template(voice: str | None, lang: str | None, instructions: str | None, seed: int | None,
                     greedy: bool, temperature: float | None, top_k: int | None, top_p: float | None,
                     repetition_penalty: float | None, max_frames: int | None,
                     cfg_scale: float | None) -> Any:
    """Every SynthesisRequest field the flags give, checked (the text comes later)."""
    from voxcli.request_fields import check_max_frames, check_seed, sampling_params
    from voxcli.speak import RequestTemplate

    check_seed(seed, "--seed")
    check_max_frames(max_frames, "--max-frames")
    sampling = sampling_params(greedy, temperature, top_k, top_p, repetition_penalty, prefix="--")
    return RequestTemplate(voice=voice, language=lang, instructions=instructions, seed=seed,
                           sampling=sampling,
                           max_frames=max_frames, cfg_scale=cfg_scale,
                           voice_paths=True)  # the command line's user owns the files it names


def check_output_file(output: str | None, mkdir: bool = False) -> None:
    """Fail before the model loads (not after the synthesis) when -o cannot become a file: a folder, a
    missing folder (a typo is never created silently: --mkdir creates it), or one this process cannot
    write to, named with the system's reason ("Read-only file system", "Permission denied")."""
    if output is None or output == "-":
        return
    path = Path(output)
    if path.is_dir():
        raise VoxError(f"-o {output} is a directory; give a file name such as {path / 'speech.wav'}.", 2)
    parent = path.parent
    if not parent.exists():
        if not mkdir:
            existing = parent
            while not existing.exists() and existing != existing.parent:
                existing = existing.parent
            if existing.exists() and not existing.is_dir():
                raise VoxError(f"-o {output}: {existing} is not a directory; choose another output path.", 2)
            raise VoxError(f"-o {output}: the folder {parent} does not exist; create it, or add --mkdir.", 2)
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise VoxError(f"-o {output}: a file in the way of {parent} is not a directory; choose another "
                           "output path.", 2) from None
        except OSError as e:
            raise VoxError(f"-o {output}: cannot create the folder {parent}: {e.strerror or e}.", 2) from None
    elif not parent.is_dir():
        raise VoxError(f"-o {output}: {parent} is not a directory; choose another output path.", 2)
    check_writable(parent, f"-o {output}")


def check_writable(folder: Path, what: str) -> None:
    """Prove `folder` takes a new file (what the output's .part will be), or say why not."""
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".vox-write-test-"):
            pass
    except OSError as e:
        raise VoxError(f"{what}: cannot write in {folder}: {e.strerror or e}; choose a writable location.",
                       2) from None


def plan_line(engine: Any) -> str:
    """`--verbose`: the engine's memory plan, as a second line of the timing line."""
    plan = getattr(engine, "memory_plan", None)
    return f"\n  {plan.summary()}" if plan is not None else "\n  memory plan: none (pools as configured)"


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
