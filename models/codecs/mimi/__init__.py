"""Kyutai's Mimi codec: the decoder CSM and Kyutai TTS stream through, the encoder that Qwen3-TTS's
voice cloning and CSM's reference clips use, the checkpoint layouts it comes in, and its simulated cost."""
