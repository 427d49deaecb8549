"""ConvTranspose3d in two groups, stride 2, padding 1 and an output padding of 1."""

import torch
import torch.nn as nn

batch_size = 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(8, 8, 3, stride=2, padding=1, output_padding=1, groups=2)

    def forward(self, x):
        return self.deconv(x)


def get_inputs():
    return [torch.randn(batch_size, 8, 8, 16, 16)]


def get_init_inputs():
    return []
