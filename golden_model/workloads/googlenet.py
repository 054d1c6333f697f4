"""GoogLeNet (Inception v1), torchvision's ``googlenet`` without the auxiliary classifiers.

Architecture: Szegedy et al., "Going Deeper with Convolutions", CVPR 2015, Table 1: a 7x7/2
convolution of 64 filters, 3x3/2 max pool, a 1x1 convolution of 64 and a 3x3 of 192 filters, max
pool, inception modules 3a, 3b, max pool, 4a-4e, max pool, 5a, 5b (the filter counts of Table 1),
global average pool and a 1024-1000 fully connected layer. As in torchvision: every convolution has
no bias and is followed by batch normalisation, pools use ``ceil_mode``, and the "5x5" branch of
each inception module uses a 3x3 kernel (torchvision's known deviation, kept so the total matches
the published weights; see pytorch/vision issue #906). The auxiliary classifiers are training-only
heads torchvision drops with the pretrained weights; they are not part of this table.

Published total: 6,624,904 parameters, torchvision's ``GoogLeNet_Weights.IMAGENET1K_V1``
``meta["num_params"]``; 1.498 G multiply-adds, its ``_ops``.
"""

from .layers import FeatureMap, Model, batchnorm, conv2d, linear

PUBLISHED_PARAMS = 6_624_904
# name: (1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5", pool projection), Table 1 of the paper.
INCEPTION = {
    "3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64), "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128), "5b": (384, 192, 384, 48, 128, 128),
}
POOL_AFTER = {"3b": (3, 2), "4e": (2, 2)}     # max pools between inception groups (ceil_mode)


def _conv_bn(layers, name, x, out, kernel, stride=1, padding=0):
    conv, y = conv2d(name, x, out, kernel, stride, padding, bias=False)
    layers += [conv, batchnorm(f"{name}.bn", y)]
    return y


def _inception(layers, name, x, c1, c3r, c3, c5r, c5, cp):
    _conv_bn(layers, f"inception{name}.branch1", x, c1, 1)
    r = _conv_bn(layers, f"inception{name}.branch2.reduce", x, c3r, 1)
    _conv_bn(layers, f"inception{name}.branch2", r, c3, 3, 1, 1)
    r = _conv_bn(layers, f"inception{name}.branch3.reduce", x, c5r, 1)
    _conv_bn(layers, f"inception{name}.branch3", r, c5, 3, 1, 1)
    _conv_bn(layers, f"inception{name}.branch4", x.pool(3, 1, 1, True), cp, 1)
    return type(x)(c1 + c3 + c5 + cp, x.height, x.width)


def build():
    layers = []
    x = _conv_bn(layers, "conv1", FeatureMap(3, 224, 224), 64, 7, 2, 3)
    x = x.pool(3, 2, 0, True)
    x = _conv_bn(layers, "conv2", x, 64, 1)
    x = _conv_bn(layers, "conv3", x, 192, 3, 1, 1)
    x = x.pool(3, 2, 0, True)
    for name, widths in INCEPTION.items():
        x = _inception(layers, name, x, *widths)
        if name in POOL_AFTER:
            x = x.pool(*POOL_AFTER[name], 0, True)
    layers.append(linear("fc", x.channels, 1000))
    return Model("googlenet", "GoogLeNet (torchvision, no auxiliary classifiers)", tuple(layers),
                 "one 224x224 RGB image", 256, __doc__, PUBLISHED_PARAMS)
