"""MaxPool3d with a 3x3x3 window, stride 2 and padding 1.

A padded, strided window over a volume.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(4, 16, 32, 32, 32)]


def get_init_inputs():
    return []
