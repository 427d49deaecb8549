"""torchvision's ResNet-18, built without weights, on a batch of 224 x 224 images."""

import torch
from torchvision.models import resnet18

batch_size = 1
image_size = 224


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = resnet18()

    def forward(self, images):
        return self.net(images)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return []
