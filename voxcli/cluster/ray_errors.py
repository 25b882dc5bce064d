"""How an exception that came back through Ray reads in one sentence (the replica's own message)."""

from __future__ import annotations


def ray_reason(e: BaseException) -> str:
    """The replica's own message for an exception that came back through Ray (not its traceback)."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        e = cause
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def ray_cause(e: BaseException) -> BaseException:
    """The exception a replica raised, unwrapped from Ray's error (`e` itself if it carries none)."""
    cause = getattr(e, "cause", None)
    return cause if isinstance(cause, BaseException) else e
