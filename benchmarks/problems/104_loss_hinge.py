"""A hinge loss over labels of +-1: mean(clamp(1 - prediction * label, min=0))."""

import torch

batch_size = 128


class Model(torch.nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


def get_inputs():
    return [torch.randn(batch_size, 512), torch.randint(0, 2, (batch_size, 512)).float() * 2 - 1]


def get_init_inputs():
    return []
