"""Population variance (torch.var with correction=0) over the last axis.

Two dependent reductions per row: the mean, then the mean squared deviation.
"""

import torch
import torch.nn as nn

batch_size = 16
dim1 = 256
dim2 = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.var(x, dim=-1, correction=0)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
