"""nn.Embedding lookup of int64 token ids into a 4096 x 128 table.

A pure gather: each output row is a table row chosen by an integer input.
"""

import torch
import torch.nn as nn

batch_size = 32
seq_len = 128
num_embeddings = 4096
embedding_dim = 128


class Model(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, ids):
        return self.embedding(ids)


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size, seq_len), dtype=torch.int64)]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
