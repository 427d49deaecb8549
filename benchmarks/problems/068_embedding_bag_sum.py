"""An embedding bag written as an embedding lookup followed by a sum over each bag.

A gather feeding a reduction, as in recommendation models' sparse features.
"""

import torch
import torch.nn as nn

batch_size = 32
bag_size = 128
num_embeddings = 4096
embedding_dim = 256


class Model(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, ids):
        return self.embedding(ids).sum(dim=1)


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size, bag_size), dtype=torch.int64)]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
