"""Maximum over the middle axis with torch.amax (values only, no indices).

A max-reduction whose identity is -inf, over a strided axis.
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
        return torch.amax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
