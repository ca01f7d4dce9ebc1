"""``gradexplorer gui``: the desktop app (``gradexplorer`` alone opens it too)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gradexplorer.commands.common import (
    add_model_arguments,
    add_training_arguments,
    capped_steps,
    config_from_args,
    model_options,
)
from gradexplorer.commands.flag_values import whole_number
from gradexplorer.commands.hook_options import add_hook_arguments, parse_hook_option
from gradexplorer.commands.overlay_options import add_live_overlay_arguments, check_live_overlay
from gradexplorer.core.files.output_path import check_output_file
from gradexplorer.core.messages.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("gui", help="open the desktop app (the default command)")
    add_model_arguments(parser)
    add_training_arguments(parser)
    parser.set_defaults(model=None)  # None: the model opened last, else the default example
    parser.add_argument("--steps", type=whole_number(0), default=0, metavar="N",
                        help="run N steps after opening (with --screenshot: then save and exit)")
    parser.add_argument("--screenshot", type=Path, metavar="FILE.png",
                        help="save a picture of the window after the steps, then exit")
    add_overwrite_argument(parser)
    parser.add_argument("--trace-grads", action="store_true",
                        help="open with the graph's 'Trace gradients' on: every op tinted by its "
                        "gradient, the NaN/Inf origin marked and centred")
    parser.add_argument("--window-size", metavar="WxH", type=window_size,
                        help="open the window at this size in pixels, e.g. 1024x700 (screenshots)")
    parser.add_argument("--theme", choices=("system", "light", "dark"),
                        help="colours: follow the system (the default), light or dark")
    add_hook_arguments(parser)
    parser.add_argument("--select", metavar="NAME",
                        help="parameter or module to select at start, e.g. conv1.weight")
    add_live_overlay_arguments(parser)
    parser.set_defaults(func=gui_command)


def window_size(text: str) -> tuple[int, int]:
    """``WxH`` → (W, H), each from 320 to 10000 pixels."""
    width, sep, height = text.lower().partition("x")
    if not sep or not width.strip().isdigit() or not height.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected WxH such as 1024x700, got {text!r}")
    size = int(width), int(height)
    if not all(320 <= v <= 10_000 for v in size):
        raise argparse.ArgumentTypeError(f"{text}: width and height must be 320 to 10000 pixels")
    return size


def display_problem() -> str | None:
    """Why no window can open here (Linux/BSD without X11 or Wayland), or None."""
    env = os.environ
    if env.get("QT_QPA_PLATFORM") or not sys.platform.startswith(("linux", "freebsd", "openbsd")):
        return None
    if env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    return "no display to open a window on (DISPLAY and WAYLAND_DISPLAY are unset)"


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    """``--overwrite``: let ``--screenshot`` replace an existing file."""
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the --screenshot file if it exists (default: refuse)")


def prepare_window(screenshot: Path | None, overwrite: bool = False) -> None:
    """Check that a window can open (or, for a screenshot, render offscreen) and the file:
    a .png/.jpg, not inside a run or snapshot, not replacing a file unless ``overwrite``."""
    if screenshot is not None and screenshot.suffix.lower() not in (".png", ".jpg", ".jpeg"):
        raise UserError(f"--screenshot {screenshot}: use a .png or .jpg file name")
    if screenshot is not None:
        check_output_file(screenshot, overwrite=overwrite, make_folders=True)
    problem = display_problem()
    if problem and screenshot is None:
        raise UserError(f"{problem}: run it on a desktop or under `xvfb-run -a gradexplorer`, "
                        "or train headless with `gradexplorer run`")
    if problem:  # a screenshot needs no screen: render offscreen
        os.environ["QT_QPA_PLATFORM"] = "offscreen"


def gui_command(args: argparse.Namespace) -> int:
    args.steps = capped_steps(args.steps)
    check_live_overlay(args)
    prepare_window(args.screenshot, args.overwrite)
    options = model_options(args)
    hooks = [parse_hook_option(text) for text in args.hook]
    config = config_from_args(args)
    return app_module().launch(
        args.model, options, config, steps=args.steps, screenshot=args.screenshot, hooks=hooks,
        select=args.select, trace_grads=args.trace_grads, theme=args.theme,
        window_size=args.window_size, overlay=(args.overlay, args.x_axis))


def app_module():
    """``gradexplorer.gui.app`` (Qt is imported only when the app starts), imported once
    PySide6's per-import check reads bytes instead of tokenizing sources (``pyside_scan``)."""
    from gradexplorer.gui.pyside_scan import scan_imports_cheaply

    scan_imports_cheaply()
    from gradexplorer.gui import app

    return app
