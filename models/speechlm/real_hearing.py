"""A real-size random checkpoint that hears: Bagpiper's layout (8 X-Codec streams, delay-interleaved, audio
input through X-Codec's encoder) on OpusLM-Dialogue's backbone size (SmolLM2-1.7B's published config.json:
hidden 2048, 24 layers, 32 heads, MLP 8192, vocabulary 49152, rope theta 130000; lm_head kept untied here,
+0.1 B parameters) with the released X-Codec's sizes (hf-audio/xcodec-hubert-general: HuBERT-base semantic
model, DAC encoder width 64 over 8, 5, 4, 2, acoustic latent 256, decoder width 1024, 8 x 1024 codebooks
of dim 1024 at 4 kbps). OpusLM-Dialogue's own audio input is an SSL stream voxcli cannot build (audio_in.py),
so this is the size that can be measured hearing. Weights random; backbone bfloat16 as released.
"""

from __future__ import annotations

from pathlib import Path

from .tiny import build_tiny
from .tiny_opuslm import SMOLLM2_1_7B

BACKBONE = dict(SMOLLM2_1_7B, architectures=["LlamaForCausalLM"], tie_word_embeddings=False, head_dim=64)
XCODEC = {"model_type": "xcodec", "sample_rate": 16000, "codebook_size": 1024,
          "target_bandwidths": [0.5, 1, 1.5, 2, 4],
          "acoustic_model_config": {"downsampling_ratios": [8, 5, 4, 2], "upsampling_ratios": [8, 5, 4, 2],
                                    "decoder_hidden_size": 1024, "hidden_size": 256,
                                    "encoder_hidden_size": 64},
          "semantic_model_config": {}}  # HuBERT-base (transformers' defaults)
INFERENCE = {"enforce_modality": ["text"],
             "text": {"temperature": 0.0, "topk": 20, "cfg": 1, "max_step": 64, "min_step": 1},
             "dtype": "bfloat16"}


def build_real_hearing(out: Path, seed: int = 0) -> Path:
    return build_tiny(Path(out), seed=seed, inference=INFERENCE, weight_std=0.02, backbone=BACKBONE,
                      xcodec=XCODEC)
