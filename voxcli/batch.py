"""`vox batch`: many utterances through one engine, resumable.

Up to `concurrency` items are in the engine at once (one worker thread per slot: a worker only waits on
its item's stream, the engine batches them together). Each item is written to `<id>.<ext>.part` and
renamed when whole; `manifest.jsonl` gets one line per finished item (file, duration, TTFA, wall time,
error). Running the same command again skips items whose output exists and whose inputs did not change
(resume), and retries failed ones. Ctrl-C cancels the items in flight, deletes their partial files,
and leaves the manifest describing exactly what is done.

A full disk (ENOSPC/EDQUOT, in an item's file or the manifest) stops the batch with one sentence naming
the output directory and its free space: the items in flight are dropped with their `.part` files, the
manifest never holds a torn line (each record is one write of a whole line; a short write is cut back),
and every audio file on disk is listed in it (an item whose record could not be written loses its
file). Freeing space and running the same command again finishes the rest.

`--show-text` (a unified text+audio model, voxcli/text_phase.py): each item's text phase, its segments
one per line, goes to `<id>.txt` beside its audio (written whole, then renamed, before the item's record)
and to the record's `model_text` (a list); a rerun with `--show-text` redoes finished items lacking it.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxcli.audio import PART_SUFFIX, AudioOutputError, DiskFullError, FileSink, extension
from voxcli.errors import VoxError
from voxcli.models.base import InputError
from voxcli.speak import RequestTemplate, SpeechFailed, Stopped
from voxcli.speak_choice import Speaker, SpeakOptions
from voxcli.stopping import STOP_BOUND_S
from voxcli.text import BatchItem

if TYPE_CHECKING:
    from rich.console import Console

MANIFEST = "manifest.jsonl"


@dataclass
class BatchOptions:
    out_dir: Path
    fmt: str = "wav"
    concurrency: int = 8
    force: bool = False  # regenerate items that are already done
    max_chars: int = 300  # sentence segment size for long lines (as `vox say`)
    progress: bool = True
    # Test hook: behave as if Ctrl-C came after this many items finished in this run.
    interrupt_after: int | None = None
    # Stopping (Ctrl-C, SIGTERM, a full disk): how long the workers get to end their items, all together
    stop_bound_s: float = STOP_BOUND_S
    show_text: bool = False  # --show-text: keep each item's text phase (<id>.txt, the record's model_text)


@dataclass
class BatchResult:
    total: int
    done: int = 0
    failed: int = 0
    skipped: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0
    interrupted: bool = False
    errors: list[str] = field(default_factory=list)
    disk_full: str | None = None  # the sentence, when a full disk stopped the batch

    @property
    def rtf(self) -> float | None:
        return self.wall_s / self.audio_s if self.audio_s else None


def prepare_out_dir(out_dir: Path, mkdir: bool = False) -> None:
    """Create the output directory and prove it is writable before any audio is generated. Its parent
    must exist unless `mkdir` (--mkdir): a typo'd path is refused, not created. Exit 2: the path given
    cannot be used (a usage mistake), named with the system's reason."""
    if not out_dir.parent.exists() and not mkdir:
        raise VoxError(f"-o {out_dir}: the folder {out_dir.parent} does not exist; create it, or add "
                       "--mkdir.", 2)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / f".vox-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except FileExistsError:
        raise VoxError(f"output {out_dir} exists and is not a directory; choose another -o.", 2) from None
    except OSError as e:
        raise VoxError(f"cannot write to output directory {out_dir}: {e.strerror or e}; choose a writable "
                       "directory with -o.", 2) from None


def read_manifest(path: Path) -> dict[str, dict[str, Any]]:
    """Latest record per id. A torn last line (killed mid-write) is ignored."""
    records: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return records
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            records[rec["id"]] = rec
    return records


def is_finished(rec: dict[str, Any] | None, item: BatchItem, out_dir: Path, file_name: str,
                with_text: bool = False) -> bool:
    done = (rec is not None and rec.get("status") == "ok" and rec.get("file") == file_name
            and rec.get("fingerprint") == item.fingerprint() and (out_dir / file_name).is_file())
    if done and with_text:  # --show-text: the text phase must be there too
        return "model_text" in rec and (out_dir / text_file(item.id)).is_file()  # type: ignore[operator]
    return done


