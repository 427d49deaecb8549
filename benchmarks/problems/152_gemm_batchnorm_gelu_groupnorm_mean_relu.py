"""A Linear, BatchNorm1d, GELU, GroupNorm over the features, a mean over them and ReLU."""

import torch
import torch.nn as nn

batch_size = 64


class Model(nn.Module):
    def __init__(self, features=512, out=1024, groups=8):
        super().__init__()
        self.fc = nn.Linear(features, out)
        self.bn = nn.BatchNorm1d(out)
        self.gn = nn.GroupNorm(groups, out)

    def forward(self, x):
        x = nn.functional.gelu(self.bn(self.fc(x)))
        x = self.gn(x)
        return torch.relu(x.mean(dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(batch_size, 512)]


def get_init_inputs():
    return [512, 1024, 8]
