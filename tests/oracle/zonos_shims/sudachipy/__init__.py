"""A stand-in for SudachiPy in the Zonos oracle venv (tests/oracle/run_zonos.py puts this folder on sys.path).
Upstream's conditioning.py builds a SudachiPy tokenizer with the "full" dictionary at import time (a default
argument) although only Japanese text uses it; the parity cases are not Japanese, and sudachidict-full is a
large download. Using the tokenizer raises rather than approximating."""


class SplitMode:
    A = "A"


class _Refuses:
    def tokenize(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("the Zonos oracle has no SudachiPy: Japanese text is not part of its parity cases")


class Dictionary:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def create(self) -> _Refuses:
        return _Refuses()
