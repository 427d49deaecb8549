"""SwiGLU feed-forward: w2(silu(w1 x) * w3 x) with bias-free projections.

Two GEMMs that share an input and meet in an elementwise product, then a third GEMM.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 32
embed_dim = 512
hidden_dim = 768


class Model(nn.Module):
    def __init__(self, embed_dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(embed_dim, hidden_dim, bias=False)
        self.w3 = nn.Linear(embed_dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, embed_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, hidden_dim]
