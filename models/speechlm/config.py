"""An ESPnet SpeechLM checkpoint folder, read the way `espnet2/speechlm/bin/inference.py` reads it.

The folder holds one `train*.yaml` (the job config), `inference.yaml` (decoding rules per modality) and
`model.pt` (`{"module": state_dict}`). The backbone's own config.json and tokenizer come from the train
config's `model.model_hf_tag` (a local folder, else the hub cache; never downloaded).

The token layout is the job template's (`SpeechLMJobTemplate._build_vocabulary`): 256 special slots (pad 0,
bos 1, eos 2, eot 3, system 4, user 5, assistant 6, text 7, audio 8, image 9, video 10, toolcall 11, then
unused), then every discrete IO's vocabulary in the order the config lists `multimodal_io`. Text is one
stream of the backbone's `vocab_size`; discrete audio is one interval per stream (SSL streams first, then
codec streams), each `codebook + 1` wide with its pad in slot 0. A config written by ESPnet's trainer
records the layout it was built with (`vocab_intervals`); where it does not, the codec's sizes are read
from its HF config (X-Codec) — the only way to know them without loading the codec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import CheckpointError
from ..layers.config import BlockConfig
from ..locate import locate_component, read_json

NUM_SPECIAL = 256
SPECIALS = ("pad", "bos", "eos", "eot", "system", "user", "assistant", "text", "audio", "image", "video",
            "toolcall")
PAD, BOS, EOS, EOT, SYSTEM, USER, ASSISTANT, TEXT, AUDIO = range(9)
SPECIAL_ID = {name: i for i, name in enumerate(SPECIALS)}
MODALITY_TOKENS = ("audio", "text", "image", "video", "toolcall")  # what modality detection may pick
ARCHITECTURES = {"Qwen3ForCausalLM": "qwen3", "Olmo2ForCausalLM": "olmo2", "LlamaForCausalLM": "llama"}


@dataclass(frozen=True)
class SegmentRules:
    """One modality's decoding rules (inference.yaml `text:` / `audio:`)."""

    temperature: float
    topk: int
    cfg: float
    max_step: int
    min_step: int = 1  # eos / eot are masked on stream 0 before this step (the reference's default 1)


@dataclass(frozen=True)
class InferenceConfig:
    rules: dict[str, SegmentRules]  # by modality: "text", "audio"
    enforce_modality: tuple[str, ...] = ()
    dtype: str = "bfloat16"


@dataclass(frozen=True)
class Layout:
    """The unified vocabulary: intervals by IO name (global ids, end exclusive)."""

    intervals: dict[str, list[tuple[int, int]]]
    vocab_size: int
    num_stream: int
    text_start: int
    text_end: int
    audio_io: str | None  # "discrete_audio" when the model has one
    ssl_streams: int  # SSL streams lead the audio streams and are dropped at decode

    @property
    def audio_streams(self) -> int:
        return len(self.intervals[self.audio_io]) if self.audio_io else 0

    @property
    def codec_streams(self) -> int:
        return self.audio_streams - self.ssl_streams


@dataclass(frozen=True)
class Backbone:
    arch: str  # "qwen3" | "olmo2" | "llama"
    block: BlockConfig  # the decoder stack's dimensions (the Qwen3 family's config type)
    text_vocab_size: int


@dataclass(frozen=True)
class SpeechLMConfig:
    root: Path
    train_yaml: Path
    train: dict[str, Any]
    inference: InferenceConfig
    layout: Layout
    backbone: Backbone
    backbone_dir: Path  # config.json + tokenizer of model_hf_tag
    tokenizer_dir: Path  # multimodal_io.text.tokenizer_name
    tie_word_embeddings: bool
    codec: dict[str, Any] = field(default_factory=dict)  # multimodal_io.discrete_audio


def load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing; the checkpoint is incomplete") from None
    except yaml.YAMLError as e:
        raise CheckpointError(f"{path} is not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a mapping at the top level")
    return data


def is_speechlm_dir(path: Path) -> bool:
    """An ESPnet SpeechLM folder: train*.yaml + inference.yaml + model.pt (no config.json of its own)."""
    return (path.is_dir() and (path / "inference.yaml").exists() and (path / "model.pt").exists()
            and any(path.glob("train*.yaml")))


