"""Speech tokenizer builder entry point used by `tiny.py` (implemented in `tiny_audio.py`)."""

from .tiny_audio import build_speech_tokenizer, build_speech_tokenizer_weights

__all__ = ["build_speech_tokenizer", "build_speech_tokenizer_weights"]
