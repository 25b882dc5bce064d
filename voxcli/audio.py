"""Audio out: the formats we write, and sinks that take float32 mono PCM chunks as they stream.

    FORMATS      the one table of audio formats (name, file suffixes, media type, streamable, encoder)
                 that `vox say`, `vox batch`, the HTTP API, its WebSocket and `Audio.save` all read: a new
                 format is one `AudioFormat` entry here
    FileSink     wav / flac / mp3 / opus / ogg through libsndfile, or headerless 16-bit `pcm`; the
                 audio goes to `<name>.part` while it streams and is renamed to `<name>` only when
                 complete, so a file under its final name is always whole.
    StreamSink   stdout (or any binary stream): a WAV header whose sizes say "unknown length" (the
                 convention streaming WAV writers use; readers read to the end of the stream), or raw
                 16-bit little-endian PCM. A seekable stream gets the real sizes patched in at the end.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np


@dataclass(frozen=True)
class AudioFormat:
    """One audio format, everything every front end needs to know about it."""

    name: str  # what --format, response_format and `Audio.save(format=)` take
    suffixes: tuple[str, ...]  # file name endings that mean this format; the first is the one we write
    media_type: str  # the HTTP Content-Type of a body in this format
    # Can start before the audio's length is known (stdout, a streamed HTTP body, the WebSocket)?
    # Streamed formats are 16-bit PCM, headed by `stream_header` (an open-ended WAV header) or headerless.
    streamable: bool
    encoder: tuple[str, str] | None  # libsndfile (format, subtype); None = headerless PCM16, written by us
    served: bool = True  # offered as the HTTP API's response_format (where libsndfile can encode it)
    stream_header: bool = False  # a streamed body starts with the open-ended WAV header
    sample_rates: tuple[int, ...] = ()  # the only rates the encoder stores; () = any

    @property
    def extension(self) -> str:
        return self.suffixes[0].lstrip(".")

    def encode(self, pcm: np.ndarray, sample_rate: int) -> bytes:
        """A complete file of the whole waveform (a WAV with exact sizes; 16-bit ones rounded by to_int16)."""
        if self.encoder is None:
            return to_int16(pcm).tobytes()
        import soundfile as sf

        buf = io.BytesIO()
        data = to_int16(pcm) if self.encoder[1] == "PCM_16" else np.asarray(pcm, dtype=np.float32)
        sf.write(buf, data, sample_rate, format=self.encoder[0], subtype=self.encoder[1])
        return buf.getvalue()


FORMATS: dict[str, AudioFormat] = {f.name: f for f in (
    AudioFormat("wav", (".wav", ".wave"), "audio/wav", streamable=True, encoder=("WAV", "PCM_16"),
                stream_header=True),
    AudioFormat("flac", (".flac",), "audio/flac", streamable=False, encoder=("FLAC", "PCM_16")),
    AudioFormat("mp3", (".mp3",), "audio/mpeg", streamable=False, encoder=("MP3", "MPEG_LAYER_III")),
    AudioFormat("opus", (".opus",), "audio/opus", streamable=False, encoder=("OGG", "OPUS"), served=False,
                sample_rates=(8000, 12000, 16000, 24000, 48000)),
    AudioFormat("ogg", (".ogg",), "audio/ogg", streamable=False, encoder=("OGG", "VORBIS"), served=False),
    AudioFormat("pcm", (".pcm", ".raw"), "audio/pcm", streamable=True, encoder=None),
)}
STREAMABLE = tuple(name for name, f in FORMATS.items() if f.streamable)


def format_for_suffix(suffix: str) -> str | None:
    """The format a file name ending names (".wave" -> "wav"), or None."""
    suffix = suffix.lower()
    return next((f.name for f in FORMATS.values() if suffix in f.suffixes), None)


PART_SUFFIX = ".part"


class AudioOutputError(Exception):
    """An output that cannot be written; the message says what and what to do."""


class AudioFormatError(AudioOutputError):
    """The format asked for cannot be written where asked (unknown, not encodable here, or at odds with the
    file name): a usage mistake, refused before anything is generated."""


class DiskFullError(AudioOutputError):
    """The output's file system has no room left (the message names the disk and its free space)."""


NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# libsndfile reports a failed write only as "System error.": it is a full disk when less than this is free
NEARLY_FULL_BYTES = 256 * 1024


def _free_bytes(directory: Path) -> int | None:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def disk_full(e: BaseException, directory: Path) -> DiskFullError | None:
    """The sentence for a write that failed on a full disk (None when `e` is something else): an OSError
    saying so, or a libsndfile error while `directory`'s file system is nearly full."""
    if isinstance(e, OSError) and e.errno in NO_SPACE_ERRNOS:
        full = True
    elif isinstance(e, RuntimeError):  # soundfile's LibsndfileError
        free = _free_bytes(directory)
        full = free is not None and free < NEARLY_FULL_BYTES
    else:
        full = False
    if not full:
        return None
    free = _free_bytes(directory)
    left = "free space unknown" if free is None else f"{free / 1024:.0f} KB free"
    return DiskFullError(f"the disk holding {directory} is full ({left}); free some space or choose "
                         "another output.")


