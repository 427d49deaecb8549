"""AvgPool2d with a 3x3 window, stride 1 and padding 1 (padded zeros counted in the mean).

Every output averages nine inputs; count_include_pad keeps the divisor constant.
"""

import torch
import torch.nn as nn

batch_size = 8
channels = 32
height = 56
width = 56


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=3, stride=1, padding=1, count_include_pad=True)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
