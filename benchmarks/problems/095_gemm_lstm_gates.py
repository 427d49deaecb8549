"""Two Linears summed into four gates, chunked, and combined as an LSTM cell's are.

Slices of one GEMM output read by sigmoid and tanh branches.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(128, 512)
        self.hh = nn.Linear(128, 512)

    def forward(self, x):
        g = self.ih(x) + self.hh(torch.tanh(x))
        i, f, c, o = g.chunk(4, dim=1)
        return torch.sigmoid(o) * torch.tanh(
            torch.sigmoid(f) * x + torch.sigmoid(i) * torch.tanh(c)
        )


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
