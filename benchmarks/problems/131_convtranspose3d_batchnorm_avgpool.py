"""ConvTranspose3d (stride 2), BatchNorm3d and two 2x2x2 average pools."""

import torch
import torch.nn as nn

batch_size = 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(8, 16, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm3d(16)
        self.pool1 = nn.AvgPool3d(2)
        self.pool2 = nn.AvgPool3d(2)

    def forward(self, x):
        return self.pool2(self.pool1(self.bn(self.deconv(x))))


def get_inputs():
    return [torch.randn(batch_size, 8, 16, 16, 16)]


def get_init_inputs():
    return []
