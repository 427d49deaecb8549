"""An exclusive cumulative sum: each output sums the inputs strictly before it in its row.

Written as a user would: a zero column joined in front, then the inclusive scan with its
last column dropped.
"""

import torch

batch_size = 64
length = 2048


class Model(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        zeros = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
        shifted = torch.cat((zeros, x), dim=self.dim)[:, :-1]
        return torch.cumsum(shifted, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return [1]
