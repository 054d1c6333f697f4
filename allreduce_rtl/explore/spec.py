"""An exploration spec: a TOML file (read with ``tomllib``) validated once into a list of points.

The format (docs/explore.md has the full reference and the shipped examples)::

    title = "..."                        # optional, the summary's heading
    evaluations = ["model", "rtl", "cost"]   # at least one

    [parameters]                         # each: one value, a list, or a range table
    topology = ["torus:4x4", "mesh:4x4"]
    algorithm = ["ring", "multitree"]
    size = "32KiB:64MiB"                 # FROM:TO doubling, or a list, or {from, to, factor}
    link_latency = 150

    [rtl]                                # options of the rtl evaluation
    simulator = "verilator"

    [cost]                               # options of the cost evaluation
    device = "generic"                   # or an FPGA of `allreduce-rtl cost --device`

    [[exclude]]                          # drop the points matching every key given
    topology = "mesh:4x4"
    algorithm = "dbtree"

A point is one combination of every parameter (the product of the lists, less the excluded
ones), evaluated by every evaluation named. Its key (:attr:`Point.key`) is the canonical JSON of
its parameters and of what its evaluations are asked to do, so the results store holds each at
most once and ``--resume`` recognises it. Points of the hardware evaluations that share every
hardware parameter form one hardware group: one plan (``allreduce_rtl.plan.plan_hardware``, for
all the group's algorithms and sizes) and so one build of the network.

Every error is a ``ConfigError`` naming the key, the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import tomllib
from pathlib import Path

from golden_model.algorithms import ALGORITHMS
from golden_model.errors import ConfigError
from golden_model.timing import LINK_ORDERS
from golden_model.topology import (DEFAULT_LINK_BANDWIDTH, DEFAULT_LINK_LATENCY,
                                   MAX_LINK_BANDWIDTH, MIN_LINK_BANDWIDTH)
from golden_model.units import format_size, parse_size

__all__ = ["EVALUATIONS", "PARAMETERS", "HARDWARE_PARAMETERS", "Point", "ExploreSpec",
           "load_spec", "parse_spec", "queued", "EXAMPLES_DIR", "examples", "resolve_spec_path",
           "MAX_POINTS"]

#: The evaluations a point can ask for: the timing model (``golden_model.compare``), the RTL
#: simulated and checked bit for bit (``tb.runner``), and synthesis (``allreduce_rtl.synth``).
EVALUATIONS = ("model", "rtl", "cost")
#: An exploration larger than this is refused (a typo in a range, not a study).
MAX_POINTS = 100_000
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One parameter of the spec: its kind, its default (``None``: required, or for ``dtype``
    and ``rx_buffer_depth`` the hardware plan's choice), which evaluations read it, and the
    allowed values (``choices``) or range (``low``, ``high``)."""
    name: str
    kind: type
    default: object
    used_by: frozenset
    help: str
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    required: bool = False


def _hardware_limits():
    from hdl.adders import ADDERS  # noqa: PLC0415
    from hdl.config import MAX_LINK_STAGES  # noqa: PLC0415
    from hdl.router.router import MAX_VC_BUF_DEPTH, MAX_VCS  # noqa: PLC0415
    return tuple(ADDERS), MAX_LINK_STAGES, MAX_VCS, MAX_VC_BUF_DEPTH


_ALL, _HW = frozenset(EVALUATIONS), frozenset({"rtl", "cost"})


def _parameters():
    dtypes, max_stages, max_vcs, max_vc_depth = _hardware_limits()
    params = [
        Parameter("topology", str, None, _ALL, "a topology spec, e.g. torus:4x4", required=True),
        Parameter("algorithm", str, None, _ALL, "an algorithm name",
                  choices=tuple(ALGORITHMS), required=True),
        Parameter("size", int, None, _ALL, "bytes per node, e.g. 1MiB", low=1,
                  required=True),
        Parameter("link_latency", int, DEFAULT_LINK_LATENCY, _ALL, "cycles per link direction",
                  low=0, high=max_stages),
        Parameter("link_bandwidth", float, DEFAULT_LINK_BANDWIDTH, frozenset({"model"}),
                  "GB/s per link per direction (the hardware's links carry one 128-bit flit "
                  "per cycle)", low=MIN_LINK_BANDWIDTH, high=MAX_LINK_BANDWIDTH),
        Parameter("timing", str, "hardware", frozenset({"model"}),
                  "how the model's links serve their transfers", choices=LINK_ORDERS),
        Parameter("dtype", str, None, _ALL, "element type (absent: the hardware's default, "
                  "float32 on links, int32 on routers)", choices=dtypes),
        Parameter("flow_control", str, "message", _HW, "per-link flow control",
                  choices=("message", "credit")),
        Parameter("buffer_copies", int, 1, _HW, "copies of each NI buffer bank",
                  choices=(1, 2)),
        Parameter("router", bool, False, _HW, "NIs on routers even where links suffice",
                  choices=(False, True)),
        Parameter("rx_buffer_depth", int, None, _HW, "flits of each receive FIFO (absent: "
                  "the plan's, deep enough for full rate; it may only grow)", low=1,
                  high=1 << 16),
        Parameter("router_vcs", int, 2, frozenset({"rtl"}), "virtual channels per router port "
                  "where the NIs sit on routers (even on a torus)", low=1, high=max_vcs),
        Parameter("router_vc_buf_depth", int, None, frozenset({"rtl"}), "flits per router VC "
                  "buffer (absent: deep enough for full rate)", low=2, high=max_vc_depth),
    ]
    return {p.name: p for p in params}


