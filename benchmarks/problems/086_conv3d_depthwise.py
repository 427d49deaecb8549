"""Depthwise 3x3x3 Conv3d: one filter per channel over a volume.

Grouped with one channel per group, which torch-mlir does not lower as it is.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(16, 16, kernel_size=3, padding=1, groups=16)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 16, 16, 32, 32)]


def get_init_inputs():
    return []
