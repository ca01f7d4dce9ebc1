"""The hook actions by name, with a line of help each (no torch: the command line's help
text needs them before torch is imported)."""

ACTIONS = ("observe", "scale", "block", "clip", "noise", "once", "file")

ACTION_HELP = {
    "observe": "observe[:capture] — record grad_input/grad_output statistics (capture: keep them)",
    "scale": "scale:K — multiply the module's input gradients by K",
    "block": "block — stop gradient flow through the module's inputs",
    "clip": "clip:NORM — clip the total norm of the input gradients to NORM",
    "noise": "noise:STD[:SEED] — add seeded Gaussian noise of std STD to the input gradients",
    "once": "once:ACTION — apply ACTION on the first backward only, then detach",
    "file": "file:PATH.py:FUNCTION — your own hook(module, grad_input, grad_output)",
}
