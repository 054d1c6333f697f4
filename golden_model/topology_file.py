"""Topologies from files, and topologies written to files.

Two formats, both read and written with networkx:

* **node-link JSON** (``FILE.json``, ``networkx.node_link_data``): ``{"directed": true, "nodes":
  [{"id": ..., "kind": "node" | "switch"}, ...], "links": [{"source": ..., "target": ...,
  "bandwidth": GBPS, "latency": CYCLES, "count": K}, ...]}``. The edge list may also be called
  ``"edges"`` (the name networkx 3.4 and later write by default); ``"directed": false`` makes
  every link one each way.
* **GraphML** (``FILE.graphml``, ``networkx.read_graphml``), the same attributes on nodes and
  edges.

Every endpoint (``kind`` ``"node"``, the default) is an accelerator with one NI; switches only
forward. A link's ``bandwidth`` (GB/s, one direction) and ``latency`` (cycles of the network
clock) default to the command's ``--link-bandwidth`` and ``--link-latency``; ``count`` (default
1) is the number of parallel links, each a separate port in hardware. The timing model treats
parallel links as one link of ``count`` times the bandwidth (a message may use them all); the
hardware gives each its own port (the NI's port limit, ``hdl.config``, is checked when the
hardware is planned). Endpoints are numbered ``0..N-1`` in the order of their ids (numbers by
value, before other ids; digit runs in other ids by value), switches ``s0, s1, ...`` likewise; a file this module writes uses
those ids, so it reads back to the same graph.

Two machines ship as package data, named ``machine:NAME`` wherever a topology is accepted
(:data:`MACHINES`; docs in ``golden_model/machines/README.md``).

Every error is a ``ConfigError`` naming the file and the bad node, link or attribute.
"""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree
from pathlib import Path

import networkx as nx

from .errors import ConfigError

__all__ = ["MACHINES_DIR", "MACHINES", "FILE_SUFFIXES", "is_file_spec", "read_topology",
           "write_topology", "MAX_LINK_COUNT"]

MACHINES_DIR = Path(__file__).resolve().parent / "machines"
FILE_SUFFIXES = (".json", ".graphml")
#: Parallel links between two vertices at most (a typo guard; the NI's port limit is lower).
MAX_LINK_COUNT = 64
_MACHINE = "machine:"


def _machines():
    return {p.stem: p for p in sorted(MACHINES_DIR.glob("*.json"))}


#: ``{name: path}`` of the shipped machines.
MACHINES = _machines()


def is_file_spec(spec) -> bool:
    """True when ``spec`` names a file (by its suffix) or a shipped machine."""
    text = str(spec).strip()
    return text.lower().startswith(_MACHINE) or text.lower().endswith(FILE_SUFFIXES)


def _path(spec):
    text = str(spec).strip()
    if text.lower().startswith(_MACHINE):
        name = text[len(_MACHINE):].strip().lower()
        if name not in MACHINES:
            raise ConfigError(f"unknown machine {text!r}: expected one of "
                              f"{', '.join(_MACHINE + m for m in MACHINES)}")
        return MACHINES[name]
    path = Path(text)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise ConfigError(f"topology file {text!r} {what}" if not path.exists() or path.is_dir()
                          else f"topology file {text!r} is not a regular file")
    return path


