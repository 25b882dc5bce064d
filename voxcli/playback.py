"""Speaker playback with a jitter buffer.

Chunks arrive from the engine in bursts; the speaker consumes audio at a fixed rate. The player keeps a
small buffer (`prebuffer_s`) before it starts, and again after any underrun, so uneven delivery turns
into one short wait instead of repeated crackles. A feeder thread writes fixed-size blocks to the output
device, whose blocking `write` paces it to real time.

`sounddevice` (and the PortAudio library under it) is imported only when playback is asked for, and
the output device comes from a factory so tests can substitute a fake device.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np


class PlaybackError(Exception):
    """Audio cannot be played here; the message says why and what to do instead."""


class OutputDevice(Protocol):
    def start(self) -> None: ...
    def write(self, pcm: np.ndarray) -> None: ...  # float32 mono; blocks while the device is full
    def close(self) -> None: ...


DeviceFactory = Callable[[int], OutputDevice]  # sample_rate -> an opened, not yet started device


def _sounddevice() -> Any:
    """Import sounddevice and make sure an output device exists, or say why playback cannot work."""
    try:
        import sounddevice as sd
    except OSError:
        raise PlaybackError("cannot play audio: the PortAudio library is not installed (Debian/Ubuntu: "
                            "sudo apt install libportaudio2; macOS: brew install portaudio); write a "
                            "file with -o instead.") from None
    except ImportError:
        raise PlaybackError("cannot play audio: the sounddevice package is missing; install it with "
                            "pip install 'voxcli[play]', or write a file with -o instead.") from None
    try:
        sd.query_devices(kind="output")
    except (sd.PortAudioError, ValueError) as e:
        raise PlaybackError(f"cannot play audio: no usable audio output device ({e}); connect one or "
                            "write a file with -o instead.") from None
    return sd


class _SoundDeviceOutput:
    def __init__(self, sample_rate: int) -> None:
        sd = _sounddevice()
        try:
            self._stream = sd.OutputStream(samplerate=sample_rate, channels=1, dtype="float32")
        except (sd.PortAudioError, ValueError) as e:
            raise PlaybackError(f"cannot play audio: the output device refused {sample_rate} Hz mono "
                                f"({e}); write a file with -o instead.") from None

    def start(self) -> None:
        self._stream.start()

    def write(self, pcm: np.ndarray) -> None:
        self._stream.write(np.ascontiguousarray(pcm, dtype=np.float32).reshape(-1, 1))

    def close(self) -> None:
        try:
            self._stream.stop()  # plays what is queued, then stops
        finally:
            self._stream.close()


def sounddevice_factory(sample_rate: int) -> OutputDevice:
    return _SoundDeviceOutput(sample_rate)


# Tests replace this (monkeypatch) with a fake device factory.
default_device_factory: DeviceFactory = sounddevice_factory


def check_playback() -> None:
    """Fail fast (before a model loads) when the default speaker output cannot work here."""
    if default_device_factory is sounddevice_factory:
        _sounddevice()


class Player:
    """feed() PCM as it arrives, finish() to play out the rest, abort() to stop at once."""

    def __init__(self, sample_rate: int, factory: DeviceFactory | None = None, prebuffer_s: float = 0.25,
                 block_s: float = 0.05) -> None:
        self.sample_rate = sample_rate
        self.device = (factory or default_device_factory)(sample_rate)
        self.prebuffer = max(1, int(prebuffer_s * sample_rate))
        self.block = max(1, int(block_s * sample_rate))
        self.underruns = 0  # times the buffer ran dry mid-stream (a stall the listener could hear)
        self.first_write_at: float | None = None
        self._chunks: deque[np.ndarray] = deque()
        self._buffered = 0
        self._ended = False
        self._aborted = False
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="vox-playback", daemon=True)
        self._started = False

    def feed(self, pcm: np.ndarray) -> None:
        self._raise_if_failed()
        pcm = np.asarray(pcm, dtype=np.float32).reshape(-1)
        if not pcm.size:
            return
        with self._cond:
            self._chunks.append(pcm)
            self._buffered += pcm.size
            self._cond.notify_all()
        if not self._started:
            self._started = True
            self._thread.start()

    def finish(self) -> None:
        """Mark the end of the audio and block until it has been handed to the device."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()
        if self._started:
            self._thread.join()
        self.device.close()
        self._raise_if_failed()

    def abort(self) -> None:
        with self._cond:
            self._aborted = True
            self._ended = True
            self._cond.notify_all()
        if self._started:
            self._thread.join(timeout=2.0)
        try:
            self.device.close()
        except Exception:  # noqa: BLE001 - already stopping because of another error
            pass

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise PlaybackError(f"audio playback failed: {self._error}") from self._error

    def _take_block(self) -> np.ndarray | None:
        """Next block to play, waiting for the jitter buffer to fill when it ran dry. None = done."""
        with self._cond:
            if self._buffered == 0 and not self._ended and self._playing:
                self.underruns += 1
            if self._buffered == 0 or not self._playing:
                # (Re)buffer: wait for `prebuffer` samples or the end of the stream.
                self._cond.wait_for(lambda: self._aborted or self._ended or self._buffered >= self.prebuffer)
                self._playing = True
            if self._aborted or self._buffered == 0:
                return None
            parts, need = [], self.block
            while need and self._chunks:
                head = self._chunks[0]
                if head.size <= need:
                    parts.append(self._chunks.popleft())
                    need -= head.size
                else:
                    parts.append(head[:need])
                    self._chunks[0] = head[need:]
                    need = 0
            out = np.concatenate(parts)
            self._buffered -= out.size
            return out

    _playing = False

    def _run(self) -> None:
        try:
            self.device.start()
            while (block := self._take_block()) is not None:
                if self.first_write_at is None:
                    self.first_write_at = time.monotonic()
                self.device.write(block)
        except BaseException as e:  # noqa: BLE001 - reported to the feeding thread
            self._error = e
