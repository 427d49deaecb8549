"""SELU and Softsign on two inputs, then the Huber loss between them (a mean)."""

import torch
import torch.nn as nn

batch_size = 256


class Model(nn.Module):
    def forward(self, a, b):
        return nn.functional.huber_loss(nn.functional.selu(a), nn.functional.softsign(b), delta=0.5)


def get_inputs():
    return [torch.randn(batch_size, 4096), torch.randn(batch_size, 4096)]


def get_init_inputs():
    return []