def _load(path):
    where = str(path)
    try:
        if path.suffix.lower() == ".graphml":
            _check_graphml(path, where)
            return nx.read_graphml(path), where
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except ConfigError:
        raise
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"topology file {where!r} is not JSON: {exc}") from None
    except (OSError, nx.NetworkXError, ValueError, KeyError, ElementTree.ParseError) as exc:
        text = str(exc).strip().splitlines()
        raise ConfigError(f"cannot read topology file {where!r}: "
                          f"{text[0] if text else type(exc).__name__}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise ConfigError(f"topology file {where!r}: expected a node-link object with a "
                          f"'nodes' list (networkx.node_link_data)")
    if "links" in data and "edges" in data:
        raise ConfigError(f"topology file {where!r} has both 'links' and 'edges'; give the "
                          f"links once, under one of them")
    key = "links" if "links" in data else "edges"
    if not isinstance(data.get(key), list):
        raise ConfigError(f"topology file {where!r}: expected a 'links' (or 'edges') list")
    directed = data.get("directed", True)
    if not isinstance(directed, bool):
        raise ConfigError(f"topology file {where!r}: 'directed' must be true or false, not "
                          f"{directed!r}")
    graph = nx.DiGraph() if directed else nx.Graph()
    graph.graph.update(data.get("graph") or {})
    for k, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or "id" not in node:
            raise ConfigError(f"topology file {where!r}: node #{k} has no 'id'")
        if not isinstance(node["id"], (str, int)) or isinstance(node["id"], bool):
            raise ConfigError(f"topology file {where!r}: node id {node['id']!r} is not a "
                              f"string or a whole number")
        if node["id"] in graph:
            raise ConfigError(f"topology file {where!r}: node {node['id']!r} is listed twice")
        graph.add_node(node["id"], **{a: v for a, v in node.items() if a != "id"})
    for k, link in enumerate(data[key]):
        if not isinstance(link, dict) or "source" not in link or "target" not in link:
            raise ConfigError(f"topology file {where!r}: link #{k} needs 'source' and "
                              f"'target'")
        u, v = link["source"], link["target"]
        for end in (u, v):
            if not isinstance(end, (str, int)) or isinstance(end, bool) or end not in graph:
                raise ConfigError(f"topology file {where!r}: link {u!r}->{v!r} names node "
                                  f"{end!r}, which is not in 'nodes'")
        if graph.has_edge(u, v):
            raise ConfigError(f"topology file {where!r}: link {u!r}->{v!r} is listed twice "
                              f"(parallel links are one link with a 'count')")
        graph.add_edge(u, v, **{a: w for a, w in link.items() if a not in ("source", "target")})
    return graph, where


def _check_graphml(path, where):
    """What ``networkx.read_graphml`` would merge silently, refused as the JSON reader refuses
    it: a node or a link listed twice, a link naming a node that is not declared."""
    ns = "{http://graphml.graphdrawing.org/xmlns}"
    root = ElementTree.parse(path).getroot()
    graphs = list(root.iter(f"{ns}graph"))
    if len(graphs) != 1:
        raise ConfigError(f"topology file {where!r} holds {len(graphs)} graphs; expected one")
    graph = graphs[0]
    keys = {k.get("id"): (k.get("attr.name"), k.get("attr.type", "string"))
            for k in root.iter(f"{ns}key")}
    undirected = graph.get("edgedefault", "directed") == "undirected"
    nodes, links = set(), set()
    for node in graph.iter(f"{ns}node"):
        v = node.get("id")
        if v in nodes:
            raise ConfigError(f"topology file {where!r}: node {v!r} is listed twice")
        nodes.add(v)
        _check_graphml_values(node, keys, ns, f"topology file {where!r}: node {v!r}")
    for edge in graph.iter(f"{ns}edge"):
        u, v = edge.get("source"), edge.get("target")
        for end in (u, v):
            if end not in nodes:
                raise ConfigError(f"topology file {where!r}: link {u!r}->{v!r} names node "
                                  f"{end!r}, which is not declared")
        # an undirected link a-b is also b-a: listing both would merge them, one value lost
        both = undirected and edge.get("directed", "false") != "true"
        key = frozenset((u, v)) if both else (u, v)
        if key in links or (not both and frozenset((u, v)) in links):
            raise ConfigError(f"topology file {where!r}: link {u!r}->{v!r} is listed twice "
                              f"(parallel links are one link with a 'count'"
                              + ("; an undirected link already goes both ways)" if both else ")"))
        links.add(key)
        _check_graphml_values(edge, keys, ns, f"topology file {where!r}: link {u!r}->{v!r}")


_GRAPHML_NUMBERS = {"int": int, "long": int, "float": float, "double": float}


