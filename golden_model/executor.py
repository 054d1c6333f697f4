"""Functional golden model: run a schedule on real data with numpy."""

import numpy as np

from .errors import ConfigError
from .schedule import Op

SUPPORTED_DTYPES = (np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.float64))


def execute(schedule, data):
    """Run ``schedule`` on one vector per node and return every node's final vector.

    Parameters
    ----------
    schedule : AllReduceSchedule
    data : numpy.ndarray, shape (N, D)
        Row ``v`` is node ``v``'s input; dtype int32 (wrap-around addition), float32 or float64.

    Returns
    -------
    numpy.ndarray, shape (N, D), same dtype
        Every row is the all-reduced vector. Additions happen in the order the schedule defines
        (step order, then transfer order within a step; each transfer reads its source as it was
        at the start of the step), so floating-point results are reproducible bit for bit.

    Raises
    ------
    ConfigError
        If the shape does not match the schedule or the dtype is not one of int32, float32,
        float64.
    """
    data = np.asarray(data)
    if data.dtype not in SUPPORTED_DTYPES:
        raise ConfigError(f"dtype {data.dtype} not supported: use int32, float32 or float64")
    want = (schedule.num_nodes, schedule.num_elements)
    if data.shape != want:
        raise ConfigError(f"data shape {data.shape} does not match the schedule's {want}")
    buf = data.copy()
    ranges = [schedule.chunk_range(c) for c in range(schedule.num_chunks)]
    # int32 adds wrap around; numpy only warns on scalar overflow, arrays wrap silently.
    for step in schedule.steps:
        payloads = [buf[t.src, slice(*ranges[t.chunk])].copy() for t in step]
        for t, payload in zip(step, payloads):
            dst = buf[t.dst, slice(*ranges[t.chunk])]
            if t.op is Op.REDUCE:
                np.add(dst, payload, out=dst)
            else:
                dst[...] = payload
    return buf
