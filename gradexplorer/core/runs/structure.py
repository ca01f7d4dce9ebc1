"""What a run stores once about the model: its structure (the graph: ``graph_capture``), and the
stand-in module tree a viewer builds from it."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def model_structure(model: nn.Module, names: dict[str, str] | None = None) -> dict[str, Any]:
    """``{"model", "parameters": [{name, shape, numel, dtype}], "modules": [{path, type}]}``.

    ``names`` maps a parameter's name in ``model`` to the name to record (unwrapped names).
    """
    names = names or {}
    return {
        "model": type(model).__name__,
        "parameters": [
            {"name": names.get(n, n), "shape": list(p.shape), "numel": p.numel(),
             "dtype": str(p.dtype).removeprefix("torch."), "requires_grad": p.requires_grad}
            for n, p in model.named_parameters()
        ],
        "modules": [{"path": path, "type": type(m).__name__} for path, m in model.named_modules()],
    }


def skeleton_model(structure: dict[str, Any]) -> nn.Module:
    """A stand-in module tree with the recorded paths, class names and parameter shapes.

    Parameters live on the ``meta`` device (shapes only, no memory): enough for the views that
    list modules and parameters of a run whose model is not here.
    """
    classes: dict[str, type] = {}

    def make(type_name: str) -> nn.Module:
        cls = classes.setdefault(type_name, type(type_name, (nn.Module,), {}))
        return cls()

    modules = {m["path"]: m["type"] for m in structure.get("modules", [])}
    root = make(modules.get("", structure.get("model", "Model")))
    built = {"": root}

    def module_at(path: str) -> nn.Module:
        if path in built:
            return built[path]
        parent_path, _, name = path.rpartition(".")
        module = make(modules.get(path, "Module"))
        module_at(parent_path).add_module(name, module)
        built[path] = module
        return module

    for path in modules:
        module_at(path)
    for p in structure.get("parameters", []):
        owner, _, name = p["name"].rpartition(".")
        dtype = getattr(torch, p.get("dtype", "float32"), torch.float32)
        tensor = torch.empty(p["shape"], dtype=dtype, device="meta")
        module_at(owner).register_parameter(name, nn.Parameter(tensor, p.get("requires_grad", True)))
    return root
