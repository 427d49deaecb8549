"""A ResNet basic block: 3x3 conv, batchnorm, ReLU, 3x3 conv, batchnorm, residual add, ReLU
(56x56, 64 channels, f32; batchnorm in inference mode, folded by the export).

    mlirtune run --torch examples/torch/resnet_block.py:make
"""

import torch


class BasicBlock(torch.nn.Module):
    def __init__(self, channels: int = 64) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


def make() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    block = BasicBlock().eval()
    for bn in (block.bn1, block.bn2):  # non-trivial running statistics
        bn.running_mean.uniform_(-0.1, 0.1)
        bn.running_var.uniform_(0.5, 1.5)
    return block, (torch.randn(1, 64, 56, 56),)
