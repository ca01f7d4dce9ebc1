"""Test set-up: Qt runs offscreen (no display needed), torch uses few threads."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture
def run_cli(capsys):
    """Run the gradexplorer CLI in-process: returns (exit code, stdout, stderr)."""
    from gradexplorer.cli import main

    def _run(*argv: str):
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run
