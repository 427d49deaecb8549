"""MaxPool1d with window 4 and stride 2 over a (batch, channels, length) sequence.

A 1-D sliding-window max with overlapping windows.
"""

import torch
import torch.nn as nn

batch_size = 16
channels = 64
length = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=4, stride=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
