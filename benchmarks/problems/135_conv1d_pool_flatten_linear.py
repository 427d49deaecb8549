"""A small 1-D CNN: Conv1d, ReLU, max pool, again, then flatten and a Linear layer."""

import torch
import torch.nn as nn

batch_size = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(4, 32, 7, padding=3),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(32, 64, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool1d(2),
        )
        self.head = nn.Linear(64 * 256, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def get_inputs():
    return [torch.randn(batch_size, 4, 1024)]


def get_init_inputs():
    return []
