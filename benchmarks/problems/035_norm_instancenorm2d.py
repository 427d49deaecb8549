"""InstanceNorm2d with affine parameters: each (image, channel) plane normalised on its own.

The reduction runs over the spatial axes only, one statistic pair per plane.
"""

import torch
import torch.nn as nn

batch_size = 8
channels = 32
height = 56
width = 56


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels, affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
