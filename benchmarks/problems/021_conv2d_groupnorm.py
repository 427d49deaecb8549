"""3x3 Conv2d followed by GroupNorm (8 groups) and SiLU.

The norm reduces over each group of channels and the whole image, after the conv.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
in_channels = 16
out_channels = 32
num_groups = 8
height = 32
width = 32


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, num_groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        return F.silu(self.norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, num_groups]
