"""`vox transcribe -m MODEL CLIP.wav [CLIP2.wav ...]`: a unified LM hears each clip and answers in text.

Every clip is read and checked before the model loads (missing, unreadable, empty, too long: one
sentence); then a model that cannot hear says so. All clips go into the engine at once; stdout shows
their text in input order, the first unfinished clip's text as it is decoded and each later one's once
it comes up. `--json`: one object per clip (`clip`, `text`, `token_ids`). `-o FILE.jsonl`: the same
objects (plus `status`, `fingerprint`) appended as each clip finishes; a second run skips the clips
already there with the same content (resumable like `vox batch`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from voxcli.cli_options import (
    DeviceOpt,
    DtypeOpt,
    ExecOpt,
    GreedyOpt,
    ModelOpt,
    QuietOpt,
    RecipeOpt,
    SeedOpt,
    SetOpt,
    engine_options,
    open_cli_session,
)
from voxcli.console import friendly_errors, say_line, with_examples
from voxcli.errors import VoxError

HELP = "Transcribe clips with a model that hears (a unified text+audio LM such as Bagpiper)."
EXAMPLES = (
    "vox transcribe -m ./bagpiper clip.wav",
    "vox transcribe -m ./bagpiper a.wav b.flac --json -o out.jsonl",
)


def fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def read_done(path: Path) -> dict[str, dict[str, Any]]:
    """Finished records of an earlier run, by clip path (a torn last line is ignored)."""
    from voxcli.batch import read_manifest

    return {k: r for k, r in read_manifest(path).items() if r.get("status") == "ok"}


class _Printer:
    """Prints the clips' text on stdout in input order: the head clip's as it arrives, the others' when
    they become the head."""

    def __init__(self, n: int, as_json: bool) -> None:
        self._lock = threading.Lock()
        self._buf = [""] * n
        self._done: dict[int, dict[str, Any]] = {}
        self._head = 0
        self._n = n
        self._json = as_json

    def delta(self, i: int, text: str) -> None:
        with self._lock:
            self._buf[i] += text
            if i == self._head and not self._json:
                sys.stdout.write(text)
                sys.stdout.flush()

    def finish(self, i: int, rec: dict[str, Any]) -> None:
        with self._lock:
            self._done[i] = rec
            while self._head in self._done:
                r = self._done.pop(self._head)
                if self._json:
                    sys.stdout.write(
                        json.dumps(
                            {k: r[k] for k in ("clip", "text", "token_ids") if k in r}, ensure_ascii=False
                        )
                        + "\n"
                    )
                else:
                    shown = self._buf[self._head]
                    text = r.get("text", "")
                    # what was streamed, then the rest of the final text (or the whole, if it was rewritten)
                    sys.stdout.write(text[len(shown) :] if text.startswith(shown) else "\n" + text)
                    sys.stdout.write("\n")
                self._head += 1
                if self._head < self._n and not self._json:
                    sys.stdout.write(self._buf[self._head])
            sys.stdout.flush()


def transcribe(
    clips: Annotated[list[Path], typer.Argument(help="Audio clips (WAV, FLAC, OGG), any sample rate.")],
    model: ModelOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per clip: clip, text, token_ids.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Append one JSON line per clip to this file; clips already there are skipped.",
        ),
    ] = None,
    prompt: Annotated[
        str | None, typer.Option("--prompt", help="A system text turn before the clip.")
    ] = None,
    seed: SeedOpt = None,
    greedy: GreedyOpt = False,
    recipe: RecipeOpt = None,
    set_: SetOpt = None,
    executor: ExecOpt = None,
    device: DeviceOpt = None,
    dtype: DtypeOpt = None,
    quiet: QuietOpt = False,
) -> None:
    with friendly_errors():
        from voxcli.engine.stream import EngineError
        from voxcli.models.base import InputError
        from voxcli.transcribe import CannotHear, hearing_check, read_clip, request_for, tap_of

        try:
            audio = [read_clip(c) for c in clips]  # before the model loads
        except InputError as e:
            raise VoxError(str(e), 2) from None
        prints = [fingerprint(c) for c in clips]
        done = read_done(output) if output is not None and output.exists() else {}
        todo = [i for i, c in enumerate(clips) if done.get(str(c), {}).get("fingerprint") != prints[i]]
        fd = None
        if output is not None:
            if output.is_dir():
                raise VoxError(
                    f"-o {output} is a directory; give a file name such as {output / 'text.jsonl'}.", 2
                )
            try:
                fd = os.open(output, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            except OSError as e:
                raise VoxError(f"cannot write {output}: {e.strerror or e}; choose another -o.", 2) from None
        printer = _Printer(len(clips), as_json)
        for i, c in enumerate(clips):  # already done: shown again, in order
            if i not in todo:
                printer.finish(i, done[str(c)])
        if not todo:
            if not quiet:
                say_line(f"all {len(clips)} clips were already transcribed in {output}")
            return
        opts = engine_options(model, recipe, set_, None, executor, device, dtype)
        failed = 0
        with open_cli_session(opts, quiet) as session:
            try:
                hearing_check(session.engine.program, session.model)
            except CannotHear as e:
                raise VoxError(str(e), 2) from None
            tap = tap_of(session.engine)
            pending = []
            for i in todo:
                req = request_for(audio[i][0], audio[i][1], prompt=prompt, seed=seed, greedy=greedy)
                heard = tap.follow(req, on_delta=lambda t, i=i: printer.delta(i, t))
                try:
                    pending.append((i, req, heard, session.engine.submit(req)))
                except InputError as e:
                    failed += 1
                    say_line(f"{clips[i]}: {e}")
                    printer.finish(i, {"clip": str(clips[i]), "text": "", "status": "error", "error": str(e)})
            for i, req, heard, stream in pending:
                with contextlib.suppress(EngineError):  # a failed or refused request: its status says why
                    stream.wait(timeout=None)
                tap.forget(req)
                ok = stream.status == "done"
                rec = {
                    "id": str(clips[i]),
                    "clip": str(clips[i]),
                    "fingerprint": prints[i],
                    "status": "ok" if ok else "error",
                    "text": heard.text,
                    "token_ids": heard.token_ids,
                }
                if not ok:
                    failed += 1
                    rec["error"] = stream.reason
                    say_line(f"{clips[i]}: {stream.reason}")
                if fd is not None:
                    from voxcli.batch import append_line

                    append_line(fd, (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
                printer.finish(i, rec)
        if fd is not None:
            os.close(fd)
        if failed:
            raise VoxError(f"{failed} of {len(todo)} clips failed", 1)


REPLY_HELP = ("A spoken dialogue turn: a model that hears answers a clip in text (stderr) and then speech "
              "(-o).")
REPLY_EXAMPLES = ("vox reply -m ./bagpiper question.wav -o answer.wav",)


def reply(
    clip: Annotated[Path, typer.Argument(help="The user's turn: a clip (WAV, FLAC, OGG).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The reply's audio (a WAV file).")],
    model: ModelOpt = None,
    prompt: Annotated[str | None, typer.Option("--prompt", help="A system text turn before the clip.")]
    = None,
    cfg_scale: Annotated[float | None, typer.Option("--cfg-scale", help="Guidance of the audio phase "
                                                    "(default: the model's).")] = None,
    max_frames: Annotated[int | None, typer.Option("--max-frames", help="Cap on the reply's frames.")] = None,
    seed: SeedOpt = None, greedy: GreedyOpt = False, recipe: RecipeOpt = None, set_: SetOpt = None,
    executor: ExecOpt = None, device: DeviceOpt = None, dtype: DtypeOpt = None, quiet: QuietOpt = False,
) -> None:
    """One request through both phases: the text segment (shown on stderr as it is decoded), then the
    audio segment with the model's CFG, as `vox say` runs it."""
    with friendly_errors():
        import numpy as np

        from voxcli.cli_options import check_output_file
        from voxcli.engine.stream import EngineError
        from voxcli.models.base import InputError, SamplingParams, SynthesisRequest
        from voxcli.speak import SpeechFailed
        from voxcli.transcribe import CannotHear, hearing_check, read_clip, tap_of

        try:
            pcm, rate = read_clip(clip)  # before the model loads
        except InputError as e:
            raise VoxError(str(e), 2) from None
        check_output_file(str(output))
        opts = engine_options(model, recipe, set_, None, executor, device, dtype)
        with open_cli_session(opts, quiet) as session:
            try:
                hearing_check(session.engine.program, session.model)
            except CannotHear as e:
                raise VoxError(str(e), 2) from None
            req = SynthesisRequest(text="", input_audio=pcm, input_sample_rate=rate, instructions=prompt,
                                   seed=seed, sampling=SamplingParams(greedy=greedy), cfg_scale=cfg_scale,
                                   max_frames=max_frames)
            heard = tap_of(session.engine).follow(req, on_delta=lambda t: sys.stderr.write(t))
            pieces: list[np.ndarray] = []
            try:
                session.speak_prepared([req], pieces.append)  # the request is whole: no text to split
            except SpeechFailed as e:  # the model's refusal is the user's mistake; the engine's is not
                cause = e.__cause__ if isinstance(e.__cause__, InputError | EngineError) else e
                raise VoxError(str(cause), 2 if isinstance(cause, InputError) else 1) from None
            sys.stderr.write("\n")
            audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
            if audio.size == 0:
                raise VoxError(f"model {session.model} answered in text only ({heard.text!r}); its "
                               "inference.yaml does not go on to speech", 1)
            import soundfile as sf

            sf.write(str(output), audio, session.spec.sample_rate)
            if not quiet:
                say_line(f"reply: {audio.size / session.spec.sample_rate:.2f} s of audio to {output}")


def register(app: typer.Typer) -> None:
    app.command(help=HELP, cls=with_examples(*EXAMPLES))(transcribe)
    app.command(help=REPLY_HELP, cls=with_examples(*REPLY_EXAMPLES))(reply)
