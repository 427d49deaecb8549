"""An Elman RNN written by hand: eight steps of tanh(x W + h U + b), the last state out."""

import torch
import torch.nn as nn

batch_size = 16


class Model(nn.Module):
    def __init__(self, features=128, hidden=256):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.rec = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        h = torch.zeros(x.size(0), self.rec.in_features)
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
        return h


def get_inputs():
    return [torch.randn(batch_size, 8, 128)]


def get_init_inputs():
    return []
