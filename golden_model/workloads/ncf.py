"""NCF: the NeuMF model of He et al., "Neural Collaborative Filtering", WWW 2017, on MovieLens 1M.

Architecture (Sec. 3.4, and the authors' code ``hexiangnan/neural_collaborative_filtering``,
``NeuMF.py`` defaults): a GMF branch with user and item embeddings of 8 (``--num_factors 8``)
multiplied element-wise; an MLP branch with user and item embeddings of 32 (``layers[0] / 2`` of
``--layers [64,32,16,8]``) concatenated into 64 and fed through fully connected layers 64-32-16-8;
the two branch outputs (8 + 8) concatenated into one fully connected prediction unit. Every fully
connected layer has a bias. MovieLens 1M as the paper uses it (Table 1): 6,040 users and 3,706
items. One sample is one (user, item) pair; the authors' default batch is 256.

No total is published; the test checks the table against the closed-form count of this
description, 392,601 parameters.
"""

from .layers import Model, embedding, linear

USERS, ITEMS = 6040, 3706
MF_DIM, MLP_LAYERS = 8, (64, 32, 16, 8)


def build():
    emb = MLP_LAYERS[0] // 2
    layers = [embedding("mf_embedding_user", USERS, MF_DIM, 1),
              embedding("mf_embedding_item", ITEMS, MF_DIM, 1),
              embedding("mlp_embedding_user", USERS, emb, 1),
              embedding("mlp_embedding_item", ITEMS, emb, 1)]
    for i, (a, b) in enumerate(zip(MLP_LAYERS, MLP_LAYERS[1:]), start=1):
        layers.append(linear(f"layer{i}", a, b))
    layers.append(linear("prediction", MF_DIM + MLP_LAYERS[-1], 1))
    return Model("ncf", "NCF (NeuMF, MovieLens 1M, 8 factors, MLP 64-32-16-8)", tuple(layers),
                 "one (user, item) pair", 256, __doc__, None)