def _check_graphml_values(element, keys, ns, what):
    """Refuse a number attribute (``attr.type`` int, long, float or double) whose text is not
    one, naming the node or link and the attribute (``networkx.read_graphml`` would say only
    what Python's ``int`` says)."""
    for data in element.iter(f"{ns}data"):
        name, kind = keys.get(data.get("key"), (data.get("key"), "string"))
        convert = _GRAPHML_NUMBERS.get(kind)
        text = (data.text or "").strip()
        if convert is None:
            continue
        try:
            convert(text)
        except ValueError:
            raise ConfigError(f"{what}: {name} {text!r} is not a number (the file declares it "
                              f"attr.type={kind!r})") from None


def _order(ids):
    """Ids in natural order: numbers by value first, then text with its digit runs compared
    as numbers (``s2`` before ``s10``), so the ids this module writes keep their names."""
    def key(x):
        if isinstance(x, int) or (isinstance(x, str) and x.isdigit()):
            return (0, int(x), ())
        return (1, 0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                            for p in re.split(r"(\d+)", str(x)) if p))
    return sorted(ids, key=key)


def read_topology(spec, link_bandwidth, link_latency):
    """The ``Topology`` of file or machine ``spec``, links without a bandwidth or latency
    getting ``link_bandwidth`` (GB/s) and ``link_latency`` (cycles).

    Raises
    ------
    ConfigError
        If the file is missing, unreadable or malformed; a node's ``kind`` is not ``node`` or
        ``switch``; a link is a loop, is listed twice, or has a bad ``bandwidth``,
        ``latency`` or ``count``; there is no endpoint or more than ``MAX_NODES``; or some
        vertex cannot reach another (the message names both).
    """
    from .families.graph import GraphFamily  # noqa: PLC0415
    from .topology import (MAX_NODES, Topology, check_link_bandwidth,  # noqa: PLC0415
                           check_link_latency)
    path = _path(spec)
    raw, where = _load(path)
    if not raw.is_directed():
        raw = raw.to_directed()
    kinds = {}
    texts = {}
    for v, attrs in raw.nodes(data=True):
        unknown = set(attrs) - {"kind", "label"}
        if unknown:
            raise ConfigError(f"topology file {where!r}: node {v!r} has unknown attribute "
                              f"{sorted(unknown)[0]!r} (allowed: kind, label)")
        if str(v) in texts:
            raise ConfigError(f"topology file {where!r}: node ids {texts[str(v)]!r} and {v!r} "
                              f"are the same name; give them different ones")
        texts[str(v)] = v
        kind = attrs.get("kind", "node")
        if kind not in ("node", "switch"):
            raise ConfigError(f"topology file {where!r}: node {v!r} has kind {kind!r}; "
                              f"expected 'node' (an endpoint) or 'switch'")
        kinds[v] = kind
    ends = _order(v for v, k in kinds.items() if k == "node")
    switches = _order(v for v, k in kinds.items() if k == "switch")
    if not ends:
        raise ConfigError(f"topology file {where!r} has no endpoint (a node of kind 'node')")
    if len(ends) > MAX_NODES:
        raise ConfigError(f"topology file {where!r} has {len(ends)} endpoints; at most "
                          f"{MAX_NODES} are supported")
    names = {v: i for i, v in enumerate(ends)} | {v: f"s{i}" for i, v in enumerate(switches)}
    graph = nx.DiGraph(name=str(raw.graph.get("name", path.stem)))
    for v in ends + switches:
        attrs = {"kind": kinds[v]}
        if names[v] != v and str(names[v]) != str(v):
            attrs["label"] = str(v)
        elif raw.nodes[v].get("label") is not None:    # written by write_topology
            attrs["label"] = str(raw.nodes[v]["label"])
        graph.add_node(names[v], **attrs)
    for u, v, attrs in raw.edges(data=True):
        what = f"topology file {where!r}: link {u!r}->{v!r}"
        if u == v:
            raise ConfigError(f"{what} is a loop")
        unknown = set(attrs) - {"bandwidth", "latency", "count", "id"}
        if unknown:
            raise ConfigError(f"{what} has unknown attribute {sorted(unknown)[0]!r} (allowed: "
                              f"bandwidth, latency, count)")
        bw = check_link_bandwidth(attrs.get("bandwidth", link_bandwidth), f"{what} bandwidth")
        lat = attrs.get("latency", link_latency)
        if isinstance(lat, float) and lat.is_integer():
            lat = int(lat)
        lat = check_link_latency(lat, f"{what} latency")
        count = attrs.get("count", 1)
        if isinstance(count, float) and count.is_integer():
            count = int(count)
        if isinstance(count, bool) or not isinstance(count, int) \
                or not 1 <= count <= MAX_LINK_COUNT:
            raise ConfigError(f"{what} count must be a whole number of parallel links from 1 "
                              f"to {MAX_LINK_COUNT}, not {count!r}")
        graph.add_edge(names[u], names[v], bandwidth=bw * count, latency=lat, count=count,
                       port_bandwidth=bw)
    for u, v in graph.edges:
        if not graph.has_edge(v, u):
            label = {x: graph.nodes[x].get("label", x) for x in (u, v)}
            raise ConfigError(f"topology file {where!r}: link {label[u]!r}->{label[v]!r} has no "
                              f"link back {label[v]!r}->{label[u]!r} (the all-reduce sends both "
                              f"ways over a link: partial sums toward a root, results away from "
                              f"it; the two directions may differ in bandwidth and latency)")
    for v in graph.nodes if graph.number_of_nodes() > 1 else ():
        if not graph.out_degree(v) or not graph.in_degree(v):
            label = graph.nodes[v].get("label", v)
            raise ConfigError(f"topology file {where!r}: node {label!r} has no link "
                              f"{'out' if not graph.out_degree(v) else 'in'}")
    if graph.number_of_nodes() > 1 and not nx.is_strongly_connected(graph):
        comps = list(nx.strongly_connected_components(graph))
        a, b = (min(c, key=str) for c in comps[:2])
        label = {v: graph.nodes[v].get("label", v) for v in (a, b)}
        reach = nx.has_path(graph, a, b)
        x, y = (b, a) if reach else (a, b)
        raise ConfigError(f"topology file {where!r}: {label[x]!r} cannot reach {label[y]!r} "
                          f"(every vertex must reach every other)")
    spec_text = str(spec).strip()
    if spec_text.lower().startswith(_MACHINE):
        spec_text = _MACHINE + spec_text[len(_MACHINE):].strip().lower()
    return Topology(spec=spec_text, family="graph", dims=(), graph=graph, num_nodes=len(ends),
                    definition=GraphFamily(graph))


