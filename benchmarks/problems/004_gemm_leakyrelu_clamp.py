"""Linear, LeakyReLU with slope 0.1 and a clamp to [-1, 1].

Two piecewise-linear epilogues in a row: a select on the sign, then a min and a max.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_features = 768
out_features = 1024
negative_slope = 0.1
clamp_min = -1.0
clamp_max = 1.0


class Model(nn.Module):
    def __init__(self, in_features, out_features, negative_slope, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.negative_slope = negative_slope
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = F.leaky_relu(self.linear(x), self.negative_slope)
        return torch.clamp(y, self.clamp_min, self.clamp_max)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, negative_slope, clamp_min, clamp_max]
