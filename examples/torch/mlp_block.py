"""An MLP block: Linear -> GELU -> Linear, as in a transformer layer (f32, batch of 128).

mlirtune run --torch examples/torch/mlp_block.py:make
"""

import torch


class MlpBlock(torch.nn.Module):
    def __init__(self, hidden: int = 256, inner: int = 1024) -> None:
        super().__init__()
        self.up = torch.nn.Linear(hidden, inner)
        self.down = torch.nn.Linear(inner, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


def make() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return MlpBlock(), (torch.randn(128, 256),)
