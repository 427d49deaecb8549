"""F.cross_entropy of 100-class logits against integer targets, averaged over the batch.

A log-softmax per row, a gather of each row's target, and a mean.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 256
num_classes = 100


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.cross_entropy(predictions, targets)


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