def train_yaml(root: Path) -> Path:
    found = sorted(root.glob("train*.yaml"))
    if len(found) != 1:
        what = "no" if not found else f"{len(found)} ({', '.join(p.name for p in found)})"
        raise CheckpointError(f"{root} holds {what} train*.yaml files; an ESPnet SpeechLM checkpoint has one")
    return found[0]


def find_folder(tag: str, where: str, need: str = "config.json", root: Path | None = None) -> Path:
    """A part the config names: an existing folder, a relative one inside the checkpoint folder `root`,
    or the hub-cache snapshot of a hub id (models/locate.py: the error lists what was tried); never
    downloads."""
    base = root if root is not None else Path.cwd()
    return locate_component(tag, base, where, need=need)


def _get(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise CheckpointError(f"{where} has no {key!r}")
    return d[key]


def parse_inference(d: dict[str, Any], where: str) -> InferenceConfig:
    rules = {}
    for m in ("text", "audio"):
        if m not in d:
            continue
        r = d[m]
        try:
            rules[m] = SegmentRules(temperature=float(r["temperature"]), topk=int(r["topk"]),
                                    cfg=float(r.get("cfg", 1)), max_step=int(r["max_step"]),
                                    min_step=int(r.get("min_step", 1)))
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"{where}: {m}: needs temperature, topk, max_step (and optional cfg, "
                                  f"min_step) as numbers ({type(e).__name__}: {e})") from None
        if rules[m].max_step < 1 or rules[m].topk < 1 and rules[m].temperature > 0:
            raise CheckpointError(f"{where}: {m}: max_step and topk must be positive")
    enforce = tuple(d.get("enforce_modality") or ())
    for m in enforce:
        if m not in rules:
            raise CheckpointError(f"{where}: enforce_modality names {m!r}, which has no rules of its own")
    if not rules:
        raise CheckpointError(f"{where} has neither text: nor audio: decoding rules")
    return InferenceConfig(rules=rules, enforce_modality=enforce, dtype=str(d.get("dtype", "bfloat16")))


def parse_backbone(cfg: dict[str, Any], where: str) -> Backbone:
    archs = cfg.get("architectures") or []
    arch = ARCHITECTURES.get(archs[0] if archs else "")
    if arch is None:
        raise CheckpointError(f"{where}: architectures {archs} is not one voxcli serves for ESPnet SpeechLM "
                              f"({', '.join(ARCHITECTURES)})")
    rope = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or rope
    if scaling.get("rope_type", scaling.get("type", "default")) not in ("default", None):
        raise CheckpointError(f"{where}: rope type {scaling.get('rope_type')!r} is not supported "
                              "(default only)")
    theta = rope.get("rope_theta", cfg.get("rope_theta"))
    heads = int(_get(cfg, "num_attention_heads", where))
    hidden = int(_get(cfg, "hidden_size", where))
    block = BlockConfig(
        hidden_size=hidden, intermediate_size=int(_get(cfg, "intermediate_size", where)),
        num_hidden_layers=int(_get(cfg, "num_hidden_layers", where)), num_attention_heads=heads,
        num_key_value_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=float(theta if theta is not None else 10000.0),
        attention_bias=bool(cfg.get("attention_bias", False)),
        max_position_embeddings=int(cfg.get("max_position_embeddings", 4096)),
    )
    return Backbone(arch=arch, block=block, text_vocab_size=int(_get(cfg, "vocab_size", where)))


def _audio_sizes(io: dict[str, Any], where: str, root: Path | None) -> list[int]:
    """Codebook sizes per audio stream (SSL first) from the codec's HF config, when nothing records them."""
    sizes: list[int] = []
    if io.get("ssl_choice") is not None:
        raise CheckpointError(f"{where}: the config records no vocab_intervals and its SSL tokenizer's "
                              "k-means size cannot be known without loading it; add vocab_intervals")
    if io.get("codec_choice") != "Xcodec":
        raise CheckpointError(f"{where}: the config records no vocab_intervals and codec "
                              f"{io.get('codec_choice')!r} has no HF config to read sizes from; "
                              "add vocab_intervals")
    folder = find_folder(str(io["codec_hf_model_tag"]), f"{where} codec_hf_model_tag", root=root)
    ccfg = read_json(folder / "config.json")
    n = min(int(ccfg.get("num_quantizers", 8)), int(io.get("codec_max_token_per_frame", 8)))
    sizes += [int(ccfg.get("codebook_size", 1024))] * n
    return sizes