PARAMETERS = _parameters()
#: The parameters that decide the hardware: points equal in these share one plan and build.
HARDWARE_PARAMETERS = ("topology", "link_latency", "dtype", "flow_control", "buffer_copies",
                       "router", "rx_buffer_depth", "router_vcs", "router_vc_buf_depth")
_TOP_KEYS = {"title", "evaluations", "parameters", "rtl", "cost", "exclude"}
_RTL_OPTIONS = {"simulator": ("verilator", "icarus")}
_COST_DEFAULT = "generic"


@dataclasses.dataclass(frozen=True)
class Point:
    """One point of an exploration.

    Attributes
    ----------
    params : dict
        Every parameter of :data:`PARAMETERS` (defaults filled in), sizes in bytes.
    evaluations : tuple of str
        In :data:`EVALUATIONS` order.
    options : dict
        ``simulator`` (rtl) and ``device`` (cost) where those evaluations are asked for.
    group : dict or None
        The hardware group's plan inputs (``HARDWARE_PARAMETERS`` plus every ``algorithms``
        and ``sizes`` of the group's points) when rtl or cost is asked for.
    """
    params: dict
    evaluations: tuple
    options: dict
    group: dict | None = None

    @property
    def key(self) -> str:
        """Canonical JSON of what decides the point's figures: the parameters that differ from
        their defaults (so a parameter added in a later version, at its default, keeps the keys
        of stored points), the evaluations, their options and, with rtl or cost, the hardware
        group's plan inputs (adding a size or an algorithm to a group re-plans its hardware, so
        its points are new points). The store's unique key."""
        params = {k: v for k, v in self.params.items()
                  if PARAMETERS[k].required or v != PARAMETERS[k].default}
        return json.dumps({"params": params, "evaluations": list(self.evaluations),
                           "options": self.options, "group": self.group}, sort_keys=True,
                          separators=(",", ":"))

    def describe(self) -> str:
        p = self.params
        return f"{p['topology']} {p['algorithm']} {format_size(p['size'])}"


@dataclasses.dataclass(frozen=True)
class ExploreSpec:
    """A validated spec: its title, its source text, its points (in the order of the
    parameters' product; :func:`queued` gives the order to run them) and the file it was read
    from (a shipped example's own path; None for a text parsed directly)."""
    title: str
    source: str
    evaluations: tuple
    points: tuple
    path: Path | None = None


def _where(path):
    return f"in {path}: " if path else ""


