"""Nearest and bilinear upsampling, and a sub-pixel (PixelShuffle) conv, summed."""

import torch
from torch import nn

batch_size = 2


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.subpixel = nn.Conv2d(16, 16 * 4, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nearest = nn.functional.interpolate(x, scale_factor=2, mode="nearest")
        bilinear = nn.functional.interpolate(
            x, scale_factor=2, mode="bilinear", align_corners=False
        )
        return nearest + bilinear + self.shuffle(self.subpixel(x))


def get_inputs():
    return [torch.randn(batch_size, 16, 24, 24)]


def get_init_inputs():
    return []
