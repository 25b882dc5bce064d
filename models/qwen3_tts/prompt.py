"""Prefill embeddings of one request, laid out exactly as the reference builds them.

    [P(instruct)]                               VoiceDesign / instructable CustomVoice
    P(<|im_start|>assistant\\n)                  3 rows
    codec control list + text side              [think, think_bos, lang, think_eos, (spk), pad]
                                                + [tts_pad.., tts_bos]
    then one of:
      streaming text      P(t_0) + emb(bos);                 trailing = [P(t_1..), P(tts_eos)]
      non-streaming text  [P(t..), P(tts_eos)] + emb(pad);  P(tts_pad) + emb(bos);  trailing = P(tts_pad)
      ICL voice clone     text/codec interleave of the reference transcript + codes (see `_icl`)

`trailing` is the text term added to each decode step's input (step t uses trailing[t], then tts_pad).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .config import Qwen3TTSConfig
from .talker import Talker


@dataclass
class PromptEmbeds:
    embeds: torch.Tensor  # [L, H] prefill inputs
    trailing: torch.Tensor  # [N, H] text terms for decode steps 0..N-1
    tts_pad: torch.Tensor  # [H] text term after the trailing text runs out
    ref_codes: np.ndarray | None = None  # ICL: reference frames the codec must decode first


def _ids(x: list[int], device: torch.device) -> torch.Tensor:
    return torch.tensor([x], dtype=torch.long, device=device)


@torch.no_grad()
def build_prompt(
    talker: Talker,
    cfg: Qwen3TTSConfig,
    text_ids: list[int],
    *,
    language_id: int | None,
    speaker: torch.Tensor | None,
    instruct_ids: list[int] | None,
    streaming: bool,
    ref_ids: list[int] | None = None,
    ref_codes: np.ndarray | None = None,
) -> PromptEmbeds:
    """text_ids: the full assistant template ids (`<|im_start|>assistant\\n{text}<|im_end|>\\n
    <|im_start|>assistant\\n`); ref_ids: the reference template (`...{ref}<|im_end|>\\n`) for ICL.
    speaker: codec_embedding[spk_id] (CustomVoice) or the x-vector (Base), shape [H]."""
    tc = cfg.talker
    dev = talker.codec_head.weight.device
    dtype = talker.codec_head.weight.dtype
    tts_bos, tts_eos, tts_pad = talker.text(
        _ids([cfg.tts_bos_id, cfg.tts_eos_id, cfg.tts_pad_id], dev)
    ).chunk(3, dim=1)

    if language_id is None:
        control = [tc.codec_nothink_id, tc.codec_think_bos_id, tc.codec_think_eos_id]
    else:
        control = [tc.codec_think_id, tc.codec_think_bos_id, language_id, tc.codec_think_eos_id]
    parts = [talker.codec(_ids(control, dev))]
    if speaker is not None:
        parts.append(speaker.to(dev, dtype).view(1, 1, -1))
    parts.append(talker.codec(_ids([tc.codec_pad_id, tc.codec_bos_id], dev)))
    codec_rows = torch.cat(parts, dim=1)
    n = codec_rows.shape[1]
    text_side = torch.cat((tts_pad.expand(-1, n - 2, -1), tts_bos), dim=1) + codec_rows[:, :-1]
    ids = _ids(text_ids, dev)
    rows = [talker.text(ids[:, :3]), text_side]
    if instruct_ids:
        rows.insert(0, talker.text(_ids(instruct_ids, dev)))

    if ref_codes is not None:
        assert ref_ids is not None
        icl, trailing = _icl(
            talker, cfg, ids[:, 3:-5], _ids(ref_ids, dev)[:, 3:-2], ref_codes, tts_pad, tts_eos, streaming
        )
        rows.append(icl)
    elif streaming:
        rows.append(talker.text(ids[:, 3:4]) + codec_rows[:, -1:])
        trailing = torch.cat((talker.text(ids[:, 4:-5]), tts_eos), dim=1)
    else:
        body = ids[:, 3:-5]
        pad_rows = talker.codec(_ids([tc.codec_pad_id] * (body.shape[1] + 1), dev))
        rows.append(torch.cat((talker.text(body), tts_eos), dim=1) + pad_rows)
        rows.append(tts_pad + talker.codec(_ids([tc.codec_bos_id], dev)))
        trailing = tts_pad
    embeds = torch.cat(rows, dim=1)[0]
    return PromptEmbeds(
        embeds=embeds,
        trailing=trailing[0],
        tts_pad=tts_pad[0, 0],
        ref_codes=None if ref_codes is None else np.asarray(ref_codes, dtype=np.int64),
    )


def _icl(
    talker: Talker,
    cfg: Qwen3TTSConfig,
    text: torch.Tensor,
    ref: torch.Tensor,
    ref_codes: np.ndarray,
    tts_pad: torch.Tensor,
    tts_eos: torch.Tensor,
    streaming: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Voice-clone in-context block: reference transcript + target text against bos + reference codes."""
    tc = cfg.talker
    dev = text.device
    text_embed = torch.cat([talker.text(torch.cat([ref, text], dim=-1)), tts_eos], dim=1)
    codes = torch.as_tensor(np.asarray(ref_codes), dtype=torch.long, device=dev)  # [T, 16]
    pred = talker.code_predictor
    per_group = [talker.codec(codes[:, :1])] + [
        pred.model.codec_embedding[g - 1](codes[:, g : g + 1]) for g in range(1, tc.num_code_groups)
    ]
    codec_embed = torch.cat(per_group, dim=1).sum(1).unsqueeze(0)
    codec_embed = torch.cat([talker.codec(_ids([tc.codec_bos_id], dev)), codec_embed], dim=1)
    n_text, n_codec = text_embed.shape[1], codec_embed.shape[1]
    if not streaming:
        pads = talker.codec(_ids([tc.codec_pad_id] * n_text, dev))
        return torch.cat([text_embed + pads, codec_embed + tts_pad], dim=1), tts_pad
    if n_text > n_codec:
        return text_embed[:, :n_codec] + codec_embed, text_embed[:, n_codec:]
    text_embed = torch.cat([text_embed] + [tts_pad] * (n_codec - n_text), dim=1)
    return text_embed + codec_embed, tts_pad