def text_file(item_id: str) -> str:
    return f"{item_id}.txt"


def all_finished(items: list[BatchItem], out_dir: Path, fmt: str, with_text: bool = False) -> bool:
    """Whether a rerun has nothing to do: every item is finished with unchanged inputs (the same test
    run_batch applies per item). The CLI then answers without loading a model."""
    ext = extension(fmt)
    records = read_manifest(out_dir / MANIFEST)
    return all(is_finished(records.get(i.id), i, out_dir, f"{i.id}.{ext}", with_text) for i in items)


class DiskFull(Exception):
    """The output's file system has no room left; the message is the user's sentence."""


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def disk_full_message(out_dir: Path) -> str:
    try:
        free = f"{_size(shutil.disk_usage(out_dir).free)} free"
    except OSError:
        free = "free space unknown"
    return (f"the disk holding {out_dir} is full ({free}); free some space (or choose another -o) and run "
            "the same command again to finish the rest.")


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def out_of_space(e: BaseException, out_dir: Path) -> bool:
    """`e` was caused by a full disk: an OSError saying so, or a libsndfile error (it reports only
    "System error.") while the output's file system has less than a write's worth left."""
    while e is not None:
        if isinstance(e, DiskFullError):  # the sink's own verdict (voxcli.audio.disk_full)
            return True
        if isinstance(e, OSError) and e.errno in _NO_SPACE:
            return True
        if any(os.strerror(code) in str(e) for code in _NO_SPACE):  # e.g. AudioOutputError's sentence
            return True
        if type(e).__module__.startswith("soundfile") or "System error" in str(e):
            try:
                return shutil.disk_usage(out_dir).free < 256 * 1024
            except OSError:
                return False
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return False


_write = os.write  # the one write of a manifest line (tests stand a full disk in for it)


def append_line(fd: int, data: bytes) -> None:
    """Append one whole line with a single write; a short or failed write is cut back to where the file
    ended, so a reader never sees a torn line (a crash between the two leaves at most a torn last line,
    which read_manifest skips)."""
    end = os.lseek(fd, 0, os.SEEK_END)
    try:
        written = _write(fd, data)
        if written != len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError:
        os.ftruncate(fd, end)
        raise


def _cut_torn_tail(fd: int) -> None:
    """A run killed mid-write may have left a last line without its newline: cut it (read_manifest
    ignores it anyway), so the next record starts a line of its own instead of joining it."""
    size = os.lseek(fd, 0, os.SEEK_END)
    start = max(0, size - (1 << 16))
    os.lseek(fd, start, os.SEEK_SET)
    tail = os.read(fd, size - start)
    if not tail or tail.endswith(b"\n"):
        return
    cut = tail.rfind(b"\n")
    if cut >= 0:
        os.ftruncate(fd, start + cut + 1)
    elif start == 0:
        os.ftruncate(fd, 0)  # the whole file is one torn line


