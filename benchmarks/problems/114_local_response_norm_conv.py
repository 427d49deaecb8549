"""An AlexNet-style first stage: an 11x11 stride-4 conv, ReLU, local response norm, max pool."""

import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 64, 11, stride=4, padding=2)
        self.norm = torch.nn.LocalResponseNorm(5)
        self.pool = torch.nn.MaxPool2d(3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.norm(torch.relu(self.conv(x))))


def get_inputs():
    return [torch.randn(batch_size, 3, 224, 224)]


def get_init_inputs():
    return []
