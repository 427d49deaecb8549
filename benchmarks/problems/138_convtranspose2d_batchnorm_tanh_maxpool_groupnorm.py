"""ConvTranspose2d, BatchNorm2d, tanh, a 2x2 max pool and GroupNorm."""

import torch
import torch.nn as nn

batch_size = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(16, 32, 4, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(2)
        self.gn = nn.GroupNorm(4, 32)

    def forward(self, x):
        return self.gn(self.pool(torch.tanh(self.bn(self.deconv(x)))))


def get_inputs():
    return [torch.randn(batch_size, 16, 32, 32)]


def get_init_inputs():
    return []
