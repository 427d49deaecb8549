"""LayerNorm over the last axis of a (batch, tokens, features) tensor, with affine parameters.

A row-wise mean and variance followed by a normalise-scale-shift: two reductions per row.
"""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 128
features = 512


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, seq_len, features)]


def get_init_inputs():
    return [features]
