"""A decoder step: bilinear upsampling by two, a 3x3 conv and a sigmoid."""

import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(32, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = torch.nn.functional.interpolate(
            x, scale_factor=2, mode="bilinear", align_corners=False
        )
        return torch.sigmoid(self.conv(up))


def get_inputs():
    return [torch.randn(batch_size, 32, 32, 32)]


def get_init_inputs():
    return []
