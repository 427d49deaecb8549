"""Clamp an input between per-feature lower and upper bounds given as tensors.

torch.clamp with tensor bounds: a broadcast min and max rather than scalar constants.
"""

import torch
import torch.nn as nn

batch_size = 16
rows = 256
features = 256


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.register_buffer("low", -torch.rand(features))
        self.register_buffer("high", torch.rand(features))

    def forward(self, x):
        return torch.clamp(x, min=self.low, max=self.high)


def get_inputs():
    return [torch.randn(batch_size, rows, features)]


def get_init_inputs():
    return [features]
