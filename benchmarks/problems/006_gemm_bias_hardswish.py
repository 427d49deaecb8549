"""Bias-free Linear, a separately stored bias vector added by broadcast, then Hardswish.

The bias is a parameter of its own, so the add is a broadcast along the feature axis.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_features = 1024
out_features = 768


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        return F.hardswish(self.linear(x) + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
