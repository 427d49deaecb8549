"""Two-layer MLP (Linear, tanh-approximated GELU, Linear) as in a transformer feed-forward.

Two dependent GEMMs with a wide intermediate between them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 32
embed_dim = 512
hidden_dim = 1024


class Model(nn.Module):
    def __init__(self, embed_dim, hidden_dim):
        super().__init__()
        self.fc1 = nn.Linear(embed_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, embed_dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, hidden_dim]