def build_layout(train: dict[str, Any], text_vocab: int, where: str, root: Path | None = None) -> Layout:
    ios = _get(train, "multimodal_io", where)
    recorded = train.get("vocab_intervals")
    intervals: dict[str, list[tuple[int, int]]] = {"special_token": [(0, NUM_SPECIAL)]}
    start = NUM_SPECIAL
    num_stream = 1
    audio_io = None
    for name, io in ios.items():
        if name == "text":
            widths = [text_vocab]
        elif name == "discrete_audio":
            audio_io = name
            if recorded is not None and name in recorded:
                widths = [int(e) - int(s) for s, e in recorded[name]]
            else:
                widths = [k + 1 for k in _audio_sizes(io or {}, where, root)]
        elif name == "continuous_audio":
            raise CheckpointError(f"{where}: multimodal_io {name!r} (a continuous audio encoder) is "
                                  "not supported")
        else:
            raise CheckpointError(f"{where}: unknown multimodal_io {name!r}")
        intervals[name] = []
        for w in widths:
            intervals[name].append((start, start + w))
            start += w
        num_stream = max(num_stream, len(widths))
    if "text" not in intervals:
        raise CheckpointError(f"{where}: multimodal_io has no text IO")
    if recorded is not None:
        rebuilt = {k: [[int(a), int(b)] for a, b in v] for k, v in intervals.items()}
        want = {k: [[int(a), int(b)] for a, b in v] for k, v in recorded.items()}
        if rebuilt != want:
            raise CheckpointError(f"{where}: the token layout it records ({want}) is not the one its "
                                  f"multimodal_io builds ({rebuilt}); was the config re-saved with "
                                  "sorted keys?")
    ssl = 1 if audio_io and (ios[audio_io] or {}).get("ssl_choice") is not None else 0
    t0, t1 = intervals["text"][0]
    return Layout(intervals=intervals, vocab_size=start, num_stream=num_stream, text_start=t0, text_end=t1,
                  audio_io=audio_io, ssl_streams=ssl)


def load_config(root: Path) -> SpeechLMConfig:
    ty = train_yaml(root)
    train = load_yaml(ty)
    inf = parse_inference(load_yaml(root / "inference.yaml"), str(root / "inference.yaml"))
    model = _get(train, "model", str(ty))
    if model.get("model_choice", "parallel") != "parallel":
        raise CheckpointError(f"{ty}: model_choice {model.get('model_choice')!r} is not supported (parallel)")
    tag = str(_get(model, "model_hf_tag", f"{ty} model"))
    bdir = find_folder(tag, f"{ty} model.model_hf_tag", root=root)
    backbone = parse_backbone(read_json(bdir / "config.json"), str(bdir / "config.json"))
    ios = _get(train, "multimodal_io", str(ty))
    text_io = ios.get("text") or {}
    tdir = find_folder(str(text_io.get("tokenizer_name", tag)), f"{ty} multimodal_io.text.tokenizer_name",
                       root=root)
    text_vocab = int(read_json(tdir / "config.json").get("vocab_size", backbone.text_vocab_size))
    if text_vocab != backbone.text_vocab_size:
        raise CheckpointError(f"{ty}: the tokenizer's vocab_size {text_vocab} differs from the backbone's "
                              f"{backbone.text_vocab_size}")
    layout = build_layout(train, text_vocab, str(ty), root)
    if "audio" in inf.rules and layout.audio_io is None:
        raise CheckpointError(f"{root / 'inference.yaml'} has audio rules but {ty} has no discrete_audio IO")
    conf = model.get("model_conf") or {}
    return SpeechLMConfig(root=root, train_yaml=ty, train=train, inference=inf, layout=layout,
                          backbone=backbone,
                          backbone_dir=bdir, tokenizer_dir=tdir,
                          tie_word_embeddings=bool(conf.get("tie_word_embeddings", False)),
                          codec=dict(ios.get("discrete_audio") or {}))
