"""A Linear layer, GroupNorm over its features, Swish, a learnt per-feature scale and Swish
again."""

import torch
import torch.nn as nn

batch_size = 128


class Model(nn.Module):
    def __init__(self, in_features, out_features, groups):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(groups, out_features)
        self.scale = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        x = self.norm(self.linear(x))
        x = x * torch.sigmoid(x) * self.scale
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(batch_size, 512)]


def get_init_inputs():
    return [512, 1024, 16]
