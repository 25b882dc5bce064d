"""HiFT (HiFi-GAN + iSTFT with a harmonic sine source) vocoder parts that CosyVoice 2's HiFTGenerator and
CosyVoice 3's causal CausalHiFTGenerator share: the configuration, weight-norm folding, Snake, the source
module's projection and the upsample/residual/iSTFT body. Each family keeps its own convolutions (centred
or causal), f0 predictor and source signal."""
