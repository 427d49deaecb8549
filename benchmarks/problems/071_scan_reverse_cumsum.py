"""A reverse cumulative sum (flip, cumsum, flip): each output sums the inputs from it to
the row's end.

Two reversals around a scan.
"""

import torch
import torch.nn as nn

batch_size = 32
dim = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumsum(x.flip(1), dim=1).flip(1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
