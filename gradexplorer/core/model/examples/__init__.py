"""Built-in example workloads, addressed as ``example:NAME[:key=value,...]``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.examples import deep, dense, digits, lenet, mlp, resnet, transformer
from gradexplorer.core.model.examples.options import parse_options
from gradexplorer.core.model.options import DEFAULT_EXAMPLE
from gradexplorer.core.model.workload import Workload

__all__ = ["DEFAULT_EXAMPLE", "EXAMPLES", "Example", "build_example"]


@dataclass(frozen=True)
class Example:
    """A named built-in workload factory."""

    name: str
    summary: str
    factory: Callable[[dict[str, str], int], Workload]


EXAMPLES: dict[str, Example] = {
    e.name: e
    for e in (
        Example("digits", "CNN learning the bundled 8×8 handwritten digits (default)", digits.build),
        Example("lenet", "the gradient-vector tutorial's LeNet, 61,706 parameters", lenet.build),
        Example("mlp", "the hooks tutorial's two-layer MLP, done right", mlp.build),
        Example("resnet", "small residual CNN with BatchNorm", resnet.build),
        Example("resnet18", "ResNet-18 sized residual CNN (11.7M parameters)", resnet.build_resnet18),
        Example("transformer", "small transformer encoder reversing sequences", transformer.build),
        Example("deep", "deep residual MLP: blocks=N makes graphs of any size", deep.build),
        Example("dense", "DenseNet-121-shaped CNN (depth=169|201): the densest skip connections",
                dense.build),
    )
}


def build_example(text: str, seed: int = 0) -> Workload:
    """Build ``NAME[:options]`` with model initialisation seeded by ``seed``."""
    name, _, option_text = text.partition(":")
    example = EXAMPLES.get(name.strip())
    if example is None:
        known = ", ".join(EXAMPLES)
        raise UserError(f"unknown example {name.strip()!r}; built-in examples are: {known}")
    options = parse_options(option_text)
    torch.manual_seed(seed)
    workload = example.factory(options, seed)
    workload.name = "example:" + text
    return workload
