"""In the app: Block on a Llama's `model.layers.1.self_attn` (which transformers calls with
keyword arguments) zeroes exactly the gradient that flows through that attention's inputs —
every parameter's gradient of the app's step equal to a hand-written reference."""

from __future__ import annotations

import importlib.util
import sys

import torch

from tests.gui_helpers import TIMEOUT_MS, open_model, wait_idle

SPEC_FILE = '''
import torch
import gradexplorer
from transformers import LlamaConfig, LlamaForCausalLM


def build():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32))

    def make_batch(step):
        ids = torch.randint(3, 64, (2, 8), generator=torch.Generator().manual_seed(step))
        return {"input_ids": ids, "labels": ids}

    return gradexplorer.session.Workload(model=model, make_batch=make_batch, loss_fn=None)
'''
ATTENTION = "model.layers.1.self_attn"


def reference_grads(path, step: int, block: bool) -> dict[str, torch.Tensor]:
    """The same model and batch, with the attention's inputs detached by hand (or not)."""
    spec = importlib.util.spec_from_file_location("tiny_llama_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        workload = module.build()
    finally:
        sys.modules.pop(spec.name, None)
    model = workload.model.train()

    def detach_inputs(_module, args, kwargs):
        cut = lambda v: v.detach() if isinstance(v, torch.Tensor) else v  # noqa: E731
        return tuple(cut(a) for a in args), {k: cut(v) for k, v in kwargs.items()}

    handle = model.get_submodule(ATTENTION).register_forward_pre_hook(detach_inputs, with_kwargs=True) \
        if block else None
    model(**workload.make_batch(step)).loss.backward()
    if handle is not None:
        handle.remove()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_block_on_a_keyword_called_attention_in_the_app(qtbot, make_window, tmp_path):
    path = tmp_path / "tiny_llama.py"
    path.write_text(SPEC_FILE)
    window = make_window()
    open_model(qtbot, window, f"{path}:build")
    controller = window.controller
    with qtbot.waitSignal(controller.session.hooks_changed, timeout=TIMEOUT_MS):
        controller.attach_hook(ATTENTION, "block")  # what the graph's right-click → Block does
    step = controller.session.live.session.step_count
    controller.step()
    qtbot.waitUntil(lambda: controller.session.live.session.step_count == step + 1 and not controller.busy,
                    timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    got = {n: p.grad.clone() for n, p in controller.session.live.session.model.named_parameters()
           if p.grad is not None}
    blocked, free = reference_grads(path, step, True), reference_grads(path, step, False)
    assert set(got) == set(blocked)
    upstream = [n for n in blocked if not torch.equal(blocked[n], free[n])]
    assert "model.layers.0.self_attn.q_proj.weight" in upstream  # the block reaches below it
    for name in blocked:
        torch.testing.assert_close(got[name], blocked[name], rtol=1e-6, atol=1e-9, msg=name)
    hook_nodes = [d for _, d in window.graph_panel.graph.nodes(data=True)
                  if d.get("kind") == "hook" and d.get("module") == ATTENTION]
    assert len(hook_nodes) == 2, "the graph shows the hook's two nodes on the attention"
