"""Softmax over the last axis of a (batch, rows, features) tensor.

A max, an exponential, a sum and a divide per row: reductions feeding back into elementwise.
"""

import torch
import torch.nn as nn

batch_size = 16
rows = 128
features = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, rows, features)]


def get_init_inputs():
    return []