def write_topology(topology, path):
    """Write ``topology``'s graph to ``path`` (node-link JSON, or GraphML for ``.graphml``):
    endpoints ``0..N-1`` and switches ``s0, ...`` with their ``kind`` (and the file's own id as
    ``label`` where the graph came from a file with other ids), every directed link with
    its per-link ``bandwidth`` (GB/s), ``latency`` (cycles) and ``count``; reading it back
    gives the same graph. Returns the text (JSON) or bytes (GraphML) written by the caller.

    Raises
    ------
    ConfigError
        If the suffix is neither ``.json`` nor ``.graphml``.
    """
    g = nx.DiGraph(name=topology.spec)
    for v, attrs in topology.graph.nodes(data=True):
        g.add_node(v, kind=attrs.get("kind", "node"),
                   **({"label": attrs["label"]} if "label" in attrs else {}))
    for u, v, attrs in topology.graph.edges(data=True):
        count = attrs.get("count", 1)
        bw = attrs.get("port_bandwidth", attrs["bandwidth"] / count)
        g.add_edge(u, v, bandwidth=float(bw), latency=int(attrs["latency"]), count=int(count))
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        return json.dumps(nx.node_link_data(g, edges="links"), indent=1) + "\n"
    if suffix == ".graphml":
        import io  # noqa: PLC0415
        buf = io.BytesIO()
        nx.write_graphml(g, buf)
        return buf.getvalue()
    raise ConfigError(f"cannot write a topology to {str(path)!r}: give a .json (node-link) or "
                      f".graphml file")
