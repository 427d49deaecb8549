"""Two Linear layers with a sigmoid between, a sum over features, then logsumexp over the
batch: the output is one number."""

import torch
import torch.nn as nn

batch_size = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(512, 1024)
        self.fc2 = nn.Linear(1024, 256)

    def forward(self, x):
        x = torch.sigmoid(self.fc1(x))
        x = torch.sum(self.fc2(x), dim=1)
        return torch.logsumexp(x, dim=0)


def get_inputs():
    return [torch.randn(batch_size, 512)]


def get_init_inputs():
    return []
