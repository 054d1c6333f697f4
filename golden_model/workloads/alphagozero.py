"""AlphaGo Zero's network, the 20-block version of Silver et al., "Mastering the game of Go
without human knowledge", Nature 550 (2017), Methods, "Neural network architecture".

Input: 19 x 19 x 17 feature planes. A residual tower of one convolutional block (256 filters of
3x3, stride 1, batch normalisation, rectifier) and 19 residual blocks (two such convolutions with
a skip connection), i.e. the "20 blocks" network; the policy head (a 1x1 convolution of 2
filters, batch normalisation, rectifier, a fully connected layer to 19^2 + 1 = 362 move logits)
and the value head (a 1x1 convolution of 1 filter, batch normalisation, rectifier, a fully
connected layer to 256, rectifier, a fully connected layer to 1, tanh). Convolutions have no bias
(batch normalisation supplies the shift, as in the open reimplementations Leela Zero and Minigo);
fully connected layers have biases. One sample is one board position.

No total is published; the test checks the table against the closed-form count of this
description, 22,827,877 parameters.
"""

from .layers import FeatureMap, Model, batchnorm, conv2d, linear

BOARD, PLANES, FILTERS, RESIDUAL_BLOCKS = 19, 17, 256, 19


def _conv_bn(layers, name, x, out, kernel):
    conv, y = conv2d(name, x, out, kernel, 1, kernel // 2, bias=False)
    layers += [conv, batchnorm(f"{name}.bn", y)]
    return y


def build():
    layers = []
    x = _conv_bn(layers, "tower.conv", FeatureMap(PLANES, BOARD, BOARD), FILTERS, 3)
    for b in range(RESIDUAL_BLOCKS):
        x = _conv_bn(layers, f"tower.res{b}.conv1", x, FILTERS, 3)
        x = _conv_bn(layers, f"tower.res{b}.conv2", x, FILTERS, 3)
    p = _conv_bn(layers, "policy.conv", x, 2, 1)
    layers.append(linear("policy.fc", p.channels * p.pixels, BOARD * BOARD + 1))
    v = _conv_bn(layers, "value.conv", x, 1, 1)
    layers += [linear("value.fc1", v.pixels, 256), linear("value.fc2", 256, 1)]
    return Model("alphagozero", "AlphaGo Zero (20 blocks, 256 filters)", tuple(layers),
                 "one 19x19 board position", 256, __doc__, None)
