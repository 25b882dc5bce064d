"""`vox say` and `vox batch`: text in, audio out, through one engine session (`voxcli.session`).

`say` speaks one text, sentence by sentence, to the speakers, a file or stdout (stdin streams in: each
sentence is spoken once complete); `batch` writes one file per line of its inputs, resumably
(`voxcli.batch`). Both take the same flags (`voxcli.cli_options`) and report like every command: one
line per error (`voxcli.console`). They are plain functions; `voxcli.cli` registers them on the app.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from voxcli.cli_options import (
    ENGINE,
    OUTPUT,
    VOICE,
    CfgOpt,
    DeviceOpt,
    DtypeOpt,
    ExecOpt,
    FormatOpt,
    GreedyOpt,
    InstrOpt,
    LangOpt,
    MaxFramesOpt,
    MkdirOpt,
    ModelOpt,
    PolicyOpt,
    QuietOpt,
    RecipeOpt,
    RepOpt,
    SeedOpt,
    SetOpt,
    TempOpt,
    TopKOpt,
    TopPOpt,
    VerboseOpt,
    VoiceOpt,
    check_output_file,
    engine_config,
    engine_options,
    isatty,
    open_cli_session,
    plan_line,
    preflight_model,
    request_template,
    sigterm_as_interrupt,
)
from voxcli.console import friendly_errors, say_line
from voxcli.errors import VoxError
from voxcli.stopping import closed_within

SAY_HELP = "Speak text: to the speakers, a file, or stdout."
SAY_EXAMPLES = (
    'vox say -m demo "Hello there." -o hello.wav',
    "# the default model (vox models pull Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice), through the speakers",
    'vox say "Hello there." --voice Ryan --play',
    'echo "Hello. How are you?" | vox say -m demo - -o - > hello.wav',
    'vox say -m demo "Raw audio." --raw -o - | aplay -r 24000 -f S16_LE -c 1',
)


def say(
    text: Annotated[str | None, typer.Argument(help="Text to say; '-' or nothing reads stdin (each "
                                                    "sentence is spoken as soon as it is complete).")]
    = None,
    text_file: Annotated[Path | None, typer.Option("--text-file", "-f",
                                                   help="Read the text from a file.")] = None,
    model: ModelOpt = None,
    # the rest in --help's panels, in this order: voice, sampling, output, engine
    voice: VoiceOpt = None, lang: LangOpt = None, instructions: InstrOpt = None,
    ref_audio: Annotated[Path | None, typer.Option("--ref-audio", rich_help_panel=VOICE,
                                                   help="Reference speech to clone the voice of (Base "
                                                        "models).")] = None,
    ref_text: Annotated[str | None, typer.Option("--ref-text", rich_help_panel=VOICE,
                                                 help="Transcript of --ref-audio (better clone).")] = None,
    seed: SeedOpt = None, greedy: GreedyOpt = False, temperature: TempOpt = None, top_k: TopKOpt = None,
    top_p: TopPOpt = None, repetition_penalty: RepOpt = None, max_frames: MaxFramesOpt = None,
    cfg_scale: CfgOpt = None,
    output: Annotated[str | None, typer.Option("--output", "-o", rich_help_panel=OUTPUT,
                                               help="Output file, or '-' for stdout.")] = None,
    play: Annotated[bool, typer.Option("--play", rich_help_panel=OUTPUT,
                                       help="Play through the speakers while it streams.")] = False,
    fmt: FormatOpt = None,
    raw: Annotated[bool, typer.Option("--raw", rich_help_panel=OUTPUT,
                                      help="Headerless 16-bit little-endian PCM.")] = False,
    quiet: QuietOpt = False, verbose: VerboseOpt = False, mkdir: MkdirOpt = False,
    show_text: Annotated[bool, typer.Option("--show-text", rich_help_panel=OUTPUT,
                                            help="Print what a unified text+audio model writes before it "
                                                 "speaks (its text phase) to stderr.")] = False,
    recipe: RecipeOpt = None, set_: SetOpt = None, policy: PolicyOpt = None, executor: ExecOpt = None,
    device: DeviceOpt = None, dtype: DtypeOpt = None,
) -> None:
    with friendly_errors():
        from voxcli.audio import STREAMABLE, open_sink, resolve_format
        from voxcli.playback import Player
        from voxcli.request_fields import read_ref_audio
        from voxcli.speak_choice import SpeakOptions
        from voxcli.text import read_say_text
        from voxcli.text_phase import no_text_phase

        # stdin streams in: each sentence is spoken once complete, not after EOF (`llm ... | vox say -`)
        live_stdin = text_file is None and (text == "-" or (text is None and not isatty(sys.stdin)))
        source: str | Iterator[str]
        if live_stdin:
            from voxcli.textstream import open_stdin_text

            source = open_stdin_text(sys.stdin)  # up to the first words: an empty input fails here
        else:
            source = read_say_text(text, text_file=text_file)
        stdout_tty = isatty(sys.stdout)
        if output is None and not play:
            if stdout_tty:
                play = True  # nothing else was asked for: the speakers are the natural place
            else:
                output = "-"  # piped: `vox say hi | aplay`
        if output == "-" and stdout_tty and not raw and fmt is None:
            raise VoxError("refusing to write binary audio to a terminal; redirect it (> out.wav) or pipe "
                           "it.", 2)
        audio_format = resolve_format(output, fmt, raw) if output is not None else None
        if output == "-" and audio_format not in STREAMABLE:
            raise VoxError(f"--format {audio_format} cannot be streamed to standard output; use wav or --raw "
                           "there, or give a file name with -o.", 2)
        check_output_file(output, mkdir)
        template = request_template(voice, lang, instructions, seed, greedy, temperature, top_k, top_p,
                                    repetition_penalty, max_frames, cfg_scale)
        template.ref_audio, template.ref_sample_rate = read_ref_audio(ref_audio, "--ref-audio")
        template.ref_text = ref_text
        if play:
            from voxcli.playback import check_playback

            check_playback()  # before minutes of model loading, not after
        options = engine_options(model, recipe, set_, policy, executor, device, dtype)
        with open_cli_session(options, quiet, voice, lang, ref_audio is not None) as session, \
                sigterm_as_interrupt():
            if show_text and not session.writes_text:
                raise VoxError(f"--show-text: {no_text_phase(session.model)}", 2)
            # `--show-text`: the text the model writes, as each segment ends
            shown = SpeakOptions(on_text=lambda t: say_line(f"text: {t}")) if show_text else None
            # the flags, before any output exists (standard output gets no header for a refused voice)
            session.check_fields(template)
            sr = session.spec.sample_rate
            backend = session.backend
            plan = plan_line(session.engine) if verbose else ""
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

                stats = session.speak(source, template, on_audio, options=shown)
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
            say_line(f"TTFA {stats.ttfa_s * 1000:.0f} ms · {stats.audio_s:.2f} s audio{seg} in "
                 f"{stats.wall_s:.2f} s (RTF {rtf}){on}{where}{plan}")




BATCH_HELP = ("Synthesize many lines into one file each, resumably.\n\n"
              "Inputs: text files (one utterance per line), TSV (id<TAB>text), JSONL "
              "({\"id\", \"text\", \"voice\", \"language\", \"instructions\", \"seed\", \"options\"}), "
              "or '-' for stdin. "
              "Outputs <id>.<format> and manifest.jsonl in DIR; rerunning the same command skips "
              "finished items and retries failed ones.")
BATCH_EXAMPLES = (
    "vox batch -m demo lines.txt -o out/",
    "vox batch -m demo prompts.jsonl -o out/ --format flac --concurrency 16",
    "cat lines.txt | vox batch -m demo - -o out/",
)


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
    dtype: DtypeOpt = None, mkdir: MkdirOpt = False,
    replicas: Annotated[int, typer.Option(rich_help_panel=ENGINE,
                                          help="Spread the items over this many engine replicas on Ray "
                                               "Serve (the ray extra; 1 = this process).")] = 1,
    placement: Annotated[str | None, typer.Option(
        rich_help_panel=ENGINE,
        help="Roles of the replicas on Ray Serve, e.g. both=1,lm=2,codec=1 (vox serve --help).")] = None,
    show_text: Annotated[bool, typer.Option("--show-text", rich_help_panel=OUTPUT,
                                            help="Keep what a unified text+audio model writes before it "
                                                 "speaks: <id>.txt and the manifest's model_text.")] = False,
) -> None:
    with friendly_errors():
        import os

        from voxcli.audio import resolve_format
        from voxcli.batch import BatchOptions, all_finished, prepare_out_dir, run_batch
        from voxcli.text import read_batch_inputs

        if concurrency < 1:
            raise VoxError(f"--concurrency must be at least 1, got {concurrency}.", 2)
        audio_format = resolve_format(None, fmt, False) if fmt else "wav"
        template = request_template(voice, lang, instructions, seed, greedy, temperature, top_k, top_p,
                                    repetition_penalty, max_frames, cfg_scale)
        items = read_batch_inputs(inputs)
        prepare_out_dir(out_dir, mkdir)  # fail before loading a model
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
                say_line(f"0 written, 0 failed, {len(items)} already done → {out_dir}")
            return
        options = engine_options(model, recipe, set_, policy, executor, device, dtype)
        if chosen is not None or replicas > 1:
            engine_config(options)  # every flag mistake before Ray starts
            preflight_model(options, voice, lang)
        if chosen is not None:
            from voxcli.cluster.ray_app import ReplicaSpec
            from voxcli.cluster.ray_front import batch_placement_session

            spec = ReplicaSpec(model=model, executor=executor, recipe=recipe, sets=list(options.sets),
                               policy=policy, device=device)
            opened: Any = batch_placement_session(chosen, spec, quiet)
        elif replicas > 1:
            from voxcli.cluster.ray_app import batch_session

            opened = batch_session(replicas, model, executor, recipe, list(options.sets), policy, device,
                                   quiet)
        else:
            opened = open_cli_session(options, quiet, voice, lang)
        result: Any = None
        # the engine's close after an interrupt is bounded: a request stuck in it must not hold the exit
        status = lambda: 130 if result is not None and result.interrupted else 1  # noqa: E731
        # on Ray, SIGTERM while the replicas deploy is an interrupt too: Serve is shut down on the way out
        # (killed outright, the Ray instance this process started would outlive it)
        on_ray = sigterm_as_interrupt() if chosen is not None or replicas > 1 else contextlib.nullcontext()
        with on_ray, closed_within(opened, status) as session:
            # command-wide flags fail the command (a placeholder text stands in for the items')
            session.check_fields(template)
            if show_text and not session.writes_text:
                from voxcli.text_phase import no_text_phase

                raise VoxError(f"--show-text: {no_text_phase(session.model)}", 2)
            opts.show_text = show_text
            backend = session.backend
            plan = plan_line(session.engine) if verbose else ""
            with sigterm_as_interrupt():
                result = run_batch(session, items, template, opts)
        counts = f"{result.done} written, {result.failed} failed, {result.skipped} already done"
        timing = (f" ({result.audio_s:.1f} s audio in {result.wall_s:.1f} s"
                  + (f", RTF {result.rtf:.2f}" if result.rtf else "")
                  + (f", {backend}" if backend else "") + ")")
        if not quiet or result.failed:  # -q silences progress and timing, never the news that items failed
            say_line(f"{counts}{'' if quiet else timing} → {out_dir}{'' if quiet else plan}")
            for line in result.errors[:20]:
                say_line(f"  failed {line}")
            if len(result.errors) > 20:
                say_line(f"  … and {len(result.errors) - 20} more; see {out_dir / 'manifest.jsonl'}")
        if result.disk_full:
            raise VoxError(result.disk_full, 1)
        if result.interrupted:
            raise VoxError("interrupted; nothing half-written was kept. Run the same command again to finish "
                           "the rest.", 130)
        if result.failed:
            raise typer.Exit(1)