def _range(name, table, kind):
    """The values of a range table ``{from, to, step}`` (arithmetic) or ``{from, to, factor}``
    (geometric), ``to`` included when the range reaches it. Values are computed from ``from``
    by index (``from + i * step``, ``from * factor ** i``), floats rounded to 12 significant
    digits (so 1.0 to 1.5 by 0.1 is 1.0, 1.1, ..., 1.5), whole numbers of a geometric range
    rounded to the nearest (repeats dropped)."""
    unknown = set(table) - {"from", "to", "step", "factor"}
    if unknown:
        raise ConfigError(f"parameters.{name}: unknown range key {sorted(unknown)[0]!r} "
                          f"(a range has from, to and step or factor)")
    if "from" not in table or "to" not in table or ("step" in table) == ("factor" in table):
        raise ConfigError(f"parameters.{name}: a range needs from, to and one of step or "
                          f"factor, e.g. {{from = 4, to = 64, factor = 2}}")
    lo, hi = (_scalar(name, table[k], kind) for k in ("from", "to"))
    for key, v in (("from", lo), ("to", hi)):
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"parameters.{name}: range {key} {v!r} is not a finite number")
    if lo > hi:
        raise ConfigError(f"parameters.{name}: range from {table['from']!r} exceeds to "
                          f"{table['to']!r}")
    if "step" in table:
        step = _scalar(name, table["step"], kind)
        if not (isinstance(step, int) or math.isfinite(step)) or not step > 0:
            raise ConfigError(f"parameters.{name}: step {table['step']!r} must be a positive "
                              f"finite number")
        count = math.floor((hi - lo) / step * (1 + 1e-12)) + 1
        at = (lambda i: lo + i * step)
    else:
        factor = table["factor"]
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) \
                or not math.isfinite(factor) or not factor > 1:
            raise ConfigError(f"parameters.{name}: factor {factor!r} must be a finite number "
                              f"above 1")
        if not lo > 0:
            raise ConfigError(f"parameters.{name}: a geometric range starts above 0, not "
                              f"{table['from']!r}")
        count = math.floor(math.log(hi / lo) / math.log(factor) * (1 + 1e-12)) + 1
        at = (lambda i: lo * factor ** i)
    if count > MAX_POINTS:
        raise ConfigError(f"parameters.{name}: the range from {table['from']!r} to "
                          f"{table['to']!r} has {count:,} values, more than {MAX_POINTS:,}")
    values = []
    for i in range(count):
        v = at(i)
        v = round(v) if kind is int else float(f"{v:.12g}")
        if v not in values:
            values.append(v)
    return values


