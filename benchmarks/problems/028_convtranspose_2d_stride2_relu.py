"""ConvTranspose2d with a 4x4 kernel, stride 2 and padding 1 (a 2x upsampler), then ReLU.

A transposed conv scatters each input pixel into an overlapping output window.
"""

import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 16
height = 16
width = 16


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1)

    def forward(self, x):
        return torch.relu(self.deconv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
