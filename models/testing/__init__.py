"""Builders and reference paths for tests and benchmarks, kept out of the serving path (nothing under
models/<family>/ imports this package at serving time; the demo builder uses the reference path once,
for its EOS calibration, when the demo checkpoint is first built).

    qwen3_tts_reference   batch-1 reference path through the program's own stages (parity, calibration)
    qwen3_tts_sizes       config.json dicts of the real Qwen3-TTS 0.6B / 1.7B architectures
    qwen3_tts_realsize    real-size random checkpoints (`build_tiny(size="1.7b")` lands here)
"""
