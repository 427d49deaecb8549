"""LayerNorm over the last three dims of an NCHW tensor (channels, height and width)."""

import torch
import torch.nn as nn

batch_size = 8


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, 32, 32, 32)]


def get_init_inputs():
    return [(32, 32, 32)]
