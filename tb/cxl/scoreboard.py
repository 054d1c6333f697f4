"""Scoreboard of the CXL.mem controller: the responses received against the model's.

Responses may leave the controller in any order, so they are compared as multisets (every
response the model gives must arrive exactly once, and nothing else); the host driver
(:mod:`tb.cxl.host`) separately checks, response by response, that each one carries a tag that
was in flight.
"""

from __future__ import annotations

import collections

from .model import Response

__all__ = ["ScoreboardError", "compare_responses"]


class ScoreboardError(AssertionError):
    """The controller's responses differ from the model's."""


def compare_responses(received: list[Response], expected: list[Response], limit: int = 8):
    """Raise ``ScoreboardError`` unless ``received`` and ``expected`` are equal as multisets.

    The message lists up to ``limit`` missing and unexpected responses.
    """
    got = collections.Counter(received)
    want = collections.Counter(expected)
    missing = list((want - got).elements())
    extra = list((got - want).elements())
    if missing or extra:
        lines = [f"{len(received)} responses received, {len(expected)} expected by the model"]
        if missing:
            lines.append(f"{len(missing)} expected but not received, e.g.:")
            lines += [f"  {r}" for r in missing[:limit]]
        if extra:
            lines.append(f"{len(extra)} received but not expected, e.g.:")
            lines += [f"  {r}" for r in extra[:limit]]
        raise ScoreboardError("\n".join(lines))
