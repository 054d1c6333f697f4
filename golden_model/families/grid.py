"""Direct networks on a grid: ``ring:N``, ``mesh:RxC`` and ``torus:RxC``.

Node id = row * C + col. A node's ports (its successors) are north, south, west, east, the order
of the MultiTree authors' simulator, skipping links that do not exist. A torus has wrap-around
links in every dimension longer than 2 (a dimension of 2 has one link per direction: the wrap
would join the same two nodes); a ring is a torus of one row.

Routes: dimension order, columns first, then rows; where the dimension wraps the shorter way
round, ties going east or south. Ring order: a snake Hamiltonian cycle of neighbours where one
exists, else a snake path (see :meth:`Grid.ring_order`). Natural cuts: every straight cut across
each dimension (wrap links counted).
"""

import networkx as nx

from . import Family

__all__ = ["Ring", "Mesh", "Torus"]


class Grid(Family):
    direct = True
    node0_is_peripheral = True      # rings and tori are endpoint-symmetric; node 0 of a mesh
                                    # is a corner

    def grid(self, dims):
        return tuple(dims)

    def graph(self, dims, bandwidth, latency):
        rows, cols = self.grid(dims)
        g = nx.DiGraph()
        g.add_nodes_from(range(rows * cols), kind="node")
        # Successor order is insertion order: north, south, west, east per node.
        for r in range(rows):
            for c in range(cols):
                u = r * cols + c
                for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                    rr, cc = r + dr, c + dc
                    size = rows if dr else cols
                    if self.wraps and size > 2:
                        rr, cc = rr % rows, cc % cols
                    if 0 <= rr < rows and 0 <= cc < cols and (rr, cc) != (r, c):
                        g.add_edge(u, rr * cols + cc, bandwidth=float(bandwidth),
                                   latency=int(latency))
        return g

    @property
    def link_classes(self):
        return ("default", "wrap") if self.wraps else ("default",)

    def link_class(self, dims, u, v):
        """``"wrap"`` for a wrap-around link (its ends more than one apart in a dimension)."""
        rows, cols = self.grid(dims)
        (r, c), (rr, cc) = divmod(u, cols), divmod(v, cols)
        return "wrap" if abs(r - rr) > 1 or abs(c - cc) > 1 else "default"

    def route(self, topo, src, dst):
        rows, cols = topo.grid
        (r, c), (dr, dc) = divmod(src, cols), divmod(dst, cols)
        path = [src]
        for size, axis in ((cols, 1), (rows, 0)):
            cur, goal = (c, dc) if axis == 1 else (r, dr)
            delta = goal - cur
            if self.wraps and size > 2:
                fwd = delta % size
                delta = fwd if fwd <= size - fwd else fwd - size
            step = 1 if delta > 0 else -1
            for _ in range(abs(delta)):
                cur = (cur + step) % size
                if axis == 1:
                    c = cur
                else:
                    r = cur
                path.append(r * cols + c)
        return path

    def ring_order(self, topo):
        """A Hamiltonian cycle of neighbours where one exists (a snake), else a snake path.

        On an R x C mesh a Hamiltonian cycle exists iff R*C is even and both R, C >= 2 (a grid
        graph is bipartite, so an odd node count cannot close a cycle). Where none exists (an odd
        x odd mesh, a 1 x C line with C > 2) the order is a snake Hamiltonian *path*: consecutive
        nodes are neighbours but the last and first are not, and ring all-reduce runs the
        bidirectional line algorithm over it (``algorithms.ring.line_steps``)."""
        n = topo.num_nodes
        if n <= 2:
            return list(range(n)), True
        rows, cols = topo.grid
        if rows == 1 or cols == 1:
            # A line: a cycle only with the wrap link (length > 2).
            return list(range(n)), self.wraps
        if rows % 2 == 0 or (self.wraps and cols > 2):
            return _snake_cycle(rows, cols, lambda r, c: r * cols + c), True
        if cols % 2 == 0 or (self.wraps and rows > 2):
            return _snake_cycle(cols, rows, lambda c, r: r * cols + c), True
        # Odd x odd mesh: a boustrophedon path; the closing hop is multi-hop.
        order = []
        for r in range(rows):
            cs = range(cols) if r % 2 == 0 else range(cols - 1, -1, -1)
            order.extend(r * cols + c for c in cs)
        return order, False

    def natural_cuts(self, topo):
        rows, cols = topo.grid
        cuts = [(f"cols 0..{i} | {i + 1}..{cols - 1}",
                 [r * cols + c for r in range(rows) for c in range(i + 1)])
                for i in range(cols - 1)]
        cuts += [(f"rows 0..{i} | {i + 1}..{rows - 1}", list(range((i + 1) * cols)))
                 for i in range(rows - 1)]
        return cuts


def _snake_cycle(rows, cols, node):
    """Row 0 east over all columns, then rows 1.. snake over columns 1..cols-1, then back north
    along column 0. Closes when rows is even (the last row ends at column 1), or on a torus whose
    column wrap link joins column cols-1 to column 0."""
    order = [node(0, c) for c in range(cols)]
    for r in range(1, rows):
        cs = range(cols - 1, 0, -1) if r % 2 == 1 else range(1, cols)
        order.extend(node(r, c) for c in cs)
    order.extend(node(r, 0) for r in range(rows - 1, 0, -1))
    return order


class Ring(Grid):
    """``ring:N``: N nodes in a bidirectional ring (a torus of one row). No router network:
    every algorithm on a ring talks to neighbours only or is refused."""
    name, form, arity, wraps = "ring", "ring:N", 1, True
    endpoints_alike = True          # translations

    def grid(self, dims):
        return (1, dims[0])

    def ring_order(self, topo):
        return list(range(topo.num_nodes)), True


class Mesh(Grid):
    """``mesh:RxC``: R rows by C columns."""
    name, form, router = "mesh", "mesh:RxC", "grid"

    def cut_sinks(self, topo):
        # The reflections across the middle row and column map every node into the top-left
        # quarter (middle row and column included).
        rows, cols = topo.grid
        return [r * cols + c for r in range((rows + 1) // 2) for c in range((cols + 1) // 2)]


class Torus(Grid):
    """``torus:RxC``: a mesh with wrap-around links in every dimension longer than 2."""
    name, form, router, wraps = "torus", "torus:RxC", "grid", True
    endpoints_alike = True          # translations

