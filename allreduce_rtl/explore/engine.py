"""Where many independent tasks run: a Dask ``distributed`` cluster, the embedded local one by
default or an existing one by its scheduler address; or, for the commands that also run small
jobs (``sweep``, ``report``), in this process when neither is asked for.

The local cluster has one single-threaded worker process per core (``LocalCluster``), started
and stopped here. Dask re-runs the tasks of a worker that dies on another worker (up to its
``distributed.scheduler.allowed-failures``, 3 by default); a task that still fails comes back
as an :class:`Outcome` with its error, and the other tasks go on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import socket
import sys
import time
import warnings

from tqdm import tqdm

from golden_model.errors import ConfigError

from ..errors import EnvironmentFailure

__all__ = ["Outcome", "cluster", "outcomes", "map_ordered", "default_workers", "check_address",
           "CONNECT_TIMEOUT_S"]

#: Seconds to wait for an external scheduler to answer.
CONNECT_TIMEOUT_S = 20


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:       # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclasses.dataclass
class Outcome:
    """What one task gave: ``value`` or, if it raised or its workers died, ``error`` (one
    line: the exception's type and message)."""
    index: int
    value: object = None
    error: str | None = None


def check_address(address):
    """``(host, port)`` of a scheduler address ``tcp://HOST:PORT`` or ``tls://HOST:PORT`` (a
    bare ``HOST:PORT`` is TCP).

    Raises
    ------
    ConfigError
        On any other form, or a port outside 1..65535.
    """
    m = re.fullmatch(r"(?:(tcp|tls)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})",
                     str(address).strip())
    if not m or not 1 <= int(m.group(3)) <= 65535:
        raise ConfigError(f"--scheduler {address!r} is not a Dask scheduler address: expected "
                          f"tcp://HOST:PORT (or tls://HOST:PORT), port 1..65535")
    return m.group(2).strip("[]"), int(m.group(3))


@contextlib.contextmanager
def cluster(workers=None, scheduler=None):
    """A ``distributed.Client``: on the cluster at ``scheduler`` (``tcp://HOST:PORT``), else on
    a local cluster of ``workers`` processes (default :func:`default_workers`), closed on exit.

    Raises
    ------
    ConfigError
        If ``scheduler`` is not an address (:func:`check_address`).
    EnvironmentFailure
        If the scheduler cannot be reached within :data:`CONNECT_TIMEOUT_S` seconds or has no
        worker by then, or the local cluster does not start.
    """
    if scheduler is not None:
        host, port = check_address(scheduler)
        try:    # fail at once, in one line, where nothing listens (Dask would retry 20 s)
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            raise EnvironmentFailure(f"cannot reach the Dask scheduler at {scheduler}: "
                                     f"{exc.strerror or exc}") from None
    import distributed  # noqa: PLC0415
    # Dask's own log lines (a worker restarting, a closed comm) and its warning that the
    # default HTTP port is taken (another cluster runs) would break the progress bar; what
    # matters reaches the user as an Outcome.
    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
    local = None
    try:
        if scheduler is not None:
            client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S,
                                        set_as_default=False)
            try:
                client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
            except TimeoutError:
                client.close()
                raise EnvironmentFailure(f"the Dask scheduler at {scheduler} has no workers "
                                         f"(waited {CONNECT_TIMEOUT_S} s): start some with "
                                         f"dask worker {scheduler}") from None
        else:
            local = distributed.LocalCluster(n_workers=workers or default_workers(),
                                             threads_per_worker=1, processes=True,
                                             dashboard_address=None,
                                             silence_logs=logging.CRITICAL)
            client = distributed.Client(local, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        where = f"the Dask scheduler at {scheduler}" if scheduler else "a local Dask cluster"
        raise EnvironmentFailure(f"cannot reach {where}: {exc}") from None
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close()
        if local is not None:
            with contextlib.suppress(Exception):
                local.close()


def _one_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def outcomes(client, func, items, *, priorities=None, on_progress=None):
    """Run ``func(item)`` for every item on ``client`` as one task each; yield an
    :class:`Outcome` per task as it finishes (in finishing order).

    ``priorities`` (one per item; higher runs first) orders the queue; ``on_progress(running)``
    is called at most once a second with the number of tasks running.
    """
    import distributed  # noqa: PLC0415
    items = list(items)
    priorities = priorities or [0] * len(items)
    futures = {client.submit(func, item, pure=False, priority=p): i
               for i, (item, p) in enumerate(zip(items, priorities))}
    last = 0.0
    try:
        for fut in distributed.as_completed(futures, loop=client.loop):
            i = futures.pop(fut)
            if fut.status == "finished":
                yield Outcome(i, value=fut.result())
            else:
                yield Outcome(i, error=_one_line(fut.exception()))
            fut.release()
            if on_progress is not None and time.monotonic() - last >= 1.0:
                last = time.monotonic()
                with contextlib.suppress(Exception):
                    # processing counts the tasks queued on workers too: at most one per thread
                    slots = sum(client.nthreads().values())
                    on_progress(min(slots, sum(len(v) for v in client.processing().values())))
    finally:
        if futures:
            with contextlib.suppress(Exception):
                client.cancel(list(futures))


def map_ordered(func, items, *, workers=None, scheduler=None, desc="run", unit="task"):
    """``[func(item) for item in items]`` with a progress bar: in this process unless
    ``workers`` or ``scheduler`` is given, else on that Dask cluster (:func:`cluster`). The
    first task that raises re-raises here (a ``ConfigError`` stays one)."""
    items = list(items)
    if workers is None and scheduler is None:
        with tqdm(total=len(items), desc=desc, unit=unit, file=sys.stderr) as bar:
            results = []
            for item in items:
                results.append(func(item))
                bar.update()
            return results
    import distributed  # noqa: PLC0415
    results = [None] * len(items)
    with cluster(workers, scheduler) as client, \
            tqdm(total=len(items), desc=desc, unit=unit, file=sys.stderr) as bar:
        futures = {client.submit(func, item, pure=False, priority=-i): i
                   for i, item in enumerate(items)}
        for fut in distributed.as_completed(futures, loop=client.loop):
            results[futures[fut]] = fut.result()
            bar.update()
    return results