class _Manifest:
    """Append-only while running (every finished item is durable at once); compacted at the end to one
    record per id, in input order, via a temporary file and a rename (skipped when the disk is full: the
    appended file already says everything)."""

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / MANIFEST
        try:
            self.records = read_manifest(self.path)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            _cut_torn_tail(self._fd)
        except OSError as e:
            raise VoxError(f"cannot write the manifest {self.path}: {e.strerror or e}; choose another -o.",
                           2) from None

    def add(self, rec: dict[str, Any]) -> None:
        """Raises OSError (ENOSPC...) with the file as it was."""
        append_line(self._fd, (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
        self.records[rec["id"]] = rec

    def close(self, order: list[str]) -> None:
        os.close(self._fd)
        in_order = set(order)
        ordered = [self.records[i] for i in order if i in self.records]
        ordered += [r for i, r in self.records.items() if i not in in_order]
        tmp = self.path.with_name(self.path.name + PART_SUFFIX)
        try:
            tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ordered),
                           encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            if e.errno not in _NO_SPACE:
                raise


def run_batch(session: Speaker, items: list[BatchItem], template: RequestTemplate, opts: BatchOptions,
              console: Console | None = None) -> BatchResult:
    """Every item through `session.speak` (its check, frame cap and split, as `vox say`'s)."""
    started = time.monotonic()
    prepare_out_dir(opts.out_dir)
    ext = extension(opts.fmt)
    result = BatchResult(total=len(items))
    for item in items:  # a killed earlier run may have left partial files; they are never "done"
        (opts.out_dir / f"{item.id}.{ext}{PART_SUFFIX}").unlink(missing_ok=True)
        (opts.out_dir / f"{text_file(item.id)}{PART_SUFFIX}").unlink(missing_ok=True)

    manifest = _Manifest(opts.out_dir)
    todo: list[BatchItem] = []
    for item in items:
        name = f"{item.id}.{ext}"
        if not opts.force and is_finished(manifest.records.get(item.id), item, opts.out_dir, name,
                                          opts.show_text):
            result.skipped += 1
        else:
            todo.append(item)

    stop = threading.Event()
    work: queue.Queue[BatchItem | None] = queue.Queue()
    results: queue.Queue[dict[str, Any]] = queue.Queue()
    for item in todo:
        work.put(item)
    workers = [threading.Thread(target=_worker, args=(session, template, opts, work, results, stop),
                                name=f"vox-batch-{n}", daemon=True)
               for n in range(max(1, min(opts.concurrency, len(todo))))]
    for _ in workers:
        work.put(None)

    progress = _Progress(len(items), result.skipped, enabled=opts.progress, console=console)
    finished_now = 0

    def record(rec: dict[str, Any]) -> None:
        """Into the manifest, then into the counts. A record that cannot be written takes its file with
        it (no audio on disk that the manifest does not list); a full disk stops the batch."""
        try:
            manifest.add(rec)
        except OSError as e:
            if rec["status"] == "ok":
                (opts.out_dir / rec["file"]).unlink(missing_ok=True)
            if e.errno in _NO_SPACE:
                raise DiskFull(disk_full_message(opts.out_dir)) from None
            raise
        if rec["status"] == "ok":
            result.done += 1
            result.audio_s += rec["duration_s"]
        else:
            result.failed += 1
            result.errors.append(f"{rec['id']}: {rec['error']}")

    try:
        for w in workers:
            w.start()
        while finished_now < len(todo):
            try:
                rec = results.get(timeout=0.1)
            except queue.Empty:
                if not any(w.is_alive() for w in workers):
                    break
                continue
            finished_now += 1
            if rec.get("status") == "stopped":
                continue
            if rec.get("status") == "disk_full":
                raise DiskFull(disk_full_message(opts.out_dir))
            record(rec)
            progress.update(result, time.monotonic() - started)
            if opts.interrupt_after is not None and result.done + result.failed >= opts.interrupt_after:
                raise KeyboardInterrupt
    except (KeyboardInterrupt, DiskFull) as e:
        if isinstance(e, DiskFull):
            result.disk_full = str(e)
        else:
            result.interrupted = True
        stop.set()
        # one deadline for all: a worker stuck in a request the engine cannot stop is left behind
        # (daemon) rather than waited for (30 s each made Ctrl-C take minutes)
        deadline = time.monotonic() + opts.stop_bound_s
        for w in workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
        # Items that finished while we were stopping are real results: keep them (if there is room).
        while not results.empty():
            rec = results.get()
            if rec.get("status") in ("ok", "error"):
                try:
                    record(rec)
                except DiskFull as full:
                    result.disk_full = str(full)
            elif rec.get("status") == "disk_full" and result.disk_full is None:
                result.disk_full = disk_full_message(opts.out_dir)
    finally:
        progress.close()
        manifest.close([i.id for i in items])
        result.wall_s = time.monotonic() - started
    return result


def _worker(session: Speaker, template: RequestTemplate, opts: BatchOptions,
            work: queue.Queue, results: queue.Queue, stop: threading.Event) -> None:
    while (item := work.get()) is not None:
        if stop.is_set():
            results.put({"id": item.id, "status": "stopped"})
            continue
        results.put(_synthesize_item(session, template, opts, item, stop))


def _synthesize_item(session: Speaker, template: RequestTemplate,
                     opts: BatchOptions, item: BatchItem, stop: threading.Event) -> dict[str, Any]:
    name = f"{item.id}.{extension(opts.fmt)}"
    rec: dict[str, Any] = {"id": item.id, "source": item.source, "file": name,
                           "fingerprint": item.fingerprint(), "text": item.text[:200]}
    t0 = time.monotonic()
    if item.error:
        return {**rec, "file": None, "status": "error", "error": item.error}
    sink: FileSink | None = None
    texts: list[str] = []
    try:
        item_template = template.with_fields(voice=item.voice, language=item.language,
                                             instructions=item.instructions, seed=item.seed,
                                             cfg_scale=item.cfg_scale, options=item.options)
        sink = FileSink(opts.out_dir / name, session.spec.sample_rate, opts.fmt)
        shown = SpeakOptions(max_chars=opts.max_chars, on_text=texts.append if opts.show_text else None)
        stats = session.speak(item.text, item_template, sink.write, stop=stop, options=shown)
        if stats.samples == 0:
            raise SpeechFailed("the model produced no audio for this text.")
        sink.close()
        if opts.show_text:
            _write_text(opts.out_dir, item.id, texts, audio=opts.out_dir / name)
            rec["model_text"] = texts
        return {**rec, "status": "ok", "duration_s": round(stats.audio_s, 4),
                "ttfa_s": _round(stats.ttfa_s), "wall_s": round(stats.wall_s, 4),
                "segments": stats.segments, "error": None}
    except Stopped:
        _discard(sink)
        return {"id": item.id, "status": "stopped"}
    except Exception as e:  # noqa: BLE001 - one item's failure is recorded; the batch goes on
        full = out_of_space(e, opts.out_dir)  # asked before the .part goes (it frees space)
        _discard(sink)
        if full:  # not this item's fault: the batch stops, the item stays to do
            return {"id": item.id, "status": "disk_full"}
        known = isinstance(e, InputError | SpeechFailed | AudioOutputError)
        return {**rec, "file": None, "status": "error",
                "error": f"{item.source}: {e}" if known else f"{type(e).__name__}: {e}",
                "wall_s": round(time.monotonic() - t0, 4)}


def _write_text(out_dir: Path, item_id: str, texts: list[str], audio: Path) -> None:
    """`<id>.txt`, whole or not at all; when it cannot be written the item's audio goes too (the item
    fails and is redone, never half done)."""
    path = out_dir / text_file(item_id)
    part = path.with_name(path.name + PART_SUFFIX)
    try:
        part.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        audio.unlink(missing_ok=True)
        raise


def _discard(sink: FileSink | None) -> None:
    """Drop an item's partial file; closing it may fail again (a full disk), the unlink still runs."""
    if sink is None:
        return
    try:
        sink.abort()
    except Exception:  # noqa: BLE001 - the .part is gone either way (abort unlinks in a finally)
        pass


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


class _Progress:
    """rich progress on stderr: items, audio seconds, real-time factor."""

    def __init__(self, total: int, skipped: int, enabled: bool, console: Console | None = None) -> None:
        self._progress = None
        self._update: Callable[..., None] | None = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("[bold]vox batch"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                  console=console or Console(stderr=True), transient=False)
        self._task = self._progress.add_task("batch", total=total, completed=skipped,
                                             info=f"{skipped} already done" if skipped else "")
        self._skipped = skipped
        self._progress.start()

    def update(self, r: BatchResult, elapsed: float) -> None:
        if self._progress is None:
            return
        rtf = f" · RTF {elapsed / r.audio_s:.2f}" if r.audio_s else ""
        failed = f" · {r.failed} failed" if r.failed else ""
        self._progress.update(self._task, completed=self._skipped + r.done + r.failed,
                              info=f"{r.audio_s:.1f} s audio{rtf}{failed}")

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
