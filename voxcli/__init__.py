"""voxcli: streaming text-to-speech for speech language models on an urgency-aware engine."""

__version__ = "0.1.0"
