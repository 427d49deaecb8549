"""Batched a @ b^T with both operands given row-major, as in a similarity matrix.

The second operand is transposed in the graph, so the GEMM reads it along its contiguous axis.
"""

import torch
import torch.nn as nn

batch_size = 16
m = 128
n = 128
k = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b.transpose(-2, -1))


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, n, k)]


def get_init_inputs():
    return []
