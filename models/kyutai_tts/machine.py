"""The word-level state machine of Kyutai's delayed-streams TTS (moshi `tts.StateMachine`): the model says
when it wants the next word (the `new_word` token) or waits (`pad`); the machine feeds the word's text
tokens over the next steps, forces pads while a word is being fed or for a word's `padding`, forces a new
word after `max_padding` pads in a row, and with `second_stream_ahead` also feeds the tokens of the word
that many words ahead on a second text stream multiplexed into the first ((second + 1) * card + first).

Streaming text: `words` may grow while a request runs (`Script.add`); `closed` says no more will come. A
machine that wants a new word while none has arrived and the text is still open WAITS: the step feeds a
pad and the model's request is remembered (`waiting`), so the row keeps decoding and never stalls a batch.
A text that is complete from the start (`closed`) runs exactly as moshi's.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

NEW_WORD, MAIN, OTHER, PAD, ZERO = 0, 1, 2, 3, -1
_BREAK = re.compile(r"(?:<break\s+time=\"([0-9]+(?:.[0-9]*)?)s\"\s*/?>)|(?:\s+)")


@dataclass
class Entry:
    tokens: list[int]
    text: str
    padding: int = 0


def script_entries(encode, text: str, frame_rate: float, padding_between: int = 1,
                   first_turn: bool = True) -> list[Entry]:
    """One turn of text -> entries (moshi `script_to_entries` for a single main-speaker turn): words split
    on whitespace and `<break time="Ns"/>` (a pause of round(N * frame_rate) pads), the main-speaker token
    before the turn's first word, `padding_between + len(tokens) - 1` forced pads after each word."""
    line = text.replace("\u2019", "'").replace(":", " ").replace("(", "").replace(")", "")
    entries: list[Entry] = []
    first = first_turn

    def add(word: str) -> None:
        nonlocal first
        tokens = list(encode(word))
        if first:
            tokens.insert(0, MAIN)
            first = False
        padding = max(0, padding_between + len(tokens) - 1) if padding_between > 0 else 0
        entries.append(Entry(tokens, word, padding))

    while line:
        m = _BREAK.search(line)
        if m is None:
            break
        word, line = line[: m.start()], line[m.end():]
        if word:
            add(word)
        if m.group(1):
            entries.append(Entry([], "", int(round(float(m.group(1)) * frame_rate))))
    if line:
        add(line)
    return entries


@dataclass
class MachineState:
    entries: deque[Entry]
    remaining_padding: int
    forced_padding: int
    closed: bool = True  # no more words will arrive
    queued: deque[int] = field(default_factory=deque)
    lookahead: deque[int] = field(default_factory=deque)
    end_step: int | None = None
    waiting: bool = False  # the model asked for a word that has not arrived yet
    transcript: list[tuple[str, int]] = field(default_factory=list)

    def tokens_ahead(self, n: int) -> list[int]:
        for e in self.entries:
            if e.tokens:
                n -= 1
                if n == 0:
                    return e.tokens
        return []


@dataclass(frozen=True)
class Machine:
    card: int  # text_card + 1: the multiplexing base
    second_stream_ahead: int = 0
    max_padding: int = 8
    initial_padding: int = 2

    def new_state(self, entries: list[Entry], closed: bool = True) -> MachineState:
        return MachineState(deque(entries), self.initial_padding, self.initial_padding, closed=closed)

    def process(self, step: int, st: MachineState, token: int) -> int:
        """The model's text token at `step` -> the token fed back at step + 1 (moshi's rules)."""
        if token not in (NEW_WORD, PAD):
            token = PAD
        if st.queued or st.forced_padding > 0:
            token = PAD
        elif st.remaining_padding <= 0:
            token = NEW_WORD
        st.waiting = False
        if token == NEW_WORD:
            if st.entries:
                e = st.entries.popleft()
                if e.tokens:
                    st.transcript.append((e.text, step))
                    st.queued.extend(e.tokens)
                    if self.second_stream_ahead:
                        st.lookahead.extend(st.tokens_ahead(self.second_stream_ahead))
                    st.remaining_padding = self.max_padding
                else:
                    token = PAD
                st.forced_padding = e.padding
            elif not st.closed:
                # the next word has not arrived: pad now, ask again at the next step
                token = PAD
                st.waiting = True
                st.remaining_padding = 0
            else:
                token = PAD
                if self.second_stream_ahead and st.end_step is None:
                    token = NEW_WORD
                if st.end_step is None:
                    st.end_step = step
        if token == PAD:
            if st.remaining_padding > 0:
                st.remaining_padding -= 1
            if st.forced_padding > 0:
                st.forced_padding -= 1
            out = st.queued.popleft() if st.queued else PAD
        else:
            out = NEW_WORD
        if self.second_stream_ahead:
            second = -1
            if out == NEW_WORD:
                second = NEW_WORD
                out = st.queued.popleft() if st.queued else PAD
            elif st.lookahead:
                second = st.lookahead.popleft()
            out = (second + 1) * self.card + out
        return out
