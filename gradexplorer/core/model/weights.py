"""Loading a state dict into a model without ever unpickling arbitrary objects."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from torch import nn

from gradexplorer.core.messages.errors import UserError, first_line


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Tensors from ``.safetensors``, or ``.pt``/``.pth`` read with ``weights_only=True``."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"weights file not found: {path}")
    if not path.is_file():
        raise UserError(f"{path} is not a weights file (not a regular file)")
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        from gradexplorer.core.files.safetensors_file import SafetensorsFile

        try:
            with SafetensorsFile(path) as f:  # the one safetensors reader
                return {key: f.tensor(key) for key in f.keys()}
        except UserError as exc:
            raise UserError(f"cannot read {path} as safetensors: {exc}") from None
    if suffix in (".pt", ".pth", ".bin"):
        return _read_torch_file(path)
    raise UserError(f"unsupported weights file {path.name}: use .safetensors, .pt or .pth")


def _read_torch_file(path: Path) -> dict[str, torch.Tensor]:
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise UserError(
            f"refusing to load {path}: it holds Python objects, not only tensors "
            "(loaded with weights_only=True); save model.state_dict() or use .safetensors"
        ) from None
    except Exception as exc:  # noqa: BLE001 - empty, truncated or not a torch file at all
        raise UserError(
            f"cannot read {path} as a state dict saved by torch.save: {first_line(exc)}"
        ) from None
    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise UserError(f"{path} does not hold a state dict (a mapping of names to tensors)")
    return obj


def _listing(keys: list[str], limit: int = 5) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


def load_weights(model: nn.Module, path: str | Path) -> None:
    """Load ``path`` into ``model``; say exactly which keys or shapes do not fit."""
    state = read_state_dict(path)
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    mismatched = [
        f"{k} {list(state[k].shape)} vs model {list(own[k].shape)}"
        for k in own
        if k in state and state[k].shape != own[k].shape
    ]
    problems = []
    if missing:
        problems.append(f"missing keys: {_listing(missing)}")
    if unexpected:
        problems.append(f"unexpected keys: {_listing(unexpected)}")
    if mismatched:
        problems.append(f"shape mismatch: {_listing(mismatched, 3)}")
    if problems:
        raise UserError(f"weights in {Path(path).name} do not fit the model: " + "; ".join(problems))
    model.load_state_dict(state)
