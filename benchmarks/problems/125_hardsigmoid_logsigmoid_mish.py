"""Activations of a mobile network and a loss: hard sigmoid, log-sigmoid, Mish and
softshrink, chained."""

import torch

batch_size = 64


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.hardsigmoid(x) + torch.nn.functional.logsigmoid(x)
        return torch.nn.functional.softshrink(torch.nn.functional.mish(y), 0.25)


def get_inputs():
    return [torch.randn(batch_size, 8192)]


def get_init_inputs():
    return []
