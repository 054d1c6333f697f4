"""Functional golden model: run a schedule on real data with numpy."""

import numpy as np

from .elements import element_type, element_type_of
from .errors import ConfigError
from .schedule import Op


def execute(schedule, data, dtype=None):
    """Run ``schedule`` on one vector per node and return every node's final vector.

    Parameters
    ----------
    schedule : AllReduceSchedule
    data : numpy.ndarray, shape (N, D)
        Row ``v`` is node ``v``'s input, of a type of ``golden_model.elements`` (int32:
        wrap-around addition; float32, bfloat16, float64: IEEE 754, round to nearest even,
        ``golden_model.elements``).
    dtype : str or ElementType, optional
        The element type (default: the one of ``data``'s dtype); ``data`` is converted to it.

    Returns
    -------
    numpy.ndarray, shape (N, D), same dtype
        Every row is the all-reduced vector. Additions happen in the order the schedule defines
        (step order, then transfer order within a step; each transfer reads its source as it was
        at the start of the step), so floating-point results are reproducible bit for bit.

    Raises
    ------
    ConfigError
        If the shape does not match the schedule or the dtype is not an element type's.
    """
    data = np.asarray(data)
    etype = element_type_of(data) if dtype is None else element_type(dtype)
    data = data.astype(etype.dtype, copy=False)
    want = (schedule.num_nodes, schedule.num_elements)
    if data.shape != want:
        raise ConfigError(f"data shape {data.shape} does not match the schedule's {want}")
    buf = data.copy()
    ranges = [schedule.chunk_range(c) for c in range(schedule.num_chunks)]
    for step in schedule.steps:
        payloads = [buf[t.src, slice(*ranges[t.chunk])].copy() for t in step]
        for t, payload in zip(step, payloads):
            dst = buf[t.dst, slice(*ranges[t.chunk])]
            if t.op is Op.REDUCE:
                etype.add(dst, payload)
            else:
                dst[...] = payload
    return buf
