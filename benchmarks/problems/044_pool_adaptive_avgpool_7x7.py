"""AdaptiveAvgPool2d from 14x14 to 7x7, an exact multiple (equivalent to 2x2 average pooling).

Adaptive pooling whose windows are uniform, so it lowers to a regular strided pool.
"""

import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 14
width = 14


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((7, 7))

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
