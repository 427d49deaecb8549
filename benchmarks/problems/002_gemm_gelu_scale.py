"""Linear, GELU (erf form) and a multiplication by a constant scale.

A transcendental epilogue followed by a scalar multiply that a compiler can fold into it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_features = 1024
out_features = 1024
scale = 0.5


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return F.gelu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
