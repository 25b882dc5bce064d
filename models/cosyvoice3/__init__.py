"""CosyVoice 3 (FunAudioLLM): a Qwen2 speech-token LM, a flow-matching DiT codec and a causal HiFT vocoder."""
