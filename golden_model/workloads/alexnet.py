"""AlexNet, the one-tower variant of torchvision (``torchvision.models.alexnet``).

Architecture: Krizhevsky, "One weird trick for parallelizing convolutional neural networks",
arXiv:1404.5997 (2014), as implemented by torchvision: five convolutions with 64, 192, 384, 256,
256 filters (11x11 stride 4, 5x5, then 3x3), max pooling after the first, second and fifth, and
three fully connected layers 9216-4096-4096-1000, all with biases, on a 224x224 RGB image.

Published total: 61,100,840 parameters, torchvision's ``AlexNet_Weights.IMAGENET1K_V1``
``meta["num_params"]`` (and 0.714 G multiply-adds, its ``_ops``). The two-tower original of
Krizhevsky et al. (NIPS 2012; grouped convolutions of 96-256-384-384-256 filters) has 60,965,224;
this toolkit models the torchvision variant because its total is published exactly.
"""

from .layers import FeatureMap, Model, conv2d, linear

PUBLISHED_PARAMS = 61_100_840


def build():
    x = FeatureMap(3, 224, 224)
    layers = []
    for i, (out, kernel, stride, pad, pool) in enumerate(
            [(64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
             (256, 3, 1, 1, False), (256, 3, 1, 1, True)], start=1):
        layer, x = conv2d(f"conv{i}", x, out, kernel, stride, pad)
        layers.append(layer)
        if pool:
            x = x.pool(3, 2)
    # x is 256 x 6 x 6 here (torchvision's adaptive average pool to 6x6 is then the identity).
    layers += [linear("fc6", x.channels * x.pixels, 4096), linear("fc7", 4096, 4096),
               linear("fc8", 4096, 1000)]
    return Model("alexnet", "AlexNet (torchvision one-tower)", tuple(layers),
                 "one 224x224 RGB image", 256, __doc__, PUBLISHED_PARAMS)
