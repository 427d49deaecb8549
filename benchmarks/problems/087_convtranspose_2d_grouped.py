"""ConvTranspose2d with stride 2, output padding and four groups.

A grouped upsampling convolution.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(
            32, 64, kernel_size=3, stride=2, padding=1, output_padding=1, groups=4
        )

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 32, 32, 32)]


def get_init_inputs():
    return []
