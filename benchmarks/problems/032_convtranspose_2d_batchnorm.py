"""Bias-free ConvTranspose2d (4x4, stride 2) followed by BatchNorm2d (eval) and ReLU.

A DCGAN-style generator stage: upsample, per-channel affine norm, activation.
"""

import torch
import torch.nn as nn

batch_size = 8
in_channels = 64
out_channels = 32
height = 14
width = 14


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(
            in_channels, out_channels, 4, stride=2, padding=1, bias=False
        )
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():  # non-trivial running statistics and affine parameters
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.relu(self.bn(self.deconv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
