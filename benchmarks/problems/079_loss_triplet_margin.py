"""nn.TripletMarginLoss: the hinge of anchor-positive and anchor-negative distances.

Two row-wise p-norms of differences, a clamp and a mean.
"""

import torch
import torch.nn as nn

batch_size = 128


class Model(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.loss_fn = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor, positive, negative):
        return self.loss_fn(anchor, positive, negative)


def get_inputs():
    return [
        torch.randn(batch_size, 1024),
        torch.randn(batch_size, 1024),
        torch.randn(batch_size, 1024),
    ]


def get_init_inputs():
    return [1.0]
