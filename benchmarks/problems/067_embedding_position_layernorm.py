"""Token embedding plus a learned position embedding (positions from arange), then LayerNorm.

The input layer of a BERT-style encoder: two gathers, a broadcast add and a row norm.
"""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 128
vocab_size = 4096
max_positions = 128
embed_dim = 256


class Model(nn.Module):
    def __init__(self, vocab_size, max_positions, embed_dim):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, embed_dim)
        self.positions = nn.Embedding(max_positions, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.norm(self.tokens(ids) + self.positions(pos))


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, seq_len), dtype=torch.int64)]


def get_init_inputs():
    return [vocab_size, max_positions, embed_dim]