def _scalar(name, value, kind):
    """One value of parameter ``name`` as ``kind`` (sizes may be written ``"64MiB"``)."""
    if name == "size" and isinstance(value, str):
        return parse_size(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        what = {str: "a string", int: "a whole number", float: "a number",
                bool: "true or false"}[kind]
        raise ConfigError(f"parameters.{name}: {value!r} is not {what}")
    return value


def _values(name, raw):
    """Every value of parameter ``name`` from its spec entry, validated."""
    p = PARAMETERS[name]
    if isinstance(raw, dict):
        values = _range(name, raw, p.kind)
    elif name == "size" and isinstance(raw, str) and ":" in raw:
        from ..commands import parse_size_range  # noqa: PLC0415
        try:
            values = parse_size_range(raw)
        except ConfigError as exc:
            raise ConfigError(f"parameters.size: {exc}") from None
    else:
        values = [_scalar(name, v, p.kind) for v in (raw if isinstance(raw, list) else [raw])]
    if not values:
        raise ConfigError(f"parameters.{name}: an empty list (give at least one value)")
    if name == "algorithm":
        values = [v.lower() for v in values]
    if name == "topology":          # the normalised spec ("TORUS:04x4" is "torus:4x4")
        from golden_model.topology import parse_topology  # noqa: PLC0415
        checked = []
        for v in values:
            try:
                checked.append(parse_topology(v).spec)
            except ConfigError as exc:
                raise ConfigError(f"parameters.topology: {exc}") from None
        values = checked
    if len(set(values)) != len(values):
        dup = next(v for v in values if values.count(v) > 1)
        raise ConfigError(f"parameters.{name}: {dup!r} is listed twice")
    for v in values:
        _check_value(p, v)
    return values


def _check_value(p, v):
    if p.choices and v not in p.choices:
        raise ConfigError(f"parameters.{p.name}: {v!r} is not one of "
                          f"{', '.join(map(str, p.choices))}")
    if (p.low is not None and v < p.low) or (p.high is not None and v > p.high) \
            or (isinstance(v, float) and math.isnan(v)):
        hi = f" and at most {p.high:,}" if p.high is not None else ""
        raise ConfigError(f"parameters.{p.name}: {v!r} must be at least {p.low:,}{hi} "
                          f"({p.help})")


def _element_bytes(dtype):
    from golden_model.elements import element_type  # noqa: PLC0415
    from ..plan import DEFAULT_DTYPE, ROUTED_DEFAULT_DTYPE  # noqa: PLC0415
    if dtype is None:
        sizes = {element_type(t).bytes for t in (DEFAULT_DTYPE, ROUTED_DEFAULT_DTYPE)}
        assert len(sizes) == 1, "the default element types differ in size"
        return sizes.pop()
    return element_type(dtype).bytes


def elements_of(params) -> int:
    """Elements per node of a point (its ``size`` in its element type's bytes)."""
    return params["size"] // _element_bytes(params["dtype"])


def _options(doc, evaluations):
    options = {}
    rtl = doc.get("rtl", {})
    cost = doc.get("cost", {})
    for section, table in (("rtl", rtl), ("cost", cost)):
        if not isinstance(table, dict):
            raise ConfigError(f"[{section}] must be a table, not {table!r}")
        if table and section not in evaluations:
            raise ConfigError(f"[{section}] gives options of the {section} evaluation, which "
                              f"'evaluations' does not ask for")
    unknown = set(rtl) - set(_RTL_OPTIONS)
    if unknown:
        raise ConfigError(f"[rtl]: unknown option {sorted(unknown)[0]!r} (allowed: "
                          f"{', '.join(_RTL_OPTIONS)})")
    if "rtl" in evaluations:
        sim = rtl.get("simulator", "verilator")
        if not isinstance(sim, str) or sim not in _RTL_OPTIONS["simulator"]:
            raise ConfigError(f"[rtl] simulator: {sim!r} is not one of "
                              f"{', '.join(_RTL_OPTIONS['simulator'])}")
        options["simulator"] = sim
    unknown = set(cost) - {"device"}
    if unknown:
        raise ConfigError(f"[cost]: unknown option {sorted(unknown)[0]!r} (allowed: device)")
    if "cost" in evaluations:
        from ..synth import DEVICES  # noqa: PLC0415
        device = cost.get("device", _COST_DEFAULT)
        if not isinstance(device, str) or (device != _COST_DEFAULT and device not in DEVICES):
            raise ConfigError(f"[cost] device: {device!r} is not {_COST_DEFAULT} or one of "
                              f"{', '.join(DEVICES)}")
        options["device"] = device
    return options


def _excludes(doc):
    rules = doc.get("exclude", [])
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ConfigError("exclude must be a list of tables: [[exclude]] with parameter = value")
    out = []
    for rule in rules:
        if not rule:
            raise ConfigError("an [[exclude]] table is empty (it would drop every point)")
        checked = {}
        for name, raw in rule.items():
            if name not in PARAMETERS:
                raise ConfigError(f"[[exclude]]: unknown parameter {name!r} (allowed: "
                                  f"{', '.join(PARAMETERS)})")
            try:
                checked[name] = set(_values(name, raw))
            except ConfigError as exc:
                raise ConfigError(f"[[exclude]] {exc}") from None
        out.append(checked)
    return out


def parse_spec(text, path=None) -> ExploreSpec:
    """Validate a spec's TOML ``text`` (``path`` for messages) into an :class:`ExploreSpec`.

    Raises
    ------
    ConfigError
        On malformed TOML (with its line), an unknown key, a bad value (named, with what is
        allowed), a hardware parameter with several values when no hardware evaluation reads
        it, no point left after the excludes, or more than :data:`MAX_POINTS` points.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{_where(path)}not valid TOML: {exc}") from None
    try:
        return _parse(doc, text)
    except ConfigError as exc:
        raise ConfigError(f"{_where(path)}{exc}") from None


def _parse(doc, text):
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"unknown key {sorted(unknown)[0]!r} (allowed: "
                          f"{', '.join(sorted(_TOP_KEYS))})")
    title = doc.get("title", "Exploration")
    if not isinstance(title, str) or not title.strip() or "\n" in title or "\r" in title:
        raise ConfigError(f"title: {title!r} is not a non-empty single line of text")
    title = title.strip()
    evals = doc.get("evaluations")
    if evals is None:
        raise ConfigError(f"'evaluations' is missing: a list of {', '.join(EVALUATIONS)}")
    evals = [evals] if isinstance(evals, str) else evals
    if not isinstance(evals, list) or not evals or any(e not in EVALUATIONS for e in evals):
        raise ConfigError(f"evaluations: {evals!r} is not a non-empty list of "
                          f"{', '.join(EVALUATIONS)}")
    evaluations = tuple(e for e in EVALUATIONS if e in evals)
    table = doc.get("parameters")
    if not isinstance(table, dict):
        raise ConfigError("[parameters] is missing: at least topology, algorithm and size")
    unknown = set(table) - set(PARAMETERS)
    if unknown:
        raise ConfigError(f"parameters: unknown parameter {sorted(unknown)[0]!r} (allowed: "
                          f"{', '.join(PARAMETERS)})")
    values = {}
    for name, p in PARAMETERS.items():
        if name in table:
            values[name] = _values(name, table[name])
            if len(values[name]) > 1 and not p.used_by & set(evaluations):
                raise ConfigError(f"parameters.{name} has {len(values[name])} values, but only "
                                  f"the {' and '.join(sorted(p.used_by))} evaluation reads it "
                                  f"and 'evaluations' is {list(evaluations)}")
        elif p.required:
            raise ConfigError(f"parameters.{name} is missing ({p.help})")
        else:
            values[name] = [p.default]
    options = _options(doc, evaluations)
    excludes = _excludes(doc)
    total = math.prod(len(v) for v in values.values())
    if total > MAX_POINTS:
        raise ConfigError(f"the parameters make {total:,} points, more than {MAX_POINTS:,}")
    combos = [dict(zip(values, combo)) for combo in itertools.product(*values.values())]
    for i, rule in enumerate(excludes):
        if not any(all(c[k] in vs for k, vs in rule.items()) for c in combos):
            shown = ", ".join(f"{k} = {sorted(vs, key=str)}" for k, vs in rule.items())
            raise ConfigError(f"[[exclude]] #{i + 1} ({shown}) matches no point: a typo?")
    combos = [c for c in combos
              if not any(all(c[k] in vs for k, vs in rule.items()) for rule in excludes)]
    if not combos:
        raise ConfigError("every point is excluded by [[exclude]]")
    from golden_model.compare import elements_for  # noqa: PLC0415
    from golden_model.timing import TimingParams  # noqa: PLC0415
    for c in combos:
        try:        # the one check of a size: whole elements, at most MAX_ELEMENTS of them
            elements_for(c["size"], TimingParams(element_bytes=_element_bytes(c["dtype"])))
        except ConfigError as exc:
            raise ConfigError(f"parameters.size: {exc}") from None
    return ExploreSpec(title, text, evaluations, _points(combos, evaluations, options))


def _points(combos, evaluations, options):
    hardware = bool(set(evaluations) & _HW)
    groups = {}
    if hardware:
        for c in combos:
            g = groups.setdefault(tuple(c[k] for k in HARDWARE_PARAMETERS),
                                  {"algorithms": [], "sizes": []})
            for field, value in (("algorithms", c["algorithm"]), ("sizes", c["size"])):
                if value not in g[field]:
                    g[field].append(value)

    def group_of(c):
        if not hardware:
            return None
        g = groups[tuple(c[k] for k in HARDWARE_PARAMETERS)]
        return {**{k: c[k] for k in HARDWARE_PARAMETERS}, "algorithms": g["algorithms"],
                "sizes": sorted(g["sizes"])}

    return tuple(Point(c, evaluations, options, group_of(c)) for c in combos)


def queued(points) -> list:
    """``points`` in the order to run them: round robin over the hardware groups (the first
    point of every group, then the second, ...), so that workers running at once build different
    configurations and a group's later points find its build done (on that worker, or on the
    host under the build cache's lock). Points without hardware keep their order."""
    rank, seen = [], {}
    for p in points:
        g = json.dumps(p.group and {k: p.group[k] for k in HARDWARE_PARAMETERS}, sort_keys=True)
        rank.append(seen.get(g, 0))
        seen[g] = seen.get(g, 0) + 1
    return [p for _, p in sorted(zip(rank, points), key=lambda x: x[0])]


def examples() -> dict:
    """``{name: path}`` of the specs shipped as package data."""
    return {p.stem: p for p in sorted(EXAMPLES_DIR.glob("*.toml"))}


def resolve_spec_path(text) -> Path:
    """The spec file ``text`` names: a path, or a shipped example by its name or as
    ``examples/NAME.toml`` relative to the current folder when no such file is there (so the
    README's command works from a wheel install too).

    Raises
    ------
    ConfigError
        If it is neither (the message lists the shipped examples).
    """
    path = Path(text)
    if path.is_file():
        return path
    if path.exists() and not path.is_dir():
        raise ConfigError(f"spec {text!r} is not a regular file")
    shipped = examples()
    name = path.stem if path.suffix == ".toml" else path.name
    if name in shipped and path.parent in (Path("."), Path("examples")):
        return shipped[name]
    what = "is a folder" if path.is_dir() else "does not exist"
    raise ConfigError(f"spec {text!r} {what}: give a TOML file or a shipped example "
                      f"({', '.join(shipped)}; explore --examples lists them)")


def load_spec(text) -> ExploreSpec:
    """Read and validate the spec file or shipped example ``text`` (:func:`resolve_spec_path`).

    Raises
    ------
    ConfigError
        As :func:`resolve_spec_path` and :func:`parse_spec`, or if the file cannot be read or
        is not UTF-8.
    """
    path = resolve_spec_path(text)
    if not path.is_file():
        raise ConfigError(f"spec {str(text)!r} is not a regular file")
    try:
        source = path.read_text(encoding="utf-8-sig")     # a byte-order mark is dropped
    except UnicodeDecodeError:
        raise ConfigError(f"spec {str(path)!r} is not UTF-8 text (TOML is UTF-8)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read spec {str(path)!r}: {exc.strerror or exc}") from None
    return dataclasses.replace(parse_spec(source, str(path)), path=path)
