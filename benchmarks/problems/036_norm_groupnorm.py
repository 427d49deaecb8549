"""GroupNorm with 8 groups over 64 channels of a feature map.

Statistics are taken over groups of channels together with the spatial axes.
"""

import torch
import torch.nn as nn

batch_size = 8
channels = 64
num_groups = 8
height = 32
width = 32


class Model(nn.Module):
    def __init__(self, num_groups, channels):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, channels)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]
