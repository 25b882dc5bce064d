"""The speech-token LM + flow-matching TTS that upstream's CosyVoice models (2 and 3) are built on, as a
family-neutral library: the model program base (program.py) both families' programs derive from, the
paged Qwen2 speech LM (lm.py) and its sampling, the codec's hop schedule and slots (codec.py), the
checkpoint, yaml and config readers, the English text frontend, voice cloning through the checkpoint's
ONNX models, the spec, and the tiny-checkpoint and tiny-ONNX writers. Each family (models/cosyvoice2,
models/cosyvoice3) keeps its flow estimator, its vocoder and what its generation does differently."""
