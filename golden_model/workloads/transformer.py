"""Transformer (base), the encoder-decoder of Vaswani et al., "Attention Is All You Need",
NeurIPS 2017.

Architecture (Sec. 3 and Table 3, row "base"): N = 6 encoder and 6 decoder layers, d_model = 512,
d_ff = 2048, h = 8 heads of d_k = d_v = 64, post-layer normalisation (LayerNorm(x + sublayer(x))),
sinusoidal positional encodings (no parameters). Sec. 3.4: one embedding matrix is shared by the
source embedding, the target embedding and the pre-softmax linear transformation; Sec. 5.1: a
shared source-target byte-pair vocabulary of about 37000 tokens (WMT 2014 English-German), taken
here as exactly 37000. Every linear map has a bias (the paper does not say; this is the common
implementation). The shared matrix appears once in the table (row ``embedding``) and its gradient
collects the contributions of the output projection (row ``generator``, no parameters of its own)
and of both embeddings, so it is complete only when the backward pass reaches the first row.

One sample is one sentence pair of ``SEQUENCE`` source and ``SEQUENCE`` target tokens (our
choice; the paper batches about 25000 source and 25000 target tokens over 8 GPUs).

Published total: 65 x 10^6 parameters (Table 3, base), a figure rounded to millions whose
vocabulary is "about 37000"; this table has 63,082,496 (the usual count for this description),
3% below it, so the test allows 5%.
"""

from .layers import Gemm, Layer, Model, attention, embedding, layernorm, linear

PUBLISHED_PARAMS = 65_000_000
PUBLISHED_TOLERANCE = 0.05      # relative; see the module docstring
VOCAB, D_MODEL, D_FF, HEADS, LAYERS = 37000, 512, 2048, 8, 6
SEQUENCE = 128


def _attention_block(layers, name, queries, keys, self_attention):
    d, head = D_MODEL, D_MODEL // HEADS
    if self_attention:
        layers.append(linear(f"{name}.qkv", d, 3 * d, queries))
    else:
        layers += [linear(f"{name}.q", d, d, queries), linear(f"{name}.kv", d, 2 * d, keys)]
    layers += [attention(f"{name}.core", HEADS, head, queries, keys),
               linear(f"{name}.out", d, d, queries)]


def _feed_forward(layers, name, rows):
    layers += [linear(f"{name}.ffn1", D_MODEL, D_FF, rows),
               linear(f"{name}.ffn2", D_FF, D_MODEL, rows)]


def build():
    src = tgt = SEQUENCE
    layers = [embedding("embedding", VOCAB, D_MODEL, src + tgt)]
    for i in range(LAYERS):
        name = f"encoder{i}"
        _attention_block(layers, f"{name}.self", src, src, True)
        layers.append(layernorm(f"{name}.norm1", D_MODEL, src))
        _feed_forward(layers, name, src)
        layers.append(layernorm(f"{name}.norm2", D_MODEL, src))
    for i in range(LAYERS):
        name = f"decoder{i}"
        _attention_block(layers, f"{name}.self", tgt, tgt, True)
        layers.append(layernorm(f"{name}.norm1", D_MODEL, tgt))
        _attention_block(layers, f"{name}.cross", tgt, src, False)
        layers.append(layernorm(f"{name}.norm2", D_MODEL, tgt))
        _feed_forward(layers, name, tgt)
        layers.append(layernorm(f"{name}.norm3", D_MODEL, tgt))
    # The output projection uses the shared embedding matrix (no parameters of its own); its
    # softmax over the vocabulary is element-wise work.
    layers.append(Layer("generator", "fc", 0, (Gemm(tgt, D_MODEL, VOCAB),), tgt * VOCAB))
    return Model("transformer", "Transformer (base, shared 37000-token vocabulary)",
                 tuple(layers), f"one sentence pair of {src} + {tgt} tokens", 256, __doc__,
                 PUBLISHED_PARAMS)
