"""fill_module (models/checkpoint.py): safetensors read straight into a meta-built module's parameters,
same dtype (direct read) or converted through a bounded staging buffer, equal to safetensors' own
reader; a truncated or corrupt file and a shape mismatch are one-sentence CheckpointErrors."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from voxcli.models import checkpoint
from voxcli.models.base import CheckpointError
from voxcli.models.checkpoint import fill_module, read_header


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(7, 5)
        self.emb = nn.Embedding(11, 3)
        self.register_buffer("ids", torch.zeros(4, dtype=torch.int64))


def _save(path, dtype):
    torch.manual_seed(0)
    net = Net()
    net.ids = torch.arange(4)
    sd = {k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in net.state_dict().items()}
    save_file(sd, str(path))
    return load_file(str(path))


F32, BF16 = torch.float32, torch.bfloat16


@pytest.mark.parametrize("file_dtype, target", [(F32, F32), (BF16, F32), (F32, BF16), (BF16, BF16)])
def test_fill_equals_safetensors_reader(tmp_path, monkeypatch, file_dtype, target):
    monkeypatch.setattr(checkpoint, "CHUNK_BYTES", 8)  # many staging chunks per tensor
    f = tmp_path / "model.safetensors"
    ref = _save(f, file_dtype)
    with torch.device("meta"):
        net = Net()
    fill_module(net, read_header(f), f, "cpu", target)
    for k, v in net.state_dict().items():
        want = ref[k].to(target) if ref[k].is_floating_point() else ref[k]
        assert v.dtype == want.dtype and torch.equal(v, want), k
    assert net.ids.tolist() == [0, 1, 2, 3]


def test_truncated_and_mismatched_files_are_checkpoint_errors(tmp_path):
    f = tmp_path / "model.safetensors"
    _save(f, torch.float32)
    data = f.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[:-10])
    with pytest.raises(CheckpointError, match="truncated"):
        read_header(cut)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\xff" * 64)
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        read_header(junk)
    with pytest.raises(CheckpointError, match="is missing"):
        read_header(tmp_path / "none.safetensors")

    class Other(Net):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(7, 6)

    with torch.device("meta"):
        other = Other()
    with pytest.raises(CheckpointError, match=r"tensor 'a.weight' has shape \[5, 7\]"):
        fill_module(other, read_header(f), f, "cpu", torch.float32)
