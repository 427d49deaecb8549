"""A DenseNet block: each layer (BN, ReLU, conv) sees the concatenation of all before it."""

import torch
from torch import nn

batch_size = 2


class Model(nn.Module):
    def __init__(self, channels: int = 32, growth: int = 16, layers: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(
                nn.BatchNorm2d(channels + i * growth),
                nn.ReLU(),
                nn.Conv2d(channels + i * growth, growth, 3, padding=1, bias=False),
            )
            for i in range(layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return torch.cat(features, 1)


def get_inputs():
    return [torch.randn(batch_size, 32, 32, 32)]


def get_init_inputs():
    return []
