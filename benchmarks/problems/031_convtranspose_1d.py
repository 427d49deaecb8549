"""ConvTranspose1d (kernel 5, stride 2, padding 2, output_padding 1) on a sequence, then tanh.

A 1-D transposed conv, as in an audio decoder: the sequence length doubles.
"""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 32
length = 128


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.deconv = nn.ConvTranspose1d(
            in_channels, out_channels, 5, stride=2, padding=2, output_padding=1
        )

    def forward(self, x):
        return torch.tanh(self.deconv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels]
