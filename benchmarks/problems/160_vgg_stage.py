"""A VGG stage: two 3x3 convolutions with ReLU, then a 2x2 max pool."""

import torch
import torch.nn as nn

batch_size = 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage = nn.Sequential(
            nn.Conv2d(64, 128, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(128, 128, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2, 2),
        )

    def forward(self, x):
        return self.stage(x)


def get_inputs():
    return [torch.randn(batch_size, 64, 56, 56)]


def get_init_inputs():
    return []
