"""A conv over a reflection-padded image, then a PReLU with a learned slope per channel."""

import torch

batch_size = 4


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 32, 3, padding=1, padding_mode="reflect")
        self.act = torch.nn.PReLU(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, 16, 64, 64)]


def get_init_inputs():
    return []
