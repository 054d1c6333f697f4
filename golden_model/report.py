"""The standard training-time report: what runs, the headline comparison with the papers, and the
Markdown text.

The standard set (issue 4): every workload of ``workloads.MODELS`` with every all-reduce
algorithm on torus and mesh 4x4 and 8x8 (``training.train``, overlapped and not), the speed-up
against size sweeps of the golden-model issue (32 KiB to 64 MiB, doubling, ``compare.compare``)
on the same topologies, and the sensitivity of the training-time reduction to the mini-batch.
The work is cut into ``Unit``s so the command line can show progress; ``run_unit`` computes one,
``assemble`` gathers them, ``render_markdown`` writes the report (plots are drawn by the command
line, which owns matplotlib).

Headline numbers (``PAPER_HEADLINES``): MultiTree (Huang et al., ISCA 2021, abstract, see
``references.md``): 2.3x and 1.56x communication speed-up, up to 81% and 30% training-time
reduction, against ring all-reduce and the prior state of the art; COARSE (Wang et al., HPCA
2022, abstract): up to 48.3% faster training than MPI all-reduce (ours: the COARSE section
below). Ours are computed on the same kind of workload: the MultiTree authors' run script for
the workloads uses a 4x4 torus of 16 nodes (``farabimahmud/accelerator``,
``utils/main_slurm.py``), so the headline column uses ``torus:4x4``. "Prior state of the art" is, per workload, the fastest of the
other baselines implemented here (``PRIOR_ART``); the authors' baselines differ (their scripts
include an MXNet tree; we have halving-doubling). Speed-ups are geometric means over the
workloads (as the authors' ``utils/plot_main_results.py`` averages); "up to" figures are maxima
over the workloads.

COARSE section (issue 5): every workload on the default COARSE system
(``coarse.CoarseConfig()``, the cloud V100 machine's 9 and 16 GB/s paths, 8 workers, 4 memory
devices) against MPI ring all-reduce over the same links (``coarse.compare_system``, overlapped
and not), and the sweep over link asymmetry (``coarse.sweep_asymmetry``) of the mini-batch
table's workload at the report's mini-batch and at ``COARSE_SWEEP_BATCH``. Its headline figure
is the largest ``faster`` (``T_mpi / T_coarse - 1``) over the workloads.
"""

from dataclasses import asdict, dataclass, field, replace
from statistics import geometric_mean

from .coarse import ASSUMPTIONS as COARSE_ASSUMPTIONS
from .coarse import CoarseConfig, compare_system, sweep_asymmetry
from .compare import compare
from .timing import LINK_ORDER_WORDS
from .training import TrainingOptions, cached_topology, train
from .units import format_size
from .workloads import MODELS, get_model

__all__ = ["STANDARD_TOPOLOGIES", "SWEEP_SIZES", "PAPER_TOPOLOGY", "PRIOR_ART", "BATCH_SWEEP",
           "PAPER_HEADLINES", "ReportSettings", "Unit", "plan", "run_unit", "assemble",
           "render_markdown", "markdown_table"]

STANDARD_TOPOLOGIES = ("torus:4x4", "torus:8x8", "mesh:4x4", "mesh:8x8")
SWEEP_SIZES = tuple((32 << 10) << i for i in range(12))         # 32 KiB .. 64 MiB
PAPER_TOPOLOGY = "torus:4x4"
PRIOR_ART = ("ring2d", "dbtree", "halving-doubling")
BATCH_SWEEP = (16, 32, 64, 128, 256)     # 1 to 16 samples per vault
BATCH_MODEL, BATCH_TOPOLOGY = "resnet50", "torus:8x8"
MULTITREE = "multitree"
COARSE_SWEEP_BATCH = 32      # a second sweep where communication matters more

PAPER_HEADLINES = (
    ("MultiTree: communication speed-up against ring", "2.3x", "speedup_ring"),
    ("MultiTree: training-time reduction against ring, up to", "81%", "reduction_ring"),
    ("MultiTree: communication speed-up against the prior state of the art", "1.56x",
     "speedup_prior"),
    ("MultiTree: training-time reduction against the prior state of the art, up to", "30%",
     "reduction_prior"),
    ("COARSE: faster training than MPI all-reduce, up to", "48.3%", "coarse_faster"),
)


