"""Linear projection of token vectors followed by LayerNorm over the projected features.

A GEMM whose output rows are then reduced: the norm needs whole rows of the result.
"""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 32
in_features = 512
out_features = 512


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)

    def forward(self, x):
        return self.norm(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, seq_len, in_features)]


def get_init_inputs():
    return [in_features, out_features]