class AudioSink(Protocol):
    def write(self, pcm: np.ndarray) -> None: ...
    def close(self) -> None: ...  # finish: the output is complete and valid
    def abort(self) -> None: ...  # give up: remove anything that could look complete


def to_int16(pcm: np.ndarray) -> np.ndarray:
    """float32 [-1, 1] -> int16, clipped (a codec can overshoot slightly)."""
    return np.round(np.clip(np.asarray(pcm, dtype=np.float32), -1.0, 1.0) * 32767.0).astype("<i2")


def supported_formats() -> list[str]:
    """Format names usable here: mp3/opus/ogg only when this libsndfile can encode them."""
    import soundfile as sf

    available = sf.available_formats()
    names = []
    for name, f in FORMATS.items():
        if f.encoder is None:
            names.append(name)
        elif f.encoder[0] in available and f.encoder[1] in sf.available_subtypes(f.encoder[0]):
            names.append(name)
    return names


def resolve_format(output: str | None, fmt: str | None, raw: bool) -> str:
    """The format to write: --raw, then --format, then the output's suffix, then wav."""
    if raw:
        if fmt not in (None, "pcm"):
            raise AudioFormatError(f"--raw writes headerless PCM; it cannot be combined with --format {fmt}.")
        named = format_for_suffix(Path(output).suffix) if output and output != "-" else None
        if named not in (None, "pcm"):  # headerless PCM in a .wav would be a file no player opens right
            raise AudioFormatError(f"--raw writes headerless PCM, which {output!r} ({named}) would not be; "
                                   f"name the file .{extension('pcm')} or drop --raw.")
        return "pcm"
    if fmt is not None:
        fmt = fmt.lower()
        if fmt not in FORMATS:
            raise AudioFormatError(f"unknown audio format {fmt!r}; use one of "
                                   f"{', '.join(supported_formats())}.")
        if fmt not in supported_formats():
            raise AudioFormatError(f"this installation's libsndfile cannot encode {fmt}; use one of "
                                   f"{', '.join(supported_formats())}.")
        named = format_for_suffix(Path(output).suffix) if output and output != "-" else None
        if named is not None and named != fmt:
            raise AudioFormatError(f"--format {fmt} does not match the file name {output!r} ({named}); "
                                   f"name the file .{extension(fmt)} or drop --format.")
        return fmt
    if output and output != "-":
        suffix = Path(output).suffix.lower()
        named = format_for_suffix(suffix)
        if named is not None:
            return resolve_format(None, named, False)
        if suffix:
            raise AudioFormatError(f"cannot tell the audio format from the file name {output!r}; add "
                                   f"--format ({', '.join(supported_formats())}) or use a known suffix.")
    return "wav"


def extension(fmt: str) -> str:
    """The file name ending (without the dot) we write `fmt` under."""
    return FORMATS[fmt].extension


