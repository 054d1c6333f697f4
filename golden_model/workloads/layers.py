"""Layer records and the builders the model definitions use.

A model is a table of ``Layer`` rows in forward (topological) order; the backward pass walks it
from the last row. Every row carries

* ``params``: its trainable parameters, i.e. the gradient elements it contributes to all-reduce;
* ``gemms``: the matrix products its forward pass runs on the accelerator's systolic arrays, per
  sample, as ``Gemm(m, k, n)`` (an ``m x k`` by ``k x n`` product, ``m * k * n`` multiply-adds);
* ``vector``: the element-wise work of its forward pass per sample, in elements (normalisation,
  softmax, embedding gathers), which runs on the vector path, not the systolic array.

Counting conventions (the ones the published figures use, see each model's source):

* FLOPs = 2 x multiply-adds of the GEMMs (a multiply-add is two FLOPs). Element-wise work
  (activation functions, pooling, residual additions, normalisation, softmax) is not counted in
  FLOPs, as in torchvision's ``_ops`` figures; normalisation, softmax and gathers are kept as
  ``vector`` work for the timing model, activations, pooling and additions are ignored (they are
  fused into the neighbouring layers on accelerators).
* A convolution is lowered to a GEMM by im2col: ``m`` = output pixels, ``k`` = kernel height x
  width x input channels, ``n`` = output channels (the lowering SCALE-Sim uses, Samajdar et al.,
  arXiv:1811.02883, Sec. II).
* Output sizes follow PyTorch's ``Conv2d``/``MaxPool2d`` rule
  ``floor((size + 2 * padding - kernel) / stride) + 1`` (``ceil`` with ``ceil_mode=True``).
"""

from dataclasses import dataclass, field

__all__ = ["Gemm", "Layer", "Model", "FeatureMap", "conv2d", "batchnorm", "linear", "layernorm",
           "embedding", "attention", "pool_size"]


@dataclass(frozen=True)
class Gemm:
    """One matrix product of a layer's forward pass, per sample.

    Parameters
    ----------
    m, k, n : int
        Rows of the output, reduction length, columns of the output.
    count : int
        Independent products of this shape per sample (attention heads).
    shared : bool
        True when the right-hand operand is a weight shared by every sample, so the samples of a
        mini-batch stack along ``m`` into one taller product; False when both operands are
        activations of one sample (attention scores), so each sample is its own product.
    """
    m: int
    k: int
    n: int
    count: int = 1
    shared: bool = True

    @property
    def macs(self):
        """Multiply-adds per sample."""
        return self.m * self.k * self.n * self.count


@dataclass(frozen=True)
class Layer:
    """One row of a model's layer table (see the module docstring for the fields)."""
    name: str
    kind: str
    params: int
    gemms: tuple = ()
    vector: int = 0

    @property
    def macs(self):
        """Forward multiply-adds per sample."""
        return sum(g.macs for g in self.gemms)

    @property
    def flops(self):
        """Forward FLOPs per sample (2 per multiply-add)."""
        return 2 * self.macs


@dataclass(frozen=True)
class Model:
    """A workload: its layer table and what it was built from.

    Attributes
    ----------
    name : str
        Command-line name (``"resnet50"``).
    title : str
        Human name with the variant (``"ResNet-50 (torchvision)"``).
    layers : tuple of Layer
        Forward order.
    sample : str
        What one sample of the mini-batch is (``"one 224x224 RGB image"``).
    default_mini_batch : int
        Samples per node per iteration unless the user chooses otherwise.
    published_params : int or None
        The published parameter total the table is checked against (None: none published).
    source : str
        Where the architecture and ``published_params`` come from.
    """
    name: str
    title: str
    layers: tuple
    sample: str
    default_mini_batch: int
    source: str
    published_params: int | None = None
    notes: str = field(default="", compare=False)

    @property
    def params(self):
        """Total trainable parameters (= gradient elements per iteration)."""
        return sum(layer.params for layer in self.layers)

    @property
    def macs(self):
        """Forward multiply-adds per sample."""
        return sum(layer.macs for layer in self.layers)

    @property
    def flops(self):
        """Forward FLOPs per sample."""
        return 2 * self.macs


def pool_size(size, kernel, stride, padding=0, ceil_mode=False):
    """Output length of a convolution or pooling window along one axis (PyTorch's rule, including
    its ``ceil_mode`` correction that the last window must start inside the padded input)."""
    span = size + 2 * padding - kernel
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


@dataclass(frozen=True)
class FeatureMap:
    """Channels and spatial size of an activation, threaded through a CNN definition."""
    channels: int
    height: int
    width: int

    def pool(self, kernel, stride, padding=0, ceil_mode=False):
        return FeatureMap(self.channels,
                          pool_size(self.height, kernel, stride, padding, ceil_mode),
                          pool_size(self.width, kernel, stride, padding, ceil_mode))

    @property
    def pixels(self):
        return self.height * self.width


def conv2d(name, x, out_channels, kernel, stride=1, padding=0, bias=True):
    """A square convolution on feature map ``x``; returns ``(layer, output feature map)``.

    Parameters: ``kernel^2 * in * out`` weights plus ``out`` biases when ``bias``.
    """
    y = FeatureMap(out_channels, pool_size(x.height, kernel, stride, padding),
                   pool_size(x.width, kernel, stride, padding))
    k = kernel * kernel * x.channels
    params = k * out_channels + (out_channels if bias else 0)
    return Layer(name, "conv", params, (Gemm(y.pixels, k, out_channels),)), y


def batchnorm(name, x):
    """Batch normalisation of ``x``: a scale and a shift per channel (running statistics are
    buffers, not parameters, so they are not all-reduced)."""
    return Layer(name, "norm", 2 * x.channels, (), x.channels * x.pixels)


def linear(name, in_features, out_features, rows=1, bias=True):
    """A fully connected layer applied to ``rows`` vectors per sample (tokens; 1 for a CNN head)."""
    params = in_features * out_features + (out_features if bias else 0)
    return Layer(name, "fc", params, (Gemm(rows, in_features, out_features),))


def layernorm(name, features, rows):
    """Layer normalisation of ``rows`` vectors of ``features``: a gain and a bias per feature."""
    return Layer(name, "norm", 2 * features, (), rows * features)


def embedding(name, rows, dim, lookups):
    """An embedding table of ``rows x dim``; ``lookups`` rows gathered per sample."""
    return Layer(name, "embedding", rows * dim, (), lookups * dim)


def attention(name, heads, head_dim, queries, keys):
    """The parameter-free core of multi-head attention, per sample: scores ``Q K^T``
    (``queries x head_dim x keys`` per head), softmax over the scores, and ``scores V``
    (``queries x keys x head_dim`` per head)."""
    return Layer(name, "attention", 0,
                 (Gemm(queries, head_dim, keys, heads, shared=False),
                  Gemm(queries, keys, head_dim, heads, shared=False)),
                 heads * queries * keys)

