"""Oracle for the audio side (runs in the oracle venv): official 12 Hz decoder, Mimi encode, log-mel and
ECAPA x-vector on inputs prepared by the project's tests.

usage: run_audio.py IN.pt OUT.pt
IN.pt: {"st_dir": str, "codes": LongTensor [B, 16, T], "ref": float32 [n] (24 kHz),
        "short_refs": [float32 [n_i]], "spk_config": dict, "spk_state": {speaker_encoder.* tensors}}
OUT.pt: {"st_sha256": digest of the speech tokenizer files loaded, "codes": the codes decoded,
         "wav": decoder(codes), the single full forward [B, 1, T*1920], "wav64": the same in float64,
         "ref_codes": Qwen3TTSTokenizer.encode [T_ref, 16], "short_codes": [[T_i, 16]],
         "mel_basis": librosa slaney filters [128, 513], "mel": official log-mel [1, frames, 128],
         "xvec": extract_speaker_embedding(ref) [enc_dim]}
"""

import hashlib
import os
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import official  # noqa: E402,F401  (offline import of qwen_tts with stand-ins)
from librosa.filters import mel as librosa_mel  # noqa: E402
from qwen_tts import Qwen3TTSTokenizer  # noqa: E402
from qwen_tts.core.models import modeling_qwen3_tts as M  # noqa: E402
from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig  # noqa: E402


def files_sha256(folder: str) -> str:
    """One digest over every file in `folder` (name and bytes, sorted by name)."""
    h = hashlib.sha256()
    for f in sorted(Path(folder).iterdir()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def main(inp: str, out: str) -> None:
    torch.set_num_threads(2)
    data = torch.load(inp, weights_only=False)
    # What this run decodes, for the test to hold its side to: the checkpoint bytes it loads and the codes.
    res = {"st_sha256": files_sha256(data["st_dir"]), "codes": data["codes"]}
    tok = Qwen3TTSTokenizer.from_pretrained(data["st_dir"], dtype=torch.float32)
    with torch.no_grad():
        # One thread for the waveform: the tiny random decoder amplifies last-bit differences, and one
        # thread leaves no room for a thread-team-dependent reduction order (the test does the same).
        torch.set_num_threads(1)
        res["wav"] = tok.model.decoder(data["codes"])  # the single full forward (not chunked decode())
        torch.set_num_threads(2)
        # The same forward in float64: rounding differences of any kind stay ~1e-16 there, so the
        # float64 comparison can be tight without depending on kernel or thread details.
        tok64 = Qwen3TTSTokenizer.from_pretrained(data["st_dir"], dtype=torch.float64)
        res["wav64"] = tok64.model.decoder(data["codes"])
    ref = data["ref"].numpy()
    res["ref_codes"] = tok.encode(ref, sr=24000).audio_codes[0].cpu()
    res["short_codes"] = [tok.encode(r.numpy(), sr=24000).audio_codes[0].cpu() for r in data["short_refs"]]

    res["mel_basis"] = torch.from_numpy(librosa_mel(sr=24000, n_fft=1024, n_mels=128, fmin=0, fmax=12000))
    res["mel"] = M.mel_spectrogram(
        torch.from_numpy(ref).unsqueeze(0),
        n_fft=1024,
        num_mels=128,
        sampling_rate=24000,
        hop_size=256,
        win_size=1024,
        fmin=0,
        fmax=12000,
    ).transpose(1, 2)
    enc = M.Qwen3TTSSpeakerEncoder(Qwen3TTSSpeakerEncoderConfig(**data["spk_config"])).eval()
    prefix = "speaker_encoder."
    enc.load_state_dict({k[len(prefix) :]: v for k, v in data["spk_state"].items()}, strict=True)
    host = types.SimpleNamespace(speaker_encoder=enc, device=torch.device("cpu"), dtype=torch.float32)
    with torch.no_grad():  # the official method body, run on the bare speaker encoder
        res["xvec"] = M.Qwen3TTSForConditionalGeneration.extract_speaker_embedding(host, ref, 24000)
    torch.save(res, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
