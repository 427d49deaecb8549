"""torch.cumsum along the rows: each output sums every input before it in its row.

A scan, which mlirtune imports as products with triangular blocks of ones.
"""

import torch
import torch.nn as nn

batch_size = 32
dim = 1024


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [1]
