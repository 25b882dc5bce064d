"""Tables of figures that an 80-column terminal never cuts (issue 23: "100." and "50." were cut).

Rich shrinks a too-wide table by wrapping or cropping cells. Here every column is at least as wide as the
longest word of its cells (a figure is one word), the box has no vertical borders (one character per
column saved) and headers wrap between words instead, so what narrows is the headers' layout and the
spacing, never a number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def figure_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
                 left: Sequence[str] = ()) -> Any:
    """A rich Table of `rows` (strings) under `headers`; columns named in `left` are left-aligned."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for i, h in enumerate(headers):
        longest = max((len(w) for r in rows for w in str(r[i]).split()), default=1)
        t.add_column(h, justify="left" if h in left else "right", overflow="fold", min_width=longest)
    for r in rows:
        t.add_row(*(str(c) for c in r))
    return t
