"""A Conv3d with padding, then Mish and tanh."""

import torch
import torch.nn as nn

batch_size = 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(4, 16, 3, padding=1)

    def forward(self, x):
        return torch.tanh(nn.functional.mish(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, 4, 16, 32, 32)]


def get_init_inputs():
    return []
