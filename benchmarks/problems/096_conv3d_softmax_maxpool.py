"""Conv3d, a softmax over channels, then MaxPool3d.

A reduction across the convolution's channels between it and a pool.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 16, 3)
        self.pool = nn.MaxPool3d(2)

    def forward(self, x):
        x = torch.softmax(self.conv(x), dim=1)
        return self.pool(x)


def get_inputs():
    return [torch.randn(4, 3, 16, 32, 32)]


def get_init_inputs():
    return []
