"""The shared head over each stream's own vocabulary only.

The reference computes logits_s = W_H(h + e_s) over the WHOLE unified vocabulary for every stream, then
masks all but the stream's interval (and <eos>/<eot> on stream 0 from min_step on) to -inf. Only the
unmasked logits can ever be drawn, merged or compared, so this head computes exactly those: per stream
the rows of W_H for its candidates (contiguous slices, no copy), laid out [R, S, K] with -inf padding.
For Bagpiper's audio that is 8 x 1027 of 160,392 rows per stream (the head was ~40% of a step's FLOPs);
argmax, top-k, softmax and the multinomial draw then see the same finite values in the same order
(<eos>, <eot>, then the interval: ascending ids, as in the full vocabulary), so results are the
reference's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import EOS, EOT, Layout


@dataclass
class StreamCandidates:
    ranges: list[tuple[int, int]]  # contiguous id ranges, ascending
    late: int  # how many leading ids are <eos>/<eot> (valid only from min_step on)


class CandidateHead:
    def __init__(self, layout: Layout, device: torch.device) -> None:
        self.layout = layout
        S = layout.num_stream
        self.by_modality: dict[str, list[StreamCandidates]] = {}
        for io, intervals in layout.intervals.items():
            if io == "special_token":
                continue
            streams = []
            for s in range(S):
                r = [intervals[s]] if s < len(intervals) else [(0, 1)]  # unused streams: pad only
                streams.append(StreamCandidates(ranges=([(EOS, EOT + 1)] if s == 0 else []) + r,
                                                late=2 if s == 0 else 0))
            self.by_modality["audio" if io == "discrete_audio" else io] = streams
        self.ids = {m: [torch.cat([torch.arange(a, b) for a, b in c.ranges]).to(device) for c in cands]
                    for m, cands in self.by_modality.items()}

    def width(self, modality: str) -> int:
        return max(len(i) for i in self.ids[modality])

    def logits(self, weight: torch.Tensor, stream_emb: torch.Tensor, h: torch.Tensor, modality: str,
               late_ok: torch.Tensor, k_min: int = 1) -> torch.Tensor:
        """h [R, H] -> [R, S, K] float32: each stream's candidates' logits, -inf where not allowed
        (padding, and <eos>/<eot> on rows whose `late_ok` [R] is False). K >= k_min (top-k needs k)."""
        R, S = h.shape[0], self.layout.num_stream
        K = max(self.width(modality), k_min)
        out = torch.full((R, S, K), float("-inf"), dtype=torch.float32, device=h.device)
        e = stream_emb.clone()
        e[0] = 0.0
        for s, cand in enumerate(self.by_modality[modality]):
            x = h + e[s].to(h.dtype)
            col = 0
            for a, b in cand.ranges:
                out[:, s, col:col + b - a] = (x @ weight[a:b].T).float()
                col += b - a
            if cand.late:
                out[:, s, :cand.late] = torch.where(late_ok[:, None], out[:, s, :cand.late],
                                                    torch.tensor(float("-inf"), device=h.device))
        return out

    def to_ids(self, modality: str, index: torch.Tensor) -> torch.Tensor:
        """Candidate positions [.., S] -> global token ids [.., S]."""
        table = torch.stack([torch.nn.functional.pad(i, (0, self.width(modality) - len(i)))
                             for i in self.ids[modality]])  # [S, K]
        s = torch.arange(self.layout.num_stream, device=index.device).expand_as(index)
        return table.to(index.device)[s, index.clamp(max=table.shape[1] - 1)]
