"""The CLI's own error: a sentence for the user and an exit code (no traceback unless --debug)."""

from __future__ import annotations


class VoxError(Exception):
    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
