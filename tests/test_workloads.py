"""Workload tables: parameter totals against the published figures, and the structure behind them.

The published totals are quoted here from their sources (not from the code):
torchvision's weight metadata ``meta["num_params"]`` and ``meta["_ops"]`` (giga multiply-adds) for
AlexNet, VGG-16, ResNet-50 and GoogLeNet; Vaswani et al. 2017 Table 3 for the Transformer; for NCF
and AlphaGo Zero, which publish no total, the closed-form count of the architecture their papers
describe, written out below independently of the layer tables.
"""

import pytest

from golden_model.errors import ConfigError
from golden_model.workloads import MODELS, get_model
from golden_model.workloads.layers import pool_size

# name: (torchvision num_params, torchvision _ops in G multiply-adds, decimals of _ops)
TORCHVISION = {
    "alexnet": (61_100_840, 0.714, 3),
    "vgg16": (138_357_544, 15.47, 2),
    "resnet50": (25_557_032, 4.089, 3),
    "googlenet": (6_624_904, 1.498, 3),
}


@pytest.mark.parametrize("name", sorted(TORCHVISION))
def test_torchvision_totals_exact(name):
    params, _, _ = TORCHVISION[name]
    model = get_model(name)
    assert model.params == params
    assert model.published_params == params


@pytest.mark.parametrize("name", sorted(TORCHVISION))
def test_torchvision_multiply_adds(name):
    """Forward multiply-adds per image agree with torchvision's ``_ops`` to its rounding."""
    _, ops, decimals = TORCHVISION[name]
    model = get_model(name)
    assert abs(model.macs / 1e9 - ops) <= 0.5 * 10 ** -decimals
    assert model.flops == 2 * model.macs


def transformer_base_closed_form(vocab=37000, d=512, ff=2048, n=6):
    """Vaswani et al. 2017, Sec. 3: shared embedding + n encoder layers (self-attention: 4
    projections d x d with bias; feed-forward d-ff-d; 2 layer norms) + n decoder layers (two
    attentions, feed-forward, 3 layer norms)."""
    proj = d * d + d
    ffn = d * ff + ff + ff * d + d
    norm = 2 * d
    return vocab * d + n * (4 * proj + ffn + 2 * norm) + n * (8 * proj + ffn + 3 * norm)


def test_transformer_base_total():
    model = get_model("transformer")
    assert model.params == transformer_base_closed_form()
    # Table 3 gives 65 x 10^6 (rounded, vocabulary "about 37000"): the stated 5% tolerance.
    assert model.published_params == 65_000_000
    assert abs(model.params - 65e6) / 65e6 <= 0.05


def test_transformer_shares_one_embedding_matrix():
    """Sec. 3.4: one matrix for both embeddings and the pre-softmax projection."""
    model = get_model("transformer")
    emb = [layer for layer in model.layers if layer.kind == "embedding"]
    assert len(emb) == 1 and emb[0].params == 37000 * 512
    assert model.layers[0] is emb[0]
    generator = model.layers[-1]
    assert generator.name == "generator" and generator.params == 0
    assert generator.macs == 128 * 512 * 37000


def test_ncf_total():
    users, items = 6040, 3706             # MovieLens 1M, He et al. 2017 Table 1
    embeddings = (users + items) * (8 + 32)   # GMF 8, MLP 64/2
    mlp = (64 * 32 + 32) + (32 * 16 + 16) + (16 * 8 + 8)
    prediction = (8 + 8) * 1 + 1
    assert get_model("ncf").params == embeddings + mlp + prediction == 392_601


def test_alphagozero_total():
    """Silver et al. 2017, Methods: 19x19x17 input, 1 + 19 blocks of 3x3x256 convolutions with
    batch norm (no conv bias), policy and value heads."""
    c, board = 256, 19 * 19
    tower = 17 * 9 * c + 2 * 19 * 9 * c * c + (1 + 2 * 19) * 2 * c
    policy = c * 2 + 2 * 2 + (2 * board) * 362 + 362
    value = c * 1 + 2 * 1 + board * 256 + 256 + 256 * 1 + 1
    assert get_model("alphagozero").params == tower + policy + value


def test_layer_structure():
    """Layer counts and individual layers a reader can check against the papers."""
    resnet = get_model("resnet50")
    convs = [x for x in resnet.layers if x.kind == "conv"]
    assert len(convs) == 49 + 4                      # 49 weighted conv layers + 4 projections
    assert sum(x.kind == "norm" for x in resnet.layers) == len(convs)
    assert resnet.layers[-1].params == 2048 * 1000 + 1000
    vgg = get_model("vgg16")
    assert [x.kind for x in vgg.layers] == ["conv"] * 13 + ["fc"] * 3
    assert vgg.layers[0].macs == 224 * 224 * (3 * 3 * 3) * 64
    assert vgg.layers[13].params == 512 * 7 * 7 * 4096 + 4096
    googlenet = get_model("googlenet")
    assert sum(x.kind == "conv" for x in googlenet.layers) == 3 + 9 * 6
    agz = get_model("alphagozero")
    assert sum(x.kind == "conv" and x.gemms[0].k == 9 * 256 for x in agz.layers) == 38


def test_pooling_sizes_follow_pytorch():
    assert pool_size(224, 11, 4, 2) == 55            # AlexNet conv1
    assert pool_size(55, 3, 2) == 27
    assert pool_size(112, 3, 2, 0, ceil_mode=True) == 56    # GoogLeNet, ceil_mode pools
    assert pool_size(14, 2, 2, 0, ceil_mode=True) == 7
    assert pool_size(5, 2, 2, 0, ceil_mode=True) == 3
    assert pool_size(4, 3, 2, 1, ceil_mode=True) == 3
    assert pool_size(5, 2, 2, 1, ceil_mode=True) == 3       # a 4th window would start in padding


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_is_well_formed(name):
    model = get_model(name)
    names = [x.name for x in model.layers]
    assert len(names) == len(set(names))
    assert all(x.params >= 0 and x.macs >= 0 and x.vector >= 0 for x in model.layers)
    assert model.params == sum(x.params for x in model.layers) > 0
    assert model.default_mini_batch == 256
    assert model.source and model.title and model.sample


def test_unknown_model():
    with pytest.raises(ConfigError, match="'lenet'.*resnet50"):
        get_model("lenet")
