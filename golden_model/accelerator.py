"""Compute time of a workload's layers on one node: the MultiTree paper's accelerator.

The node (references.md; the authors' simulator ``farabimahmud/accelerator``,
``src/SCALE-Sim/configs/express.cfg`` and ``src/hmc.py``) is an HMC-style accelerator with
``vaults`` = 16 vaults, each with a ``rows x cols`` = 32 x 32 output-stationary systolic array of
multiply-add processing elements, at ``frequency_ghz`` = 1 GHz: a peak of
16 * 32 * 32 * 2 = 32,768 FLOP per cycle (a multiply-add is 2 FLOPs), 32.8 TFLOP/s.

Data parallelism inside the node (``hmc.py``): the node's mini-batch of B samples is split over
the vaults, each vault running ``ceil(B / vaults)`` samples of every layer on its own array. The
node's time for a layer is that of one vault.

GEMM cycles (output stationary, SCALE-Sim's mapping, Samajdar et al., arXiv:1811.02883): an
``M x K`` by ``K x N`` product maps output rows (convolution output pixels, tokens) onto the
array's ``R`` rows and output columns (filters, features) onto its ``C`` columns; each processing
element accumulates a ``K``-long dot product. The product is cut into
``ceil(M / R) * ceil(N / C)`` folds of ``K`` cycles each, streamed back to back (SCALE-Sim's
output-stationary trace generator, ``sram_traffic_os.py``, starts a row's next output the cycle
after the previous one finished), plus one fill and drain of ``2R + C - 2`` cycles (the operand
skew into the array and the drain of the results: the ``2R + C + T - 2`` single-fold runtime of
the analytical model of Samajdar et al., "A Systematic Methodology for Characterizing
Scalability of DNN Accelerators using SCALE-Sim", ISPASS 2020, less its ``T`` compute cycles)::

    cycles(M, K, N) = ceil(M / R) * ceil(N / C) * K + 2R + C - 2

so the utilisation ``M K N / (R C cycles)`` is the ceil-based tile utilisation
``(M / (R ceil(M / R))) * (N / (C ceil(N / C)))`` less the fill and drain. A layer whose weights
are shared by the samples (convolutions, fully connected layers) stacks a vault's ``b`` samples
into one product of ``M = b * m`` rows (the authors' simulator instead times one sample and
multiplies by ``b``, which leaves a fully connected layer's array 1/32 used); a product of two
activations (attention scores) is ``b * count`` separate products, streamed back to back with
one fill.

Backward pass: each forward product ``Y = X W`` (``M x K`` by ``K x N``) needs the input gradient
``dX = dY W^T`` (``M x N`` by ``N x K``) and the weight gradient ``dW = X^T dY`` (``K x M`` by
``M x N``), each timed with the same formula (so about twice the forward work, the usual
rule). The first layer of a model computes no input gradient (nothing upstream needs it).

Element-wise work (normalisation, softmax, embedding gathers; ``Layer.vector`` elements per
sample) runs at ``max(R, C)`` = 32 elements per cycle per vault, the rate the authors' simulator
gives element-wise work (``src/npu.py``, ``aggregate``: one row of processing elements); its
backward pass is twice the forward work.

What is ignored: memory bandwidth and latency (HMC vault DRAM, on-chip SRAM capacity and the
tiling it forces), activation functions, pooling and residual additions (fused into neighbouring
layers), the summation of the 16 vaults' weight gradients inside the node before the all-reduce
(the authors' simulator charges ``size / 32`` cycles for it), the optimiser's weight update, and
data loading. Times are therefore lower bounds of a real accelerator's compute time, which makes
the communication share of an iteration an upper bound.
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

__all__ = ["Accelerator", "LayerTimes", "MAX_MINI_BATCH", "check_mini_batch"]

# Upper bound on samples per node: keeps a typo from building absurd products.
MAX_MINI_BATCH = 1 << 20


def check_mini_batch(mini_batch):
    """Return ``mini_batch`` if it is a whole number of samples from 1 to ``MAX_MINI_BATCH``.

    Raises
    ------
    ConfigError
        Otherwise, naming the value.
    """
    if (isinstance(mini_batch, bool) or not isinstance(mini_batch, numbers.Integral)
            or not 1 <= mini_batch <= MAX_MINI_BATCH):
        raise ConfigError(f"mini-batch must be a whole number of samples per node from 1 to "
                          f"{MAX_MINI_BATCH}, not {mini_batch!r}")
    return int(mini_batch)


@dataclass(frozen=True)
class LayerTimes:
    """Per-layer compute times of one iteration on one node, in seconds, in layer order.

    Attributes
    ----------
    forward, backward : numpy.ndarray of float
        Seconds of each layer's forward and backward step.
    samples_per_vault : int
        ``ceil(mini_batch / vaults)``.
    """
    forward: np.ndarray
    backward: np.ndarray
    samples_per_vault: int


@dataclass(frozen=True)
class Accelerator:
    """The node's accelerator (see the module docstring for the model and its sources).

    Parameters
    ----------
    vaults : int
        Vaults per node, each with one systolic array (default 16).
    rows, cols : int
        Processing elements per array side (default 32 x 32).
    frequency_ghz : float
        Clock in GHz (default 1).

    Raises
    ------
    ConfigError
        If a count is not a positive integer or the frequency not a positive number.
    """
    vaults: int = 16
    rows: int = 32
    cols: int = 32
    frequency_ghz: float = 1.0

    def __post_init__(self):
        for name in ("vaults", "rows", "cols"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ConfigError(f"accelerator {name} must be a positive integer, not {v!r}")
        f = self.frequency_ghz
        if (isinstance(f, bool) or not isinstance(f, numbers.Real) or not math.isfinite(f)
                or not f > 0):
            raise ConfigError(f"accelerator frequency must be a positive number of GHz, not {f!r}")

    @property
    def peak_flops_per_cycle(self):
        """FLOPs per cycle with every processing element busy (2 per multiply-add)."""
        return 2 * self.vaults * self.rows * self.cols

    @property
    def vector_lanes(self):
        """Element-wise operations per cycle per vault (one row of processing elements)."""
        return max(self.rows, self.cols)

    def folds(self, m, k, n):
        """Cycles of the folds of one ``m x k`` by ``k x n`` product, without fill and drain."""
        return -(-m // self.rows) * -(-n // self.cols) * k

    @property
    def fill_cycles(self):
        """Fill and drain of the array, paid once per streamed sequence of products."""
        return 2 * self.rows + self.cols - 2

    def gemm_cycles(self, m, k, n, instances=1):
        """Cycles of ``instances`` products of ``m x k`` by ``k x n`` streamed back to back on one
        array: ``instances * ceil(m/R) * ceil(n/C) * k + 2R + C - 2``."""
        return instances * self.folds(m, k, n) + self.fill_cycles

    def utilisation(self, m, k, n):
        """Fraction of the array's multiply-adds doing useful work on one product."""
        return m * k * n / (self.rows * self.cols * self.gemm_cycles(m, k, n))

    def layer_cycles(self, layer, samples, first=False):
        """(forward, backward) cycles of ``layer`` for ``samples`` samples on one vault.

        ``first``: the model's first layer, which computes no input gradient.
        """
        fwd = bwd = 0
        for g in layer.gemms:
            if g.shared:
                m, inst = samples * g.m, 1
            else:
                m, inst = g.m, samples * g.count
            fwd += self.gemm_cycles(m, g.k, g.n, inst)
            bwd += self.gemm_cycles(g.k, m, g.n, inst)             # dW = X^T dY
            if not first:
                bwd += self.gemm_cycles(m, g.n, g.k, inst)         # dX = dY W^T
        vec = -(-samples * layer.vector // self.vector_lanes)
        return fwd + vec, bwd + 2 * vec

    def layer_times(self, model, mini_batch):
        """Per-layer forward and backward seconds of ``model`` for ``mini_batch`` samples per node.

        Raises
        ------
        ConfigError
            If ``mini_batch`` is not a whole number from 1 to ``MAX_MINI_BATCH``.
        """
        samples = -(-check_mini_batch(mini_batch) // self.vaults)
        cycles = np.array([self.layer_cycles(layer, samples, i == 0)
                           for i, layer in enumerate(model.layers)], dtype=float).reshape(-1, 2)
        seconds = cycles / (self.frequency_ghz * 1e9)
        return LayerTimes(forward=seconds[:, 0], backward=seconds[:, 1],
                          samples_per_vault=samples)
