"""torch.diag(a) @ B: each row of B scaled by an element of a.

A matmul with a diagonal matrix, which is a broadcast product.
"""

import torch
import torch.nn as nn

N = 1024
M = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