@dataclass(frozen=True)
class ReportSettings:
    """What the report runs.

    Parameters
    ----------
    topologies : tuple of str
        Topology specs (default ``STANDARD_TOPOLOGIES``).
    models : tuple of str
        Workload names (default: all of ``MODELS``).
    sizes : tuple of int
        Sweep sizes in bytes (default ``SWEEP_SIZES``).
    algorithms : tuple of str or None
        Algorithms (default: every one that can run on each topology).
    link_bandwidth : float
        GB/s per link per direction (default 16).
    link_latency : int
        Cycles per link (default 150).
    training : TrainingOptions
        Mini-batch, bucket size, accelerator and timing parameters (``overlap`` is ignored: the
        report evaluates both).
    batch_sweep : tuple of int
        Mini-batches of the sensitivity table (default ``BATCH_SWEEP``).
    coarse : CoarseConfig or None
        The COARSE system of the COARSE section (default ``CoarseConfig()``; None: no section).
    """
    topologies: tuple = STANDARD_TOPOLOGIES
    models: tuple = tuple(MODELS)
    sizes: tuple = SWEEP_SIZES
    algorithms: tuple | None = None
    link_bandwidth: float = 16.0
    link_latency: int = 150
    training: TrainingOptions = field(default_factory=TrainingOptions)
    batch_sweep: tuple = BATCH_SWEEP
    coarse: CoarseConfig | None = field(default_factory=CoarseConfig)

    def topology(self, spec):
        return cached_topology(spec, self.link_bandwidth, self.link_latency)

    @property
    def batch_case(self):
        """(model, topology) of the mini-batch sensitivity table."""
        model = BATCH_MODEL if BATCH_MODEL in self.models else self.models[0]
        topo = BATCH_TOPOLOGY if BATCH_TOPOLOGY in self.topologies else self.topologies[-1]
        return model, topo


@dataclass(frozen=True)
class Unit:
    """One piece of the report's work: ``kind`` "sweep" (item: size in bytes), "train" (item:
    model name) or "batch" (item: mini-batch) on ``topology``; "coarse" (item: model name) and
    "coarse-sweep" (item: mini-batch, None for the report's) on the COARSE system spec."""
    kind: str
    topology: str
    item: object

    def describe(self):
        item = (format_size(self.item) if self.kind == "sweep"
                else "default mini-batch" if self.item is None else self.item)
        return f"{self.kind} {self.topology} {item}"


def plan(settings):
    """Every ``Unit`` of the report, training first (the slowest), then sweeps, then batches.

    Raises
    ------
    ConfigError
        If a topology spec or model name is bad (checked before any work starts).
    """
    for spec in settings.topologies:
        settings.topology(spec)
    for name in settings.models:
        get_model(name)
    model, topo = settings.batch_case
    coarse = []
    if settings.coarse is not None:
        spec = settings.coarse.spec
        coarse = ([Unit("coarse", spec, m) for m in settings.models]
                  + [Unit("coarse-sweep", spec, b) for b in (None, COARSE_SWEEP_BATCH)])
    return ([Unit("train", t, m) for t in settings.topologies for m in settings.models]
            + [Unit("sweep", t, s) for t in settings.topologies for s in settings.sizes]
            + [Unit("batch", topo, b) for b in settings.batch_sweep] + coarse)


def run_unit(unit, settings):
    """Compute one ``Unit``; returns a dict for ``assemble``."""
    opts = settings.training
    if unit.kind == "coarse":
        return {mode: compare_system(get_model(unit.item), settings.coarse,
                                     replace(opts, overlap=overlap))
                for mode, overlap in (("overlapped", True), ("serial", False))}
    if unit.kind == "coarse-sweep":
        batch = opts.mini_batch if unit.item is None else unit.item
        return {"mini_batch": batch, "rows": sweep_asymmetry(
            get_model(settings.batch_case[0]), settings.coarse,
            options=replace(opts, overlap=True, mini_batch=batch))}
    topo = settings.topology(unit.topology)
    algorithms = list(settings.algorithms) if settings.algorithms else None
    if unit.kind == "sweep":
        return compare(topo, unit.item, algorithms, opts.timing)
    if unit.kind == "train":
        model = get_model(unit.item)
        return {"overlapped": train(model, topo, algorithms, replace(opts, overlap=True)),
                "serial": train(model, topo, algorithms, replace(opts, overlap=False))}
    model = get_model(settings.batch_case[0])
    return train(model, topo, ["ring", MULTITREE],
                 replace(opts, overlap=True, mini_batch=unit.item))


def _by_algorithm(result):
    return {r["algorithm"]: r for r in result["results"]}


