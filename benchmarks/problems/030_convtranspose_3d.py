"""ConvTranspose3d with a 2x2x2 kernel and stride 2 (non-overlapping 2x upsampling of a volume).

With kernel equal to stride every output voxel comes from exactly one input voxel.
"""

import torch
import torch.nn as nn

batch_size = 4
in_channels = 32
out_channels = 16
depth = 8
height = 16
width = 16


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(in_channels, out_channels, 2, stride=2)

    def forward(self, x):
        return self.deconv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
