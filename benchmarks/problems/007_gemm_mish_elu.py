"""Linear followed by Mish and then ELU.

A long transcendental epilogue (softplus, tanh, exp) after a GEMM on token vectors.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
seq_len = 32
in_features = 384
out_features = 768


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.elu(F.mish(self.linear(x)), alpha=1.0)


def get_inputs():
    return [torch.randn(batch_size, seq_len, in_features)]


def get_init_inputs():
    return [in_features, out_features]
