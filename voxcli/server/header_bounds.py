"""The size bounds of a request's head, however its bytes arrive.

h11 bounds only an *incomplete* head (`max_incomplete_event_size`): a 64 KB head that arrives in one
read is parsed and accepted. `head_problem` looks at the bytes buffered for the next request (before
h11 parses them) and names what is over a bound: the request line over `MAX_REQUEST_LINE_BYTES`
(414), or the request line and headers over `MAX_HEADER_BYTES` (431). It reads at most the bound
plus one line ending, so a hostile head costs a bounded scan.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# h11's own default for an incomplete head (uvicorn's too); now the bound of a complete one as well
MAX_HEADER_BYTES = 16 * 1024
# the longest request line (method, target, version): common servers' 8 KB
MAX_REQUEST_LINE_BYTES = 8 * 1024

# h11 ends a head at a blank line, with or without the CR
_HEAD_END = re.compile(rb"\n\r?\n")


class HeadProblem(NamedTuple):
    status: int
    reason: str
    message: str


def head_problem(buffered: bytes) -> HeadProblem | None:
    """None when the head in `buffered` (complete or not yet) is within both bounds."""
    line_end = buffered.find(b"\n", 0, MAX_REQUEST_LINE_BYTES + 2)
    if line_end < 0 and len(buffered) > MAX_REQUEST_LINE_BYTES + 1:  # + 1: the line's own CR
        return HeadProblem(414, "URI Too Long",
                           f"the request line is longer than this server accepts ({MAX_REQUEST_LINE_BYTES} "
                           "bytes); send a shorter path.")
    window = buffered[:MAX_HEADER_BYTES + 4]
    end = _HEAD_END.search(window)
    size = end.end() if end is not None else len(buffered)
    if size > MAX_HEADER_BYTES:
        return HeadProblem(431, "Request Header Fields Too Large",
                           f"the request line and headers are larger than this server accepts "
                           f"({MAX_HEADER_BYTES} bytes); send fewer or shorter headers.")
    return None
