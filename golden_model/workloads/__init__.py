"""Training workloads: per-layer tables of parameters (gradient elements) and forward work.

Each model is defined in its own module from its architecture paper (no downloads, no deep-learning
framework); ``get_model(name)`` returns its ``Model`` (see ``layers.py`` for the fields and the
counting conventions). Every model's default mini-batch is 256 samples per node: the MultiTree
authors' simulator default (``--mini-batch-size 256`` per accelerator in
``farabimahmud/accelerator`` ``src/simulate.py``, split over the 16 vaults in ``src/hmc.py``).
"""

import functools
import importlib

from ..errors import ConfigError
from .layers import Gemm, Layer, Model

__all__ = ["MODELS", "get_model", "Gemm", "Layer", "Model"]

# name -> module in this package (each has ``build() -> Model``)
MODELS = {
    "alexnet": "alexnet",
    "googlenet": "googlenet",
    "resnet50": "resnet50",
    "vgg16": "vgg16",
    "transformer": "transformer",
    "ncf": "ncf",
    "alphagozero": "alphagozero",
}


@functools.cache
def get_model(name):
    """The ``Model`` called ``name`` (one of ``MODELS``, case-insensitive as algorithm and
    topology names are).

    Raises
    ------
    ConfigError
        If ``name`` is not a known model.
    """
    key = str(name).strip().lower()
    if key not in MODELS:
        raise ConfigError(f"unknown model {name!r}: expected one of {', '.join(MODELS)}")
    return importlib.import_module(f".{MODELS[key]}", __name__).build()
