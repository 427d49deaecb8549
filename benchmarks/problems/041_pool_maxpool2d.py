"""MaxPool2d with a 3x3 window, stride 2 and padding 1 (the ResNet stem pool).

Overlapping windows and a padded border that must not win the max.
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
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
