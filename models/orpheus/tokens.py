"""Orpheus's token layout (canopylabs/orpheus-3b-0.1-ft, read from canopyai/Orpheus-TTS): the prompt's
framing ids, the stop id, and how the flat stream of audio tokens maps onto SNAC's three levels. No torch.

A frame is seven LM steps. The token at frame position j (0..6) is `AUDIO_BASE + j * CODES + code`
(`<custom_token_{10 + j * 4096 + code}>`), and the seven codes of a frame feed SNAC's levels as
0 <- {0}, 1 <- {1, 4}, 2 <- {2, 3, 5, 6} (12, 23 and 47 Hz at 24 kHz: one, two and four codes a frame).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy only where frames are mapped: `vox voices` reads the layout without it
    import numpy as np

START_OF_HUMAN = 128259
END_OF_TEXT = 128009  # <|eot_id|>
END_OF_HUMAN = 128260
START_OF_AI = 128261
START_OF_SPEECH = 128257
END_OF_SPEECH = 128258  # generation stops here
BOS = 128000  # <|begin_of_text|>, which the tokenizer's post-processor puts in front of the text
PROMPT_TAIL = (END_OF_TEXT, END_OF_HUMAN, START_OF_AI, START_OF_SPEECH)
AUDIO_BASE = 128266  # <custom_token_10>
CODES = 4096  # SNAC codebook size
FRAME_TOKENS = 7
VOCAB_MIN = AUDIO_BASE + FRAME_TOKENS * CODES  # the vocabulary must hold every frame position's codes
# frame position -> SNAC level (0: 12 Hz, 1: 23 Hz, 2: 47 Hz)
LEVEL_OF_POSITION = (0, 1, 2, 2, 1, 2, 2)
VOICES = ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")
DEFAULT_VOICE = "tara"  # canopyai/Orpheus-TTS's generate_speech default


def prompt_text(text: str, voice: str | None) -> str:
    """What the tokenizer reads: "VOICE: TEXT" (emotive tags such as <laugh> stay in the text as typed)."""
    return f"{voice}: {text}" if voice else text


def prompt_ids(text_ids: list[int]) -> list[int]:
    """[start of human] + the tokenizer's ids of "VOICE: TEXT" (its BOS included) + the fixed tail."""
    return [START_OF_HUMAN, *text_ids, *PROMPT_TAIL]


def band(position: int) -> tuple[int, int]:
    """The token ids [lo, hi) that carry a code at frame position `position`."""
    lo = AUDIO_BASE + position * CODES
    return lo, lo + CODES


def frame_codes(tokens: list[int] | np.ndarray) -> np.ndarray:
    """Seven audio tokens of one frame -> its seven codes in [0, 4096); ValueError for a token outside its
    position's band."""
    import numpy as np

    t = np.asarray(tokens, dtype=np.int64)
    if t.shape != (FRAME_TOKENS,):
        raise ValueError(f"a frame is {FRAME_TOKENS} tokens, got shape {t.shape}")
    codes = t - AUDIO_BASE - np.arange(FRAME_TOKENS) * CODES
    if codes.min() < 0 or codes.max() >= CODES:
        raise ValueError(f"frame tokens {t.tolist()} are not audio codes at positions 0..6")
    return codes


def levels(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frames [..., n, 7] of codes -> SNAC's level codes [..., n], [..., 2n], [..., 4n] in time order."""
    import numpy as np

    f = np.asarray(frames)
    lead = f.shape[:-2]
    n = f.shape[-2]
    l0 = f[..., 0]
    l1 = f[..., [1, 4]].reshape(*lead, 2 * n)
    l2 = f[..., [2, 3, 5, 6]].reshape(*lead, 4 * n)
    return l0, l1, l2
