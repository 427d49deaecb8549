"""torch.prod over the middle axis: the product of 64 values per output, kept near one.

A multiplicative reduction across rows.
"""

import torch
import torch.nn as nn

batch_size = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.prod(x, dim=1)


def get_inputs():
    return [torch.rand(batch_size, 64, 256) + 0.5]


def get_init_inputs():
    return []
