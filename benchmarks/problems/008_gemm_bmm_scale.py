"""Batched matmul (torch.bmm) of two input tensors, scaled by a constant.

No weights: both operands are inputs, one independent GEMM per batch element.
"""

import torch
import torch.nn as nn

batch_size = 16
m = 128
k = 256
n = 128
scale = 0.0625


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.bmm(a, b) * self.scale


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return [scale]
