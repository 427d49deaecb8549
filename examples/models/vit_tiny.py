"""timm's ViT-Tiny (patch 16), built without weights, on a batch of 224 x 224 images."""

import timm
import torch

batch_size = 1
image_size = 224


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=image_size)

    def forward(self, images):
        return self.net(images)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return []
