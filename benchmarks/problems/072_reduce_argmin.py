"""torch.argmin over the middle axis of a 3-D tensor: the index of each column's least value.

An index reduction across rows, whose rows are 257 wide (no whole vector).
"""

import torch
import torch.nn as nn

batch_size = 16


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmin(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, 256, 257)]


def get_init_inputs():
    return [1]