class FileSink:
    """Progressive file writer: `<path>.part` while streaming, atomically renamed on `close()`."""

    def __init__(self, path: Path, sample_rate: int, fmt: str = "wav") -> None:
        self.path = Path(path)
        self.sample_rate = sample_rate
        self.fmt = fmt
        self.part = self.path.with_name(self.path.name + PART_SUFFIX)
        self.samples = 0
        rates = FORMATS[fmt].sample_rates
        if rates and sample_rate not in rates:
            raise AudioFormatError(f"{fmt} cannot store {sample_rate} Hz audio; use wav or flac.")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if FORMATS[fmt].encoder is None:
                self._raw: BinaryIO | None = open(self.part, "wb")  # noqa: SIM115 - closed in close()/abort()
                self._sf = None
            else:
                import soundfile as sf

                encoder = FORMATS[fmt].encoder
                assert encoder is not None
                self._raw = None
                self._sf = sf.SoundFile(str(self.part), "w", samplerate=sample_rate, channels=1,
                                        format=encoder[0], subtype=encoder[1])
        except BaseException as e:  # the .part may exist already (a full disk fails its header): it goes
            self.part.unlink(missing_ok=True)
            full = disk_full(e, self.path.parent)
            if full is not None:
                raise full from None
            if isinstance(e, OSError):
                raise AudioOutputError(f"cannot write {self.path}: {e.strerror or e}; choose a writable "
                                       "location.") from None
            if isinstance(e, RuntimeError):  # libsndfile's "Error opening ..."
                raise AudioOutputError(f"cannot write {self.path}: {e}; choose a writable "
                                       "location.") from None
            raise  # interrupted (SIGTERM/Ctrl-C) between creating the .part and returning

    def write(self, pcm: np.ndarray) -> None:
        pcm = np.asarray(pcm, dtype=np.float32).reshape(-1)
        if not pcm.size:
            return
        try:
            self._write(pcm)
        except (OSError, RuntimeError) as e:
            full = disk_full(e, self.path.parent)
            if full is None:
                raise
            raise full from e  # said as the disk's state, not as the sentence being spoken's failure
        self.samples += pcm.size

    def _write(self, pcm: np.ndarray) -> None:
        if self._raw is not None:
            self._raw.write(to_int16(pcm).tobytes())
            self._raw.flush()  # progressive: readers of the .part file see audio as it streams
        elif self._sf is not None:
            # 16-bit formats get our own rounding so a file and the stdout stream hold the same samples
            # (libsndfile's float->int conversion rounds differently); lossy codecs take float.
            self._sf.write(to_int16(pcm) if self._sf.subtype == "PCM_16" else pcm)
            self._sf.flush()

    @property
    def duration_s(self) -> float:
        return self.samples / self.sample_rate

    def _close_handles(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        if self._sf is not None:
            self._sf.close()
            self._sf = None

    def close(self) -> None:
        self._close_handles()
        os.replace(self.part, self.path)  # atomic on one file system

    def abort(self) -> None:
        try:
            self._close_handles()
        finally:
            self.part.unlink(missing_ok=True)


def wav_header(sample_rate: int, data_bytes: int | None) -> bytes:
    """A 44-byte PCM16 mono WAV header. `data_bytes=None`: length unknown, both sizes 0xFFFFFFFF —
    what streaming writers emit when they cannot seek back (readers then read until end of stream)."""
    data_size = 0xFFFFFFFF if data_bytes is None else data_bytes
    riff_size = 0xFFFFFFFF if data_bytes is None else 36 + data_bytes
    return (b"RIFF" + struct.pack("<I", riff_size) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
            + b"data" + struct.pack("<I", data_size))


def stream_prefix(fmt: str, sample_rate: int) -> bytes:
    """What a stream in `fmt` starts with: the open-ended WAV header, or nothing for raw PCM."""
    return wav_header(sample_rate, None) if FORMATS[fmt].stream_header else b""


class StreamSink:
    """WAV (unknown-length header) or raw PCM16 onto a binary stream such as stdout."""

    def __init__(self, stream: BinaryIO, sample_rate: int, fmt: str = "wav") -> None:
        if not FORMATS[fmt].streamable:
            raise AudioOutputError(f"{fmt} cannot be streamed to standard output; use --format wav or "
                                   "--raw there, or give a file name with -o.")
        self.stream = stream
        self.sample_rate = sample_rate
        self.fmt = fmt
        self.samples = 0
        self._header_at: int | None = None
        if FORMATS[fmt].stream_header:
            self._header_at = _tell(stream)
            self._put(stream_prefix(fmt, sample_rate))

    def _put(self, data: bytes) -> None:
        try:
            self.stream.write(data)
            self.stream.flush()
        except BrokenPipeError:
            raise AudioOutputError("the program reading vox's output closed the pipe; audio "
                                   "stopped.") from None

    def write(self, pcm: np.ndarray) -> None:
        data = to_int16(np.asarray(pcm, dtype=np.float32).reshape(-1))
        if data.size:
            self._put(data.tobytes())
            self.samples += data.size

    def close(self) -> None:
        if self._header_at is None:
            return
        # A regular file behind stdout (vox say - -o - > x.wav) gets exact sizes; a pipe keeps the
        # unknown-length header, which players and libsndfile accept.
        header = wav_header(self.sample_rate, self.samples * 2)
        try:
            self.stream.flush()
            if _appends(self.stream):  # `>> x.wav`: every write lands at the end; write through a new handle
                with open(f"/proc/self/fd/{self.stream.fileno()}", "r+b") as again:
                    again.seek(self._header_at)
                    again.write(header)
                return
            end = self.stream.tell()
            self.stream.seek(self._header_at)
            self.stream.write(header)
            self.stream.seek(end)
            self.stream.flush()
        except (OSError, ValueError, AttributeError):
            pass

    def abort(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _appends(stream: BinaryIO) -> bool:
    """Whether `stream`'s file was opened for appending (O_APPEND: a seek does not move where writes go)."""
    try:
        import fcntl

        return bool(fcntl.fcntl(stream.fileno(), fcntl.F_GETFL) & os.O_APPEND)
    except (OSError, ValueError, AttributeError, ImportError):
        return False


def _tell(stream: BinaryIO) -> int | None:
    try:
        if stream.seekable():
            return stream.tell()
    except (OSError, ValueError, AttributeError):
        pass
    return None


def open_sink(output: str, sample_rate: int, fmt: str, stdout: BinaryIO | None = None) -> AudioSink:
    """`-` = the binary stdout (or `stdout` given), anything else a file path."""
    if output == "-":
        import sys

        return StreamSink(stdout if stdout is not None else sys.stdout.buffer, sample_rate, fmt)
    return FileSink(Path(output), sample_rate, fmt)
