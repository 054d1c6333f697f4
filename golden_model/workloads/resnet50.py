"""ResNet-50, torchvision's ``resnet50`` (v1.5: the stride of a down-sampling bottleneck is on
its 3x3 convolution).

Architecture: He et al., "Deep Residual Learning for Image Recognition", CVPR 2016, Table 1
(50-layer column): a 7x7/2 convolution of 64 filters, 3x3/2 max pool, then bottleneck stages of
3, 4, 6, 3 blocks (1x1 reduce, 3x3, 1x1 expand by 4) with 64, 128, 256, 512 inner channels, a
1x1 projection shortcut on the first block of every stage, global average pool and a 2048-1000
fully connected layer. As in torchvision, convolutions have no bias and each is followed by batch
normalisation (a scale and a shift per channel).

Published total: 25,557,032 parameters, torchvision's ``ResNet50_Weights.IMAGENET1K_V1``
``meta["num_params"]``; 4.089 G multiply-adds, its ``_ops``.
"""

from .layers import FeatureMap, Model, batchnorm, conv2d, linear

PUBLISHED_PARAMS = 25_557_032
STAGES = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]   # inner width, blocks, stride
EXPANSION = 4


def _conv_bn(layers, name, x, out, kernel, stride=1, padding=0):
    conv, y = conv2d(name, x, out, kernel, stride, padding, bias=False)
    layers += [conv, batchnorm(f"{name}.bn", y)]
    return y


def build():
    layers = []
    x = _conv_bn(layers, "conv1", FeatureMap(3, 224, 224), 64, 7, 2, 3)
    x = x.pool(3, 2, 1)
    for s, (width, blocks, stride) in enumerate(STAGES, start=1):
        for b in range(blocks):
            name = f"layer{s}.{b}"
            st = stride if b == 0 else 1
            y = _conv_bn(layers, f"{name}.conv1", x, width, 1)
            y = _conv_bn(layers, f"{name}.conv2", y, width, 3, st, 1)
            y = _conv_bn(layers, f"{name}.conv3", y, width * EXPANSION, 1)
            if b == 0:
                _conv_bn(layers, f"{name}.downsample", x, width * EXPANSION, 1, st)
            x = y
    layers.append(linear("fc", x.channels, 1000))
    return Model("resnet50", "ResNet-50 (torchvision v1.5)", tuple(layers),
                 "one 224x224 RGB image", 256, __doc__, PUBLISHED_PARAMS)
