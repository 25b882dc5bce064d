"""The errors a model program raises on purpose (never a bare torch traceback); models/base.py re-exports
them, so `from models.base import InputError` keeps working."""

from __future__ import annotations


class ModelError(Exception):
    """Base of the errors a model program raises on purpose (never a bare torch traceback)."""


class InputError(ModelError):
    """The request cannot be served by this model: empty text, unknown voice, bad reference audio..."""


class CheckpointError(ModelError):
    """A checkpoint is missing, incomplete or does not match the architecture (names key and path)."""


