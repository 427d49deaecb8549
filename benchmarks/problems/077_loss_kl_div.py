"""F.kl_div of log-probabilities against probabilities, reduction batchmean.

Logs, products and a full reduction divided by the batch.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs():
    return [
        torch.randn(batch_size, 4096).softmax(dim=-1),
        torch.randn(batch_size, 4096).softmax(dim=-1),
    ]


def get_init_inputs():
    return []
