"""12 Hz codec decoder: parity with the official decoder, exact streaming through the slot table, errors."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from support.audio_case import ORACLE_FRAMES, audio_case, oracle_outputs
from support.chunk_schedules import chunk_schedule, random_lead
from voxcli.models.base import CheckpointError, CodecItem
from voxcli.models.qwen3_tts.codec import Qwen3TTSCodec

SPF = 1920


@pytest.fixture(scope="module")
def codec64(audio_root) -> Qwen3TTSCodec:
    return Qwen3TTSCodec.from_checkpoint(audio_root, dtype=torch.float64)


def _codes(n: int, seed: int) -> np.ndarray:
    return np.random.RandomState(seed).randint(0, 128, size=(n, 16)).astype(np.int64)


# Lead chunk sizes per schedule kind (then 16 per chunk); "random" draws sizes in 1..40.
_LEADS = {
    "ramp": [1, 2, 4, 8],
    "one-then-steady": [1],
    "window-edges": [71, 1, 72, 73],  # chunks that straddle the 72-frame window exactly
    "big-first": [80, 3],
}


def _schedule(kind: str, total: int, seed: int = 0) -> list[int]:
    lead = random_lead(total, 40, seed) if kind == "random" else _LEADS[kind]
    return chunk_schedule(lead, total)


def _run_interleaved(
    codec: Qwen3TTSCodec, requests: list[tuple[int, np.ndarray, list[int]]]
) -> list[np.ndarray]:
    """Decode several requests (slot, codes [T,16], schedule) concurrently: every step sends one batch
    holding the next chunk of every unfinished request."""
    pos = [0] * len(requests)
    idx = [0] * len(requests)
    pcm: list[list[np.ndarray]] = [[] for _ in requests]
    while any(idx[r] < len(s) for r, (_, _, s) in enumerate(requests)):
        batch, owners = [], []
        for r, (slot, codes, sched) in enumerate(requests):
            if idx[r] < len(sched):
                n = sched[idx[r]]
                batch.append(
                    CodecItem(
                        slot, codes[pos[r] : pos[r] + n], first=pos[r] == 0, last=pos[r] + n == len(codes)
                    )
                )
                owners.append(r)
                pos[r] += n
                idx[r] += 1
        for r, out in zip(owners, codec.decode_chunks(batch), strict=True):
            pcm[r].append(out)
    return [np.concatenate(p) for p in pcm]


def _boundary_errors(stream: np.ndarray, full: np.ndarray, schedule: list[int]) -> list[float]:
    """Max |error| within one frame on either side of every chunk boundary."""
    errs, at = [], 0
    for n in schedule[:-1]:
        at += n
        lo, hi = (at - 1) * SPF, min(at + 1, len(full) // SPF) * SPF
        errs.append(float(np.abs(stream[lo:hi] - full[lo:hi]).max()))
    return errs


def _files_sha256(folder: Path) -> str:
    """As tests/oracle/run_audio.py's files_sha256."""
    h = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _oracle_run(audio_root: Path, key: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The official waveform `key` and the codes it was decoded from, after checking that our side loads
    the same checkpoint bytes and decodes the same codes: a mismatch of inputs is named as such, never
    reported as a decoder difference."""
    out = oracle_outputs(audio_root)
    assert _files_sha256(audio_root / "speech_tokenizer") == out["st_sha256"], (
        "the speech tokenizer files changed after the oracle loaded them")
    assert torch.equal(out["codes"], audio_case(audio_root).codes), "the shared case's codes were modified"
    return out[key], out["codes"]


@pytest.mark.oracle
def test_full_forward_matches_official_decoder(audio_root):
    """fp32, both sides at one thread, where they are bit-identical. Measured on this case: ours at 1 vs 2
    threads differ by 1.5e-5 and the whole fp32 rounding error (fp32 vs fp64 official) is 4.05e-5, so
    the 1e-4 bound cannot be crossed by reduction order; a miss is a real difference, and the message
    says whether our side even repeats itself."""
    ref, codes = _oracle_run(audio_root, "wav")
    codec = Qwen3TTSCodec.from_checkpoint(audio_root)
    torch.set_num_threads(1)  # as the oracle's forward (tests/oracle/run_audio.py); conftest restores it
    mine = codec.full_forward(codes)
    assert mine.shape == ref.shape == (2, 1, ORACLE_FRAMES * SPF)
    assert float(ref.std()) > 0.03  # a live decoder, not silence
    err = float((mine - ref).abs().max())
    if err >= 1e-4:
        again = float((codec.full_forward(codes) - mine).abs().max())
        pytest.fail(f"ours vs official {err:.3g} at sample {int((mine - ref).abs().argmax())}; ours vs ours "
                    f"again {again:.3g}; threads {torch.get_num_threads()}")


@pytest.mark.oracle
def test_full_forward_matches_official_decoder_float64(audio_root):
    """The same comparison in float64, where rounding (any thread count, any kernel order) moves the
    waveform by ~1e-16 (measured 0 at equal thread counts, 1.8e-16 at 1 vs 2): the tight bound checks
    the arithmetic, not the kernels."""
    ref, codes = _oracle_run(audio_root, "wav64")
    codec = Qwen3TTSCodec.from_checkpoint(audio_root, dtype=torch.float64)
    mine = codec.full_forward(codes)
    assert mine.dtype == ref.dtype == torch.float64 and mine.shape == ref.shape
    assert float((mine - ref).abs().max()) < 1e-10


def test_streaming_equals_full_for_many_schedules(codec64):
    """Float64 isolates the state logic from kernel rounding (fp32 is checked separately below).
    Six schedules, two requests per batch on different slots; one pair runs 310+ frames."""
    codec64.init_slots(4)
    pairs = [("ramp", "random", 310), ("one-then-steady", "window-edges", 150), ("big-first", "random", 90)]
    for k, (sa, sb, total) in enumerate(pairs):
        a, b = _codes(total, 10 + k), _codes(total + 7, 20 + k)
        sched_a, sched_b = _schedule(sa, total, seed=k), _schedule(sb, total + 7, seed=100 + k)
        slot_a, slot_b = (0, 3) if k % 2 == 0 else (2, 1)
        out_a, out_b = _run_interleaved(codec64, [(slot_a, a, sched_a), (slot_b, b, sched_b)])
        for codes, out, sched in ((a, out_a, sched_a), (b, out_b, sched_b)):
            full = codec64.full_forward(torch.from_numpy(codes.T[None]))[0, 0].numpy()
            assert out.shape == full.shape
            assert np.abs(out - full).max() < 1e-5, (sched[:6], np.abs(out - full).max())
            assert max(_boundary_errors(out, full, sched)) < 1e-5


def test_slot_reuse_after_reset(codec64):
    """A request that starts on a slot another request used must not see any of its state."""
    codec64.init_slots(2)
    old, new = _codes(40, 1), _codes(76, 2)
    _run_interleaved(codec64, [(1, old, _schedule("ramp", 40))])
    out = _run_interleaved(codec64, [(1, new, _schedule("random", 76, seed=3)), (0, old, [40])])
    full_new = codec64.full_forward(torch.from_numpy(new.T[None]))[0, 0].numpy()
    full_old = codec64.full_forward(torch.from_numpy(old.T[None]))[0, 0].numpy()
    assert np.abs(out[0] - full_new).max() < 1e-5
    assert np.abs(out[1] - full_old).max() < 1e-5


def test_streaming_float32_within_kernel_noise(audio_root):
    """In fp32 the chunked and full passes round differently (different GEMM / conv shapes); the tiny
    random decoder's activations reach ~300 before the output conv, so that noise shows up at ~3e-5 --
    the same size as the official decoder's own prefix-vs-full difference."""
    codec = Qwen3TTSCodec.from_checkpoint(audio_root)
    codec.init_slots(2)
    codes = _codes(80, 5)
    out = _run_interleaved(codec, [(0, codes, _schedule("ramp", 80)), (1, codes, _schedule("random", 80))])
    full = codec.full_forward(torch.from_numpy(codes.T[None]))[0, 0].numpy()
    for o in out:
        assert o.dtype == np.float32 and o.shape == full.shape
        assert np.abs(o - full).max() < 1e-4


def test_decode_chunks_rejects_bad_batches(codec64):
    codec64.init_slots(2)
    ok = _codes(3, 0)
    with pytest.raises(ValueError, match="same slot"):
        codec64.decode_chunks([CodecItem(0, ok, True, False), CodecItem(0, ok, False, False)])
    with pytest.raises(ValueError, match="outside the table"):
        codec64.decode_chunks([CodecItem(5, ok, True, False)])
    with pytest.raises(ValueError, match=r"\[0, 128\)"):
        codec64.decode_chunks([CodecItem(0, ok + 200, True, False)])
    with pytest.raises(ValueError, match="16"):
        codec64.decode_chunks([CodecItem(0, ok[:, :8], True, False)])
    assert codec64.decode_chunks([]) == []


def _broken_copy(audio_root: Path, tmp: Path, edit) -> Path:
    dst = tmp / "ckpt"
    shutil.copytree(audio_root / "speech_tokenizer", dst / "speech_tokenizer")
    f = dst / "speech_tokenizer" / "model.safetensors"
    edit(f)
    return dst


def test_checkpoint_errors_name_key_and_path(audio_root, tmp_path):
    key = "decoder.pre_transformer.layers.1.self_attn.q_proj.weight"

    def drop(f):
        sd = load_file(f)
        del sd[key]
        save_file(sd, f)

    def reshape(f):
        sd = load_file(f)
        sd[key] = torch.zeros(3, 3)
        save_file(sd, f)

    def truncate(f):
        f.write_bytes(f.read_bytes()[:1000])

    for name, edit, words in (
        ("missing", drop, [key, "missing"]),
        ("shape", reshape, [key, "shape"]),
        ("corrupt", truncate, ["corrupt"]),
    ):
        ck = _broken_copy(audio_root, tmp_path / name, edit)
        with pytest.raises(CheckpointError) as e:
            Qwen3TTSCodec.from_checkpoint(ck)
        msg = str(e.value)
        assert str(ck / "speech_tokenizer" / "model.safetensors") in msg, msg
        for w in words:
            assert w in msg, msg
    with pytest.raises(CheckpointError, match="no speech tokenizer"):
        Qwen3TTSCodec.from_checkpoint(tmp_path / "nowhere")
