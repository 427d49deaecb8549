"""A ResNet basic block that halves the resolution: a strided 3x3 path and a 1x1 strided
shortcut with its batch norm, added, then ReLU."""

import torch
import torch.nn as nn

batch_size = 4


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride=2, bias=False), nn.BatchNorm2d(cout)
        )

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


def get_inputs():
    return [torch.randn(batch_size, 64, 56, 56)]


def get_init_inputs():
    return [64, 128]
