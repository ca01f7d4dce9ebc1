"""Where an export writes: a file that appears whole or not at all; the one line when an
optional package is missing."""

from __future__ import annotations

import contextlib
import importlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from gradexplorer.core.files.atomic_file import check_replaceable, check_writable_file, current_umask
from gradexplorer.core.messages.errors import UserError

# the optional extra (pyproject) that installs each package an export needs
EXTRAS = {"tensorboard": "tensorboard", "pyarrow": "parquet", "wandb": "wandb"}


def optional_import(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or say in one line which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        extra = EXTRAS.get(top, top)
        raise UserError(f"{purpose} needs the {top} package: pip install 'gradexplorer[{extra}]'"
                        ) from None


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed onto ``path`` when the block ends
    without an error, removed otherwise (a reader never sees half a file)."""
    path = check_writable_file(path, make_folders=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        check_replaceable(path)  # (nothing put a device or folder there meanwhile)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
