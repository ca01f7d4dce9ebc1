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
    list modules and parameters of a run whose model is not here. Built in one pass (a run of
    5,000 parameters opens in the app: ``add_module``'s attribute check raises and catches an
    AttributeError per name); a name ``add_module`` would refuse goes through it, for its error.
    """
    classes: dict[str, tuple[type, dict]] = {}  # a class per name, with what __init__ sets

    def make(type_name: str) -> nn.Module:  # as cls() makes it: its own fresh hook dicts
        if type_name not in classes:
            cls = type(type_name, (nn.Module,), {})
            classes[type_name] = cls, vars(cls())
        cls, attrs = classes[type_name]
        module = cls.__new__(cls)
        vars(module).update({k: v.copy() if isinstance(v, (dict, set)) else v for k, v in attrs.items()})
        return module

    def free(module: nn.Module, name: str) -> bool:  # what add_module/register_parameter check
        return (isinstance(name, str) and name and "." not in name and name not in module.__dict__
                and name not in module._modules and name not in module._parameters
                and name not in module._buffers and not hasattr(type(module), name))

    modules = {m["path"]: m["type"] for m in structure.get("modules", [])}
    root = make(modules.get("", structure.get("model", "Model")))
    built = {"": root}

    def module_at(path: str) -> nn.Module:
        if path in built:
            return built[path]
        parent_path, _, name = path.rpartition(".")
        module = make(modules.get(path, "Module"))
        parent = module_at(parent_path)
        if free(parent, name):
            parent._modules[name] = module
        else:
            parent.add_module(name, module)
        built[path] = module
        return module

    for path in modules:
        module_at(path)
    empty: dict[tuple, torch.Tensor] = {}  # one meta tensor per shape and dtype: no memory anyway
    for p in structure.get("parameters", []):
        owner, _, name = p["name"].rpartition(".")
        dtype = getattr(torch, p.get("dtype", "float32"), torch.float32)
        key = (tuple(p["shape"]), dtype)
        tensor = empty.get(key)
        if tensor is None:
            tensor = empty[key] = torch.empty(p["shape"], dtype=dtype, device="meta")
        param, module = nn.Parameter(tensor, p.get("requires_grad", True)), module_at(owner)
        if free(module, name):
            module._parameters[name] = param
        else:
            module.register_parameter(name, param)
    return root
