"""A ConvNeXt block: depthwise 7x7 conv, layer norm over channels (channels last),
an inverted MLP with GELU, a learned layer scale and the residual."""

import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self, dim: int = 96) -> None:
        super().__init__()
        self.dwconv = torch.nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = torch.nn.LayerNorm(dim, eps=1e-6)
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.down = torch.nn.Linear(4 * dim, dim)
        self.gamma = torch.nn.Parameter(1e-2 * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.down(torch.nn.functional.gelu(self.up(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


def get_inputs():
    return [torch.randn(batch_size, 96, 28, 28)]


def get_init_inputs():
    return [96]
