"""Tables of figures that a terminal of any width (80 columns and up) never cuts (issues 23 and 32: "100."
printed as "10", a whole column dropped, headers broken mid-word as "rej/ect/ed").

Left to itself, rich shrinks a too-wide table by wrapping, folding or cropping cells, and drops columns it
cannot fit. Here the widths are chosen at render time, for the width the console has:
- every column is at least as wide as the longest word of its header and of its cells (a figure is one
  word), so a figure is never cut and a header wraps between words, never inside one;
- when even those widths do not fit, the columns are dealt into several tables one under the other, each
  repeating the first column (the row's key: a rate, a split, a policy), instead of cutting anything;
- the box has no vertical borders and no edges (a character per column saved, and two per table).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.table import Table

PROSE_MIN = 16  # a prose column narrows to this before the table is dealt into parts


# what a table adds to its columns' widths: a pad either side of each column but the outer two (pad_edge
# False) and a divider between columns (box.SIMPLE_HEAD draws it as a space; no edges: show_edge False)
def _overhead(columns: int) -> int:
    return 3 * columns - 3


class FigureTable(Table):
    """A rich Table that lays itself out for the console's width so that no word is ever cut (module
    docstring). Build it with `figure_table`."""

    def __init__(self, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
                 left: Sequence[str] = (), widths: Sequence[int] | None = None,
                 prose: Sequence[str] = ()) -> None:
        super().__init__(title=title or None, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                         show_edge=False)
        self._spec = (title, tuple(headers), [tuple(str(c) for c in r) for r in rows], tuple(left),
                      tuple(prose))
        texts = [(h, *(r[i] for r in self._spec[2])) for i, h in enumerate(headers)]  # per column
        self._least = [min(PROSE_MIN, longest) if h in prose else longest
                       for h, longest in zip(headers, (max((cell_len(w) for t in col for w in t.split()),
                                                           default=1) for col in texts), strict=True)]
        self._most = [max((cell_len(t) for t in col), default=1) for col in texts]
        for i, h in enumerate(headers):
            fixed = widths[i] if widths is not None else None
            self.add_column(h, justify="left" if h in left else "right", overflow="fold",
                            min_width=self._least[i], width=fixed)
        for r in self._spec[2]:
            self.add_row(*r)

    def least_width(self) -> int:
        """The narrowest this table renders without cutting a word (its columns in one table)."""
        return sum(self._least) + _overhead(len(self._least))

    def _layouts(self, width: int) -> Iterator[FigureTable]:
        """The tables to print at `width`: this one when it fits as it is, else with each column given its
        longest word plus a share of the room left, else its columns dealt into several tables."""
        title, headers, rows, left, prose = self._spec
        n = len(headers)
        if sum(self._most) + _overhead(n) <= width or n < 2:
            yield self
            return
        if self.least_width() <= width:
            room = width - self.least_width()
            want = [m - least for m, least in zip(self._most, self._least, strict=True)]
            total = sum(want) or 1
            widths = [least + room * w // total for least, w in zip(self._least, want, strict=True)]
            yield FigureTable(title, headers, rows, left, widths, prose)
            return
        if n == 2:  # a key and one column wider than the console: nothing left to deal (rich folds it)
            yield self
            return
        # deal the columns after the first into groups that fit beside it
        groups: list[list[int]] = [[]]
        for i in range(1, n):
            trial = [0, *groups[-1], i]
            if groups[-1] and sum(self._least[j] for j in trial) + _overhead(len(trial)) > width:
                groups.append([])
            groups[-1].append(i)
        for k, group in enumerate(groups):
            cols = [0, *group]
            part = FigureTable(title if k == 0 else f"{title} (continued)", [headers[j] for j in cols],
                               [[r[j] for j in cols] for r in rows], left, prose=prose)
            yield from part._layouts(width)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        tables = list(self._layouts(options.max_width))
        if tables == [self]:
            yield from super().__rich_console__(console, options)
            return
        for t in tables:
            yield from Table.__rich_console__(t, console, options)


def figure_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
                 left: Sequence[str] = (), prose: Sequence[str] = ()) -> FigureTable:
    """A table of `rows` (strings) under `headers` that never cuts a figure; columns named in `left` are
    left-aligned (the rest, figures, right-aligned); columns named in `prose` hold running text, which
    wraps between words and may fold a word longer than PROSE_MIN (a long id in a description)."""
    return FigureTable(title, headers, rows, left, prose=prose)
