"""Conv2d with a 3x7 kernel and matching padding, no bias.

A kernel wider than it is tall, over a 64x96 image.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, kernel_size=(3, 7), padding=(1, 3), bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 16, 64, 96)]


def get_init_inputs():
    return []
