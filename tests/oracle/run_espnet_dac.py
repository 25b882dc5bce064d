"""ESPnet's DAC codec (espnet==202611 `espnet2/gan_codec/dac/dac.py`), the speechlm oracle venv (with
einops, typeguard, humanfriendly, torch_complex: scripts/setup_oracle_speechlm.sh).

    run_espnet_dac.py OUT SPECS.json RESULT.pt     (SPECS: a list; spec i is built in OUT/i)

Builds ESPnet's own `ESPnetGANCodecModel(DAC(...))` with the spec's generator_params and random weights
(codebooks, weight-norm magnitudes, Snake alphas and biases drawn so that nothing sits at its init),
writes it as an espnet_model_zoo pack (OUT/meta.yaml -> exp/codec/config.yaml + exp/codec/model.pth, the
GAN-codec model's state dict), rebuilds the model from that config and state dict as
`GANCodecTask.build_model_from_file` does (DAC(**codec_conf), load_state_dict), and decodes the spec's
code sequences with the model's `decode` (codes [N_stream, B, T], what DiscreteAudioIO calls).
The discriminator and the losses are never used: torchaudio and librosa (their imports) are stubbed.
"""

import importlib.machinery
import json
import os
import sys
import types


def _stub(name, **attrs):
    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod


for _name in ("torchaudio", "librosa", "librosa.filters"):
    try:
        __import__(_name)
    except Exception:
        _stub(_name)

import torch  # noqa: E402
import yaml  # noqa: E402
from espnet2.gan_codec.dac.dac import DAC  # noqa: E402
from espnet2.gan_codec.espnet_model import ESPnetGANCodecModel  # noqa: E402


def build(conf):
    return ESPnetGANCodecModel(codec=DAC(**conf))


def randomize(model, g):
    with torch.no_grad():
        for name, t in model.codec.generator.state_dict(keep_vars=True).items():
            if name.endswith("_codebook.embed"):
                t.copy_(torch.randn(t.shape, generator=g))
            elif name.endswith("alpha"):
                t.copy_(0.5 + torch.rand(t.shape, generator=g))
            elif name.endswith("original0"):  # weight-norm magnitude
                t.copy_(t * (0.5 + torch.rand(t.shape, generator=g)))
            elif name.endswith("bias") and "decoder" in name:
                t.copy_(0.05 * torch.randn(t.shape, generator=g))


def main():
    out, spec_file, result = sys.argv[1:4]
    results = [one(os.path.join(out, str(i)), spec) for i, spec in enumerate(json.load(open(spec_file)))]
    torch.save(results, result)


def one(out, spec):
    torch.manual_seed(spec["seed"])
    conf = {"sampling_rate": spec["sampling_rate"], "generator_params": spec["generator_params"],
            "use_mel_loss": False, "use_dual_decoder": False}
    model = build(conf)
    randomize(model, torch.Generator().manual_seed(spec["seed"]))
    exp = os.path.join(out, "exp", "codec")
    os.makedirs(exp, exist_ok=True)
    with open(os.path.join(exp, "config.yaml"), "w") as f:
        yaml.safe_dump({"codec": "dac", "codec_conf": conf, "model_conf": {}}, f)
    torch.save(model.state_dict(), os.path.join(exp, "model.pth"))
    with open(os.path.join(out, "meta.yaml"), "w") as f:
        yaml.safe_dump({"files": {"model_file": "exp/codec/model.pth"},
                        "yaml_files": {"train_config": "exp/codec/config.yaml"}}, f)

    # what build_model_from_file does with that pack
    with open(os.path.join(exp, "config.yaml")) as f:
        args = yaml.safe_load(f)
    assert args["codec"] == "dac"
    loaded = build(args["codec_conf"]).eval()
    missing, unexpected = loaded.load_state_dict(torch.load(os.path.join(exp, "model.pth")), strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    wavs = []
    with torch.no_grad():
        for codes in spec["codes"]:
            c = torch.tensor(codes, dtype=torch.long).T[:, None]  # [N_stream, 1, T]
            wavs.append(loaded.decode(c)[0, 0].double())
    return {"wavs": wavs, "meta": loaded.meta_info()}


if __name__ == "__main__":
    main()
