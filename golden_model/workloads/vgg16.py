"""VGG-16 (configuration D), torchvision's ``vgg16`` without batch normalisation.

Architecture: Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
Recognition", ICLR 2015, Table 1 column D: thirteen 3x3 convolutions (stride 1, padding 1) of 64,
64, 128, 128, 256 x3, 512 x3, 512 x3 filters with a 2x2 max pool after each group, then fully
connected layers 25088-4096-4096-1000, all with biases, on a 224x224 RGB image.

Published total: 138,357,544 parameters, torchvision's ``VGG16_Weights.IMAGENET1K_V1``
``meta["num_params"]`` (the paper's Table 2 rounds it to 138 M); 15.47 G multiply-adds, its
``_ops``.
"""

from .layers import FeatureMap, Model, conv2d, linear

PUBLISHED_PARAMS = 138_357_544
CONFIG_D = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]


def build():
    x = FeatureMap(3, 224, 224)
    layers = []
    for group, (out, repeat) in enumerate(CONFIG_D, start=1):
        for j in range(1, repeat + 1):
            layer, x = conv2d(f"conv{group}_{j}", x, out, 3, 1, 1)
            layers.append(layer)
        x = x.pool(2, 2)
    layers += [linear("fc6", x.channels * x.pixels, 4096), linear("fc7", 4096, 4096),
               linear("fc8", 4096, 1000)]
    return Model("vgg16", "VGG-16 (configuration D, torchvision)", tuple(layers),
                 "one 224x224 RGB image", 256, __doc__, PUBLISHED_PARAMS)
