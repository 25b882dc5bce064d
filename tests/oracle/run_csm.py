"""Oracle for CSM-1B (runs in the transformers 5.24 oracle venv, scripts/setup_oracle_tf524.sh): transformers
5.24's own CsmForConditionalGeneration, CsmProcessor (its chat template) and MimiModel.

usage: run_csm.py CKPT CASES.json OUT.pt
  Load OUR builder's checkpoint (models/csm/tiny.py, the transformers layout of sesame/csm-1b) with
  `from_pretrained` and report its loading info (missing / unexpected / mismatched keys: the layout check),
  then per case build the conversation, tokenize it with the processor's chat template and run
  `generate(..., do_sample=False, depth_decoder_do_sample=False, output_audio=True)`.
A case: {"name", "text", "speaker", "max_new"} (+ "ref_text" and "ref_wav", a .npy 24 kHz clip: a context
turn; its `MimiModel.encode` codes are reported too).
The folder's shards are named as the release names them (transformers-*.safetensors with
transformers.safetensors.index.json); a view folder links them under the names `from_pretrained` reads.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import AutoProcessor, CsmForConditionalGeneration

torch.use_deterministic_algorithms(True)
torch.set_num_threads(2)


def view(ckpt: Path, out: Path) -> Path:
    index = json.loads((ckpt / "transformers.safetensors.index.json").read_text())
    names = sorted(set(index["weight_map"].values()))
    rename = {n: f"model-{i + 1:05d}-of-{len(names):05d}.safetensors" for i, n in enumerate(names)}
    for f in ckpt.iterdir():
        if f.is_file() and not f.name.startswith("transformers"):
            (out / f.name).symlink_to(f)
    for old, new in rename.items():
        (out / new).symlink_to(ckpt / old)
    index["weight_map"] = {k: rename[v] for k, v in index["weight_map"].items()}
    (out / "model.safetensors.index.json").write_text(json.dumps(index))
    return out


def main() -> None:
    ckpt, cases_path, out_path = Path(sys.argv[1]).resolve(), Path(sys.argv[2]), Path(sys.argv[3])
    cases = json.loads(cases_path.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        root = view(ckpt, Path(tmp))
        model, info = CsmForConditionalGeneration.from_pretrained(
            root, output_loading_info=True, dtype=torch.float32
        )
        model.eval()
        processor = AutoProcessor.from_pretrained(root)
        result = {"loading_info": {k: sorted(map(str, v)) for k, v in info.items()}, "cases": {}}
        for case in cases:
            turns = []
            enc = None
            if case.get("ref_wav"):
                wav = np.load(case["ref_wav"]).astype(np.float32)
                turns.append(
                    {
                        "role": case["speaker"],
                        "content": [
                            {"type": "text", "text": case["ref_text"]},
                            {"type": "audio", "path": wav},
                        ],
                    }
                )
                with torch.no_grad():
                    enc = model.codec_model.encode(torch.from_numpy(wav)[None, None]).audio_codes[0].T.clone()
            turns.append({"role": case["speaker"], "content": [{"type": "text", "text": case["text"]}]})
            inputs = processor.apply_chat_template(turns, tokenize=True, return_dict=True)
            with torch.no_grad():
                out = model.generate(
                    **inputs,
                    do_sample=False,
                    depth_decoder_do_sample=False,
                    max_new_tokens=case["max_new"],
                    output_audio=True,
                    return_dict_in_generate=True,
                )
            result["cases"][case["name"]] = {
                "input_ids": inputs["input_ids"][0].clone(),
                "codes": out.sequences[0].clone(),
                "audio": out.audio[0].float().clone(),
                "enc_codes": enc,
            }
        torch.save(result, out_path)


if __name__ == "__main__":
    main()