def headline(training, topology):
    """Our figures for ``PAPER_HEADLINES`` on ``topology``.

    Parameters
    ----------
    training : dict
        ``{topology: {model: {"overlapped": train(...), "serial": train(...)}}}``.

    Returns
    -------
    dict
        ``{"overlapped": {...}, "serial": {...}}``, each ``{"speedup_ring", "reduction_ring",
        "speedup_prior", "reduction_prior"}`` with values ``{"value", "model"}`` (``model``: the
        workload of an "up to" maximum) or None where MultiTree or the baselines were not run.
    """
    out = {}
    for mode in ("overlapped", "serial"):
        sp_ring, sp_prior, red_ring, red_prior = [], [], [], []
        for name, both in training.get(topology, {}).items():
            by = _by_algorithm(both[mode])
            if MULTITREE not in by:
                continue
            mt = by[MULTITREE]
            if not mt["comm_ms"]:      # one node: nothing to communicate, no ratio to report
                continue
            sp_ring.append(mt["comm_speedup_vs_ring"])
            red_ring.append((mt["reduction_vs_ring"], name))
            prior = [by[a] for a in PRIOR_ART if a in by]
            if prior:
                best_comm = min(p["comm_ms"] for p in prior)
                best_iter = min(p["iteration_ms"] for p in prior)
                sp_prior.append(best_comm / mt["comm_ms"])
                red_prior.append((1 - mt["iteration_ms"] / best_iter, name))

        def top(pairs):
            return {"value": max(pairs)[0], "model": max(pairs)[1]} if pairs else None

        def mean(values):
            return {"value": geometric_mean(values), "model": None} if values else None

        out[mode] = {"speedup_ring": mean(sp_ring), "reduction_ring": top(red_ring),
                     "speedup_prior": mean(sp_prior), "reduction_prior": top(red_prior)}
    return out


def assemble(settings, units, outputs):
    """Gather the outputs of ``run_unit`` (in ``units`` order) into the report's data.

    Returns
    -------
    dict
        ``{"settings", "training": {topology: {model: {"overlapped", "serial"}}},
        "sweeps": {topology: [compare rows with "size_bytes"]}, "batch": {"model", "topology",
        "rows": [train(...)]}, "headline": {"topology", "overlapped", "serial"}}``.
    """
    training, sweeps, batch = {}, {}, []
    coarse = {"system": settings.coarse.spec if settings.coarse else None,
              "model": settings.batch_case[0], "results": {}, "sweeps": []}
    for unit, out in zip(units, outputs):
        if unit.kind == "coarse":
            coarse["results"][unit.item] = out
        elif unit.kind == "coarse-sweep":
            coarse["sweeps"].append(out)
        elif unit.kind == "train":
            training.setdefault(unit.topology, {})[unit.item] = out
        elif unit.kind == "sweep":
            sweeps.setdefault(unit.topology, []).extend(
                {"size_bytes": out["size_bytes"], **r} for r in out["results"])
        else:
            batch.append(out)
    head_topo = PAPER_TOPOLOGY if PAPER_TOPOLOGY in training else next(iter(training), None)
    opts = settings.training
    model, topo = settings.batch_case
    return {
        "settings": {
            "topologies": list(settings.topologies), "models": list(settings.models),
            "algorithms": list(settings.algorithms) if settings.algorithms else None,
            "sweep_sizes": list(settings.sizes), "link_bandwidth_GBps": settings.link_bandwidth,
            "link_latency_cycles": settings.link_latency, "bucket_bytes": opts.bucket_bytes,
            "mini_batch": opts.mini_batch, "accelerator": vars(opts.accelerator),
            "timing": asdict(opts.timing),
        },
        "training": training, "sweeps": sweeps,
        "batch": {"model": model, "topology": topo, "rows": batch},
        "headline": _with_coarse({"topology": head_topo,
                                  **(headline(training, head_topo) if head_topo else {})},
                                 coarse),
        "coarse": coarse,
    }


def _with_coarse(head, coarse):
    """Add ``coarse_faster`` (the largest ``faster`` over the workloads, with its model) to each
    mode of the headline figures."""
    for mode in ("overlapped", "serial"):
        pairs = [(both[mode]["faster"], name) for name, both in coarse["results"].items()]
        head.setdefault(mode, {})["coarse_faster"] = (
            {"value": max(pairs)[0], "model": max(pairs)[1]} if pairs else None)
    return head


# ---------------------------------------------------------------------------------------------
# Markdown


