"""The hooks tutorial's MLP exactly as written: x.view(-1) breaks on a 10×10 batch."""

import torch


class MyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 10)
        self.fc2 = torch.nn.Linear(10, 10)

    def forward(self, x):
        x = x.view(-1)
        x = self.fc1(x)
        x = torch.relu(x)
        x = self.fc2(x)
        return x


def build():
    return MyModel()
