"""Sum over the middle axis of a 3-D tensor, keeping the reduced axis.

A reduction over a non-innermost axis: the summed elements are a row apart in memory.
"""

import torch
import torch.nn as nn

batch_size = 16
dim1 = 256
dim2 = 256
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