def markdown_table(rows, columns, left=1):
    """A GitHub Markdown table. ``columns``: ``(header, function of a row -> str)``; the first
    ``left`` columns are left-aligned (text), the others right-aligned (numbers)."""
    head = "| " + " | ".join(h for h, _ in columns) + " |"
    rule = "| " + " | ".join("---" if i < left else "---:" for i in range(len(columns))) + " |"
    body = ["| " + " | ".join(fn(r) for _, fn in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def _headline_cell(entry, key):
    if entry is None:
        return "n/a"
    value = entry["value"]
    text = f"{value:.2f}x" if key.startswith("speedup") else _pct(value)
    return f"{text} ({entry['model']})" if entry.get("model") else text


def headline_table(data):
    """The papers' headline numbers and ours side by side, as Markdown."""
    head = data["headline"]
    topo = head.get("topology")
    rows = []
    for claim, paper, key in PAPER_HEADLINES:
        if key is None or (topo is None and not key.startswith("coarse")):
            ours = ("not yet modelled", "not yet modelled") if key is None else ("n/a", "n/a")
        else:
            ours = tuple(_headline_cell(head.get(mode, {}).get(key), key)
                         for mode in ("overlapped", "serial"))
        rows.append((claim, paper, *ours))
    return markdown_table(rows, [
        ("claim", lambda r: r[0]), ("paper", lambda r: r[1]),
        (f"ours, {topo}, overlapped", lambda r: r[2]),
        (f"ours, {topo}, no overlap", lambda r: r[3])], left=2)


def _share_sentence(data, topology):
    """How much of an iteration ring's exposed communication takes, smallest and largest."""
    shares = sorted((_by_algorithm(both["overlapped"])["ring"]["comm_share"], name)
                    for name, both in data["training"].get(topology, {}).items())
    if not shares:
        return ""
    (lo, lo_name), (hi, hi_name) = shares[0], shares[-1]
    return (f"Under ring all-reduce on {topology}, exposed communication takes from "
            f"{_pct(lo)} ({lo_name}) to {_pct(hi)} ({hi_name}) of an iteration: only that part "
            f"of the iteration can shrink, however fast the all-reduce; the mini-batch table "
            f"below shows the reduction growing as compute per iteration shrinks.")


def _timing_words(timing):
    """How the all-reduces were timed, from ``settings.timing`` (a ``TimingParams`` as a dict)."""
    if timing["preset"] == "authors":
        size = timing["packet_bytes"]
        return (f"timed like the MultiTree authors' simulator "
                f"({f'{size}-byte messages' if size else 'one packet per chunk'})")
    return f"links served {LINK_ORDER_WORDS[timing['link_order']]}"


def _settings_text(data):
    s = data["settings"]
    acc = s["accelerator"]
    batch = s["mini_batch"] or "each model's default (256)"
    return (f"- Network: {', '.join(s['topologies'])}; {s['link_bandwidth_GBps']:g} GB/s per "
            f"link per direction, {s['link_latency_cycles']} cycles of link latency, "
            f"{s['timing']['flit_bytes']}-byte flits at {s['timing']['frequency_ghz']:g} GHz "
            f"(the MultiTree paper's network); {_timing_words(s['timing'])}.\n"
            f"- Node: {acc['vaults']} vaults of {acc['rows']}x{acc['cols']} output-stationary "
            f"systolic arrays at {acc['frequency_ghz']:g} GHz "
            f"({2 * acc['vaults'] * acc['rows'] * acc['cols'] * acc['frequency_ghz'] / 1e3:.1f}"
            f" TFLOP/s peak); mini-batch per node: {batch}.\n"
            f"- Gradients: float32, buckets of {format_size(s['bucket_bytes'])} (PyTorch DDP's "
            f"default) all-reduced one at a time, overlapped with the backward pass unless "
            f"stated.\n")


def _workload_table(data):
    rows = []
    for name in data["settings"]["models"]:
        model = get_model(name)
        first = next(iter(data["training"].values()))[name]["overlapped"]
        rows.append((model, first))
    return markdown_table(rows, [
        ("model", lambda r: f"`{r[0].name}`"), ("variant", lambda r: r[0].title),
        ("parameters", lambda r: f"{r[0].params:,}"),
        ("gradient MiB", lambda r: f"{r[0].params * 4 / 2**20:.1f}"),
        ("forward GFLOP/sample", lambda r: f"{r[0].flops / 1e9:.4g}"),
        ("buckets", lambda r: str(len(r[1]["buckets"]))),
        ("compute ms/iteration", lambda r: f"{r[1]['compute_ms']:.3f}")], left=2)


def _reduction_table(by_model):
    algorithms = list(dict.fromkeys(r["algorithm"] for both in by_model.values()
                                    for r in both["overlapped"]["results"]))
    cols = [("model", lambda item: f"`{item[0]}`"),
            ("ring iteration ms",
             lambda item: f"{_by_algorithm(item[1])['ring']['iteration_ms']:.3f}")]
    for a in algorithms:
        if a != "ring":
            cols.append((a, lambda item, a=a: _pct(_by_algorithm(item[1]).get(a, {}).get(
                "reduction_vs_ring"))))
    return markdown_table([(m, both["overlapped"]) for m, both in by_model.items()], cols)


def _detail_table(by_model):
    rows = [(m, r) for m, both in by_model.items() for r in both["overlapped"]["results"]]
    return markdown_table(rows, [
        ("model", lambda x: f"`{x[0]}`"), ("algorithm", lambda x: x[1]["algorithm"]),
        ("iteration ms", lambda x: f"{x[1]['iteration_ms']:.3f}"),
        ("compute ms", lambda x: f"{x[1]['compute_ms']:.3f}"),
        ("exposed comm ms", lambda x: f"{x[1]['exposed_comm_ms']:.3f}"),
        ("all-reduce ms", lambda x: f"{x[1]['comm_ms']:.3f}"),
        ("comm share", lambda x: _pct(x[1]["comm_share"])),
        ("reduction vs ring", lambda x: _pct(x[1]["reduction_vs_ring"])),
        ("all-reduce speed-up vs ring", lambda x: f"{x[1]['comm_speedup_vs_ring']:.2f}x")],
        left=2)


def _batch_table(batch):
    rows = []
    for result in batch["rows"]:
        by = _by_algorithm(result)
        rows.append((result, by["ring"], by.get(MULTITREE)))
    return markdown_table(rows, [
        ("mini-batch per node", lambda x: str(x[0]["mini_batch"])),
        ("compute ms", lambda x: f"{x[0]['compute_ms']:.3f}"),
        ("ring iteration ms", lambda x: f"{x[1]['iteration_ms']:.3f}"),
        ("ring comm share", lambda x: _pct(x[1]["comm_share"])),
        ("multitree iteration ms", lambda x: f"{x[2]['iteration_ms']:.3f}" if x[2] else "-"),
        ("multitree comm share", lambda x: _pct(x[2]["comm_share"]) if x[2] else "-"),
        ("reduction vs ring", lambda x: _pct(x[2]["reduction_vs_ring"]) if x[2] else "-")])


def _coarse_sentence(data):
    """Where the headline's COARSE row comes from (empty without COARSE results)."""
    coarse = data.get("coarse")
    if not coarse or not coarse["results"]:
        return ""
    return (f" The COARSE row is not on {data['headline'].get('topology')}: it is the largest "
            f"`T_mpi / T_coarse - 1` over the workloads on {coarse['system']} against MPI ring "
            f"all-reduce over the same links (the COARSE section below).")


def _coarse_section(coarse):
    """The COARSE section: per-workload comparison, asymmetry sweeps, assumptions (Markdown)."""
    if not coarse["results"]:
        return []

    def faster(row):
        return f"{100 * row['faster']:+.1f}%"

    rows = [(name, both["overlapped"], both["serial"]) for name, both in coarse["results"].items()]
    table = markdown_table(rows, [
        ("model", lambda x: f"`{x[0]}`"),
        ("MPI ring ms", lambda x: f"{x[1]['results'][0]['iteration_ms']:.3f}"),
        ("COARSE ms", lambda x: f"{x[1]['results'][1]['iteration_ms']:.3f}"),
        ("m", lambda x: f"{x[1]['dual_sync']['m']} of {x[1]['dual_sync']['layers']}"),
        ("COARSE faster", lambda x: faster(x[1]["results"][1])),
        ("proxies only faster", lambda x: faster(x[1]["results"][2])),
        ("COARSE faster, no overlap", lambda x: faster(x[2]["results"][1]))])
    parts = [f"## COARSE against MPI ring all-reduce ({coarse['system']})\n",
             "Each workload's iteration with COARSE (dual synchronisation with the best m: the "
             "first m layers by ring all-reduce between the GPUs, the rest through the memory "
             "devices' proxies) and with MPI ring all-reduce over the workers' GPU-GPU path; "
             "\"faster\" is `T_mpi / T_coarse - 1`, overlapped with the backward pass unless "
             "stated; \"proxies only\" is m = 0 (`golden_model/coarse/`, `allreduce-rtl "
             "coarse`).\n", table + "\n"]
    for sweep in coarse["sweeps"]:
        batch = sweep["mini_batch"] or "each model's default (256)"
        sweep_table = markdown_table(sweep["rows"], [
            ("remote / local", lambda r: f"{r['ratio']:.3g}"),
            ("remote GB/s", lambda r: f"{r['remote_GBps']:.3g}"),
            ("MPI ring ms", lambda r: f"{r['mpi_ms']:.3f}"),
            ("COARSE ms", lambda r: f"{r['coarse_ms']:.3f}"), ("m", lambda r: str(r["m"])),
            ("COARSE faster", faster),
            ("proxies only faster", lambda r: f"{100 * r['proxies_only_faster']:+.1f}%")], left=0)
        parts += [f"Link asymmetry, `{coarse['model']}`, mini-batch {batch}: the remote path's "
                  f"bandwidth as a multiple of the local path's (the cloud machine: 16/9).\n",
                  sweep_table + "\n"]
    parts.append("Where the proxies alone lose (a slow remote path, latency-bound tensors), dual "
                 "synchronisation moves layers back to the GPU ring, so COARSE never loses in "
                 "this model; the paper reports it slightly slower than MPI all-reduce on one "
                 "platform. Assumptions: " + "; ".join(COARSE_ASSUMPTIONS) + ".\n")
    return parts


def render_markdown(data, images, command="allreduce-rtl report"):
    """The report as Markdown.

    Parameters
    ----------
    data : dict
        From ``assemble``.
    images : dict
        ``{("training", topology): file name, ("sweep", topology): file name}``, relative to
        the report's folder.
    command : str
        The command that regenerates the report (quoted in it).
    """
    head_topo = data["headline"].get("topology")
    parts = [
        "# Training time: what the all-reduce gains mean per iteration\n",
        f"Generated by `{command}` (golden model: `golden_model.workloads`, `.accelerator`, "
        f"`.training`, `.report`; every number below is recomputed on each run).\n",
        _settings_text(data),
        "## Headline numbers: the papers and this model\n",
        headline_table(data) + "\n",
        f"Ours: {head_topo} (the MultiTree authors' workload runs use a 4x4 torus), the "
        f"workloads below (the paper's set has FasterRCNN where ours has VGG-16). Speed-ups are "
        f"geometric means over the workloads of the total all-reduce time; \"up to\" is the "
        f"largest reduction over the workloads (in brackets). \"Prior state of the art\" is, per "
        f"workload, the fastest of {', '.join(PRIOR_ART)}. \"No overlap\" runs the buckets' "
        f"all-reduces after the whole backward pass, as the authors' simulator accounts an "
        f"iteration; "
        f"\"overlapped\" hides each bucket behind the rest of the backward pass. "
        f"{_share_sentence(data, head_topo)}{_coarse_sentence(data)}\n",
        "## Workloads\n",
        _workload_table(data) + "\n",
    ]
    for topo, by_model in data["training"].items():
        parts += [f"## {topo}: iteration time per workload\n",
                  f"![compute and exposed communication on {topo}]"
                  f"({images[('training', topo)]})\n",
                  "Training-time reduction against ring (overlapped):\n",
                  _reduction_table(by_model) + "\n",
                  "<details><summary>All figures</summary>\n",
                  _detail_table(by_model) + "\n", "</details>\n"]
    batch = data["batch"]
    if batch["rows"]:
        parts += [f"## Mini-batch sensitivity: {batch['model']} on {batch['topology']}\n",
                  _batch_table(batch) + "\n"]
    parts += _coarse_section(data.get("coarse", {"results": {}}))
    parts.append("## All-reduce speed-up against size\n")
    for topo in data["sweeps"]:
        parts.append(f"![speed-up over ring against size on {topo}]({images[('sweep', topo)]})\n")
    parts.append(
        "## Method\n\n"
        "Compute per layer from the accelerator model (`golden_model/accelerator.py`: "
        "`cycles = ceil(M/32) * ceil(N/32) * K + 2*32 + 32 - 2` per GEMM, backward = input "
        "and weight gradients, element-wise work at 32 elements per cycle per vault; memory "
        "bandwidth and latency ignored); buckets, overlap and iteration time from "
        "`golden_model/training.py` (`iteration = forward + max(backward, end of the last "
        "all-reduce)`); each bucket's all-reduce from the contention-aware timing model of the "
        "schedule the algorithm builds for that bucket's size.\n")
    return "\n".join(parts)
