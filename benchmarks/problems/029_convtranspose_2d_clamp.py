"""ConvTranspose2d (3x3, stride 2, padding 1, output_padding 1) followed by a clamp.

The output_padding makes the upsampled size exactly twice the input; the clamp bounds it.
"""

import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 32
height = 16
width = 16
clamp_min = -0.5
clamp_max = 0.5


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, clamp_min, clamp_max):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(
            in_channels, out_channels, 3, stride=2, padding=1, output_padding=1
        )
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        return torch.clamp(self.deconv(x), min=self.clamp_min, max=self.clamp_max)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, clamp_min, clamp_max]
