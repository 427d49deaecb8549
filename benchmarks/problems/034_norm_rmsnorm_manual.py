"""RMSNorm written by hand: x * rsqrt(mean(x^2) + eps) * weight over the last axis.

One reduction per row (no mean subtraction), as used in LLaMA-style models.
"""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 128
features = 512
eps = 1e-6


class Model(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(features) + 0.5)
        self.eps = eps

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(batch_size, seq_len, features)]


def get_init_inputs():
    return [features, eps]
