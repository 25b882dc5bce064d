"""Did the client read what we streamed? The difference between "done" and "client stopped reading".

A response body handed to the transport is not yet read by the client: loopback sockets buffer
megabytes, so a client that read 100 KB of a 3.8 MB stream and then stopped looks, from the app, like
one that read it all. What is still ours is measurable: the transport's write buffer plus the kernel's
send queue (Linux TIOCOUTQ: bytes the peer has not acknowledged, which on a full receive window means
bytes its reader has not taken). While that number goes down the client is reading; when it stays
put for `stall_s`, it stopped.

The socket is measured through a duplicate of its descriptor, held until the outcome is known: when
the response ends on a `Connection: close` (or the keep-alive timer closes it), uvicorn closes its own
descriptor at once, and the unread bytes must still be counted (they counted as read: `done`). While
the duplicate is open the connection stays up, so what the client still reads is still measured; a
reset by the peer (TCP state CLOSE) ends it with what was unread then.

Two places ask: before each chunk (`writable`: at most `max_unread` bytes unread; a client that stopped
reading mid-stream is dropped
after `stall_s` instead of holding its connection and the job's audio forever) and after the last one
(`delivered`: the outcome counts "done" only once the client has everything). Without a transport in
the scope (another server, the test client), every stream counts as delivered.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from typing import Any

from voxcli.server.protocol import TRANSPORT_KEY

try:
    import fcntl
    import termios

    _OUTQ: int | None = termios.TIOCOUTQ
except (ImportError, AttributeError):  # not Linux/BSD: only the transport's own buffer is known
    _OUTQ = None

POLL_S = 0.05
# A client that closes while this much is still unread had stopped reading (a reader draining at its
# pace takes well under a poll to empty a queue this size on loopback).
LEFT_UNREAD = 256 * 1024


_TCP_CLOSE = 7  # linux/tcp_states.h: what a connection becomes once the peer reset it


def _dup_socket(transport: Any) -> socket.socket | None:
    """Our own descriptor of the transport's socket (None where the queue cannot be measured)."""
    if _OUTQ is None or transport is None:
        return None
    sock = transport.get_extra_info("socket")
    try:
        return socket.socket(fileno=os.dup(sock.fileno())) if sock is not None else None
    except (OSError, ValueError):
        return None


def _outq(sock: socket.socket) -> int:
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0\0\0\0"))[0]  # type: ignore[arg-type]
    except (OSError, ValueError):
        return 0


def _was_reset(sock: socket.socket) -> bool:
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] == _TCP_CLOSE
    except (OSError, ValueError, AttributeError):
        return False


def kernel_unsent(transport: Any) -> int:
    """Bytes in the socket's send queue the peer has not acknowledged (0 where unknown)."""
    if _OUTQ is None:
        return 0
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), _OUTQ, b"\0\0\0\0")
    except (OSError, ValueError):
        return 0
    return struct.unpack("i", raw)[0]


class Delivery:
    def __init__(self, scope: dict[str, Any], stall_s: float, max_unread: int = 1 << 20) -> None:
        self.transport = scope.get("extensions", {}).get(TRANSPORT_KEY)
        self.stall_s = stall_s
        # Bytes the client may leave unread before the next chunk waits for it to read some: the kernel's
        # send buffer grows to megabytes on loopback, which would hide a stopped reader until the end
        # (1 MiB is 22 s of 24 kHz PCM16: a player reading at playback speed never waits long).
        self.max_unread = max_unread
        self.stalled = False
        self._sock = _dup_socket(self.transport)

    def unsent(self) -> int:
        t = self.transport
        if t is None:
            return 0
        if self._sock is not None:  # measurable after uvicorn closed its descriptor too
            return t.get_write_buffer_size() + _outq(self._sock)
        if t.is_closing():
            return 0
        return t.get_write_buffer_size() + kernel_unsent(t)

    def close(self, reset: bool = False) -> None:
        """Let the connection go (our descriptor was the last): `reset` drops what is unread."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    async def writable(self) -> bool:
        """Wait while the transport holds more than its high-water mark; False (and the connection
        dropped) when the client read nothing for `stall_s`."""
        t = self.transport
        if t is None:
            return True
        high = t.get_write_buffer_limits()[1]
        return await self._wait(lambda: t.get_write_buffer_size() <= high
                                and self.unsent() - t.get_write_buffer_size() <= self.max_unread) != "stalled"

    async def delivered(self) -> bool:
        """Wait until the client has everything; False when it stopped reading (the connection is then
        dropped) or went away leaving more than `LEFT_UNREAD` bytes unread."""
        if self.transport is None:
            return True
        try:
            return await self._wait(lambda: self.unsent() == 0) == "ok"
        finally:
            self.close()

    def _gone(self) -> bool:
        """The connection can no longer be measured: reset by the peer, or closed without our
        descriptor (then only the old guess, `LEFT_UNREAD`, is left)."""
        if self._sock is not None:
            return _was_reset(self._sock)
        return self.transport.is_closing()

    async def _wait(self, done: Any) -> str:
        """"ok", "stalled" (no progress for stall_s: dropped) or "left" (gone with much unread)."""
        t = self.transport
        last, since = self.unsent(), time.monotonic()
        while not self._gone() and not done():
            await asyncio.sleep(POLL_S)
            if self._gone():
                break
            now = self.unsent()
            if now < last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since > self.stall_s:
                self.stalled = True
                t.abort()  # frees the connection; the caller cancels the job
                self.close(reset=True)
                return "stalled"
        if self._gone() and last > (0 if self._sock is not None else LEFT_UNREAD):
            self.stalled = True
            return "left"
        return "ok"
