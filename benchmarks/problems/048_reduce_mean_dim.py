"""Mean over the last (contiguous) axis of a 3-D tensor.

An innermost reduction followed by a division by the constant axis length.
"""

import torch
import torch.nn as nn

batch_size = 16
dim1 = 256
dim2 = 256
reduce_dim = -1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
