"""AvgPool3d with a 2x2x2 window and stride 2 over a volume.

Eight-input averages along three spatial axes, no overlap.
"""

import torch
import torch.nn as nn

batch_size = 4
channels = 16
depth = 16
height = 32
width = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d(kernel_size=2, stride=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
