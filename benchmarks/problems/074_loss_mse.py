"""Mean squared error of two batches of vectors, reduced to one scalar.

An element-wise difference, a square and a full reduction.
"""

import torch
import torch.nn as nn

batch_size = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


def get_inputs():
    return [torch.randn(batch_size, 4096), torch.randn(batch_size, 4096)]


def get_init_inputs():
    return []
