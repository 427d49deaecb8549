"""A depthwise-separable convolution: a 3x3 depthwise, BatchNorm, ReLU6, then a 1x1
pointwise, BatchNorm, ReLU6 (MobileNet-V1's block)."""

import torch
import torch.nn as nn

batch_size = 8


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.depthwise = nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pointwise = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = nn.functional.relu6(self.bn1(self.depthwise(x)))
        return nn.functional.relu6(self.bn2(self.pointwise(x)))


def get_inputs():
    return [torch.randn(batch_size, 64, 56, 56)]


def get_init_inputs():
    return [64, 128]
