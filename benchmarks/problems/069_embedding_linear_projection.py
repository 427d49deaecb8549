"""Embedding lookup followed by a Linear projection to a wider width and a ReLU.

A gather whose result is the left operand of a GEMM, over all tokens of the batch.
"""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 64
num_embeddings = 4096
embedding_dim = 128
out_features = 512


class Model(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, out_features):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)
        self.linear = nn.Linear(embedding_dim, out_features)

    def forward(self, ids):
        return torch.relu(self.linear(self.embedding(ids)))


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size, seq_len), dtype=torch.int64)]


def get_init_inputs():
    return [num_embeddings, embedding_dim, out_features]
