"""torch.where on a comparison of two inputs: keep x where x > y, else a scaled y.

A select driven by an elementwise boolean mask computed in the same graph.
"""

import torch
import torch.nn as nn

batch_size = 16
dim1 = 256
dim2 = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.where(x > y, x, 0.5 * y)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2), torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
