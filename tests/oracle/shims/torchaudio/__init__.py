"""A stand-in for torchaudio in the Higgs oracle venv (tests/oracle/run_higgs.py puts this folder first on
sys.path). transformers' HiggsAudioV2Tokenizer imports torchaudio at module level, but torchaudio's wheels
for torch 2.11 fail to load their .so under torch 2.13. Decoding never touches it; only the semantic branch of
`encode` resamples 24 kHz -> 16 kHz, which this stand-in refuses loudly rather than approximating."""

from . import functional  # noqa: F401

__version__ = "0.0.0+voxcli-shim"
