"""Oracle for the Dia DAC codec (runs in the oracle venv): transformers' own DacModel.

usage: run_dac.py IN.pt OUT.pt
IN.pt: {"out_dir": str, "sizes": dict (DacConfig kwargs), "seed": int, "codes": LongTensor [B, n_q, T],
        "clips": [float32 [n_i]], "ours_dir": str (a folder written by the project's build_tiny_dac)}
Writes out_dir/plain (DacModel(DacConfig(sizes)) with re-drawn live random weights, save_pretrained) and
out_dir/weight_norm (the same model after apply_weight_norm(), so the file holds the parametrization keys).
OUT.pt: {"plain_wav": DacModel.decode(audio_codes=codes) [B, T*hop], "wn_wav": the same after
         apply_weight_norm(), "clip_codes": [[T_i, n_q]] as DiaProcessor encodes a clip (pad to a whole hop,
         then DacModel.encode), "ours_info": from_pretrained loading info of ours_dir,
         "ours_wav": decode(codes) with ours_dir loaded by transformers}
"""

import math
import sys

import torch
from transformers import DacConfig, DacModel
from transformers.models.dia.feature_extraction_dia import DiaFeatureExtractor


def live_weights(model: DacModel, seed: int) -> None:
    """transformers' init (std 0.02, zero bias) gives a near-silent decoder where any waveform bound is
    trivially met; re-draw every tensor at scales that keep activations O(1) and tanh unsaturated."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            elif "codebook" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[1] * p.shape[2] if "conv_t" not in name else p.shape[0] * 2
                gain = 0.25 if ".conv2." in name and "res_unit" in name else 1.0
                if name == "decoder.conv2.weight":
                    gain = 0.1
                p.copy_(gain * torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))


def encode_like_dia(model: DacModel, clip: torch.Tensor, sr: int, hop: int) -> torch.Tensor:
    """DiaProcessor's voice-clone path for one clip: pad to a whole hop, then DacModel.encode."""
    fe = DiaFeatureExtractor(sampling_rate=sr, hop_length=hop)
    inp = fe(clip.numpy(), sampling_rate=sr, return_tensors="pt")
    n = math.ceil(int(inp["padding_mask"][0].sum()) / hop) * hop
    audio = inp["input_values"][0][None, ..., :n]
    return model.encode(audio).audio_codes[0].T


def main(inp: str, out: str) -> None:
    torch.set_num_threads(1)  # one thread: no thread-team-dependent reduction order in the waveforms
    data = torch.load(inp, weights_only=False)
    torch.manual_seed(data["seed"])
    cfg = DacConfig(**data["sizes"])
    model = DacModel(cfg).eval()
    live_weights(model, data["seed"])
    res = {}
    with torch.no_grad():
        model.save_pretrained(data["out_dir"] + "/plain")
        res["plain_wav"] = model.decode(audio_codes=data["codes"]).audio_values
        sr, hop = cfg.sampling_rate, cfg.hop_length
        res["clip_codes"] = [encode_like_dia(model, c, sr, hop) for c in data["clips"]]
        model.apply_weight_norm()
        model.save_pretrained(data["out_dir"] + "/weight_norm")
        res["wn_wav"] = model.decode(audio_codes=data["codes"]).audio_values
        ours, info = DacModel.from_pretrained(data["ours_dir"], output_loading_info=True)
        res["ours_info"] = {k: [str(x) for x in v] for k, v in info.items()}
        res["ours_wav"] = ours.eval().decode(audio_codes=data["codes"]).audio_values
    torch.save(res, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
