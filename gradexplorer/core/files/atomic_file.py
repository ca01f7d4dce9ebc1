"""Writing a file so that readers see the old content or the new, never a half-written one."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from gradexplorer.core.messages.errors import UserError


def current_umask() -> int:
    """The process umask (read by setting it and putting it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_writable_file(path: str | os.PathLike, *, make_folders: bool = False) -> Path:
    """``path`` as a Path if a file can be written there; else a one-line UserError.

    Checked before long work so that a bad ``--out`` fails at once, not after it. With
    ``make_folders`` missing folders are fine as long as they can be created.
    """
    path = Path(path)
    check_replaceable(path)
    parent = path.parent
    existing = next((f for f in (parent, *parent.parents) if f.exists()), Path("."))
    if not existing.is_dir():
        raise UserError(f"cannot write {str(path)!r}: {str(existing)!r} is a file, not a folder")
    if existing != parent and not make_folders:
        raise UserError(f"cannot write {str(path)!r}: folder {str(parent)!r} does not exist")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {str(path)!r}: folder {str(existing)!r} is not writable")
    return path


def check_replaceable(path: str | os.PathLike) -> bool:
    """Whether ``path`` exists; a one-line UserError when it is there but not a regular file
    (a folder, a device such as ``/dev/full``, a fifo): renaming a file onto it would replace
    it, or write into something that is not a file."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # (a folder on the way is a file: said later)
        return False
    except OSError as exc:
        raise UserError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"cannot write {str(path)!r}: it is a folder; give a file name")
    if not stat.S_ISREG(mode):
        raise UserError(f"cannot write {str(path)!r}: it is not a regular file "
                        "(a device, fifo or socket); give a file name")
    return True


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename it into place.

    The file gets the permissions a plain ``open(path, "w")`` would (0666 less the umask),
    not the 0600 of the temporary file; failures are one-line UserErrors.
    """
    path = Path(path)
    check_replaceable(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    except OSError as exc:
        raise UserError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~current_umask())
            f.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise UserError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        raise
