"""AdaptiveAvgPool2d to (1, 1) and a flatten: the global pool before a classifier.

A full spatial reduction to one value per (image, channel).
"""

import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 28
width = 28


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x):
        return torch.flatten(self.pool(x), 1)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
