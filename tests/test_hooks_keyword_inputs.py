"""Hook actions act on every tensor a module receives: positional, by keyword, nested in a tuple.

``Pair.mix`` is called as ``mix(a, (b, c), gate=g)`` with leaf tensors, so each leaf's ``.grad``
is exactly the gradient the hook hands on for it: ``grad_input`` is ``(a, None)`` for the two
positional slots (as a full backward hook has them), then ``b, c`` (nested) and ``g`` (keyword).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gradexplorer import trace
from gradexplorer.core.hooks.hookable import NO_GRAD_INPUTS
from gradexplorer.core.messages.errors import UserError
from gradexplorer.hooks import HookRegistry, hookable_modules

NAMES = ("a", "b", "c", "g")


class Mix(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, pair, *, gate=None, offset=0.0):
        return torch.tanh(self.lin(x)) * pair[0] + pair[1] * gate + offset


class Pair(nn.Module):
    """Calls ``mix`` with a positional tensor, a nested tuple and a keyword tensor; ``twice``
    calls it a second time on the same inputs."""

    def __init__(self, twice: bool = False) -> None:
        super().__init__()
        self.mix = Mix()
        self.twice = twice

    def forward(self, a, b, c, g):
        out = self.mix(a, (b, c), gate=g, offset=1.0)
        if self.twice:
            out = out + self.mix(a, (b, c), gate=g)
        return out


def leaves(seed: int = 1) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {n: torch.randn(4, 3, generator=gen).requires_grad_() for n in NAMES}


def grads_with(action=None, twice: bool = False):
    """Leaf and parameter gradients of one backward pass with ``action`` on ``mix``."""
    torch.manual_seed(0)
    model = Pair(twice)
    inputs = leaves()
    registry = HookRegistry(model, sample_inputs=tuple(inputs.values()))
    hook = registry.attach("mix", action) if action is not None else None
    (model(*inputs.values()) ** 2).sum().backward()
    grads = {n: t.grad for n, t in inputs.items()}
    grads.update({n: p.grad for n, p in model.named_parameters()})
    return grads, hook, registry


@pytest.fixture(scope="module")
def plain():
    return grads_with()[0]


def test_block_stops_every_input_gradient(plain):
    grads, hook, _ = grads_with("block")
    assert all(grads[n] is None for n in NAMES)  # the keyword and nested ones too
    for name in ("mix.lin.weight", "mix.lin.bias"):  # inside the module: untouched
        assert torch.equal(grads[name], plain[name])
    assert hook.calls == 1


def test_scale_scales_every_input_gradient_exactly(plain):
    grads, _, _ = grads_with("scale:0.5")
    for name in NAMES:
        assert torch.equal(grads[name], plain[name] * 0.5), name
    assert torch.equal(grads["mix.lin.weight"], plain["mix.lin.weight"])


def test_clip_bounds_the_joint_norm_of_all_inputs(plain):
    joint = torch.sqrt(sum((plain[n].double() ** 2).sum() for n in NAMES))
    limit = float(joint) / 4
    grads, hook, _ = grads_with(f"clip:{limit}")
    factor = limit / (float(joint) + 1e-6)
    for name in NAMES:  # one factor for all of them: the action saw them together
        torch.testing.assert_close(grads[name].double(), plain[name].double() * factor,
                                   rtol=1e-6, atol=0)
    assert hook.last_stats["norm_before"] == pytest.approx(float(joint), rel=1e-6)


def test_noise_is_drawn_for_every_input_in_grad_input_order(plain):
    grads, _, _ = grads_with("noise:0.1:7")
    gen = torch.Generator().manual_seed(7)
    for name in NAMES:  # a, (the tuple's slot: None), b, c, g
        expected = plain[name] + 0.1 * torch.randn(plain[name].shape, generator=gen)
        assert torch.equal(grads[name], expected), name


def test_grad_input_has_the_positional_slots_then_the_nested_and_keyword_tensors(plain):
    seen = []

    def zero_the_gate(module, grad_input, grad_output):
        seen.append(grad_input)
        return (*grad_input[:4], torch.zeros_like(grad_input[4]))

    grads, _, _ = grads_with(zero_the_gate)
    (grad_input,) = seen
    assert grad_input[1] is None  # the tuple itself, as a full backward hook has it
    for entry, name in zip((0, 2, 3, 4), NAMES, strict=True):
        assert torch.equal(grad_input[entry], plain[name]), name
    assert torch.equal(grads["g"], torch.zeros(4, 3))
    assert all(torch.equal(grads[n], plain[n]) for n in "abc")


def test_observe_sees_every_entry_and_each_call_counts():
    _, hook, _ = grads_with("observe", twice=True)
    assert hook.calls == 2
    entries = hook.last_stats["grad_input"]
    assert len(entries) == 5 and entries[1] is None and all(e is not None for e in entries[2:])


def test_positional_calls_see_what_a_full_backward_hook_sees():
    """Same grad_input and grad_output as PyTorch's own hook, None for a non-tensor argument."""

    class Scaled(nn.Module):
        def forward(self, x, factor, y):
            return x * factor + y.sin()

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin, self.scaled = nn.Linear(3, 3), Scaled()

        def forward(self, x):
            h = self.lin(x)
            return self.scaled(h, 2.0, h.cos()).sum()

    x = torch.randn(5, 3)
    model = Net()
    theirs, ours = [], []
    handle = model.scaled.register_full_backward_hook(lambda m, gi, go: theirs.append((gi, go)))
    model(x).backward()
    handle.remove()
    registry = HookRegistry(model, sample_inputs=(x,))
    registry.attach("scaled", lambda m, gi, go: ours.append((gi, go)))
    model(x).backward()
    (their_in, their_out), (our_in, our_out) = theirs[0], ours[0]
    assert len(our_in) == len(their_in) == 3 and our_in[1] is None
    assert all(torch.equal(o, t) for o, t in zip(our_in[::2] + our_out, their_in[::2] + their_out,
                                                 strict=True))


class Keyworded(nn.Module):
    """An embedding and a head, both called by keyword."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(10, 4), nn.Linear(4, 2)

    def forward(self, ids):
        return self.head(input=self.embed(input=ids)).sum()


def test_the_advice_tells_keyword_inputs_that_need_a_gradient_from_those_that_do_not():
    ids = torch.tensor([1, 2, 3])
    rows = {r.path: r for r in hookable_modules(Keyworded(), (ids,))}
    assert rows["head"].safe and rows["head"].reason == ""  # its keyword input needs a gradient
    assert rows["embed"].reason.endswith(NO_GRAD_INPUTS)  # token ids: truly no gradient

    model = Keyworded()
    registry = HookRegistry(model, sample_inputs=(ids,))
    with pytest.raises(UserError, match="need no gradient"):
        registry.attach("embed", "block")
    registry.attach("head", "block")
    model(ids).backward()
    assert model.embed.weight.grad is None and model.head.weight.grad is not None


def test_the_graph_shows_both_hook_nodes_of_a_module_called_by_keyword():
    model, ids = Keyworded(), torch.tensor([1, 2, 3])
    registry = HookRegistry(model, sample_inputs=(ids,))
    registry.attach("head", "scale:0.5")
    graph = trace(model, (ids,))
    hooks = [n for n, a in graph.nodes(data=True) if a["kind"] == "hook"]
    assert [graph.nodes[n]["module"] for n in hooks] == ["head", "head"]  # output and input
    assert {graph.nodes[n]["name"] for n in hooks} == {"BackwardHookFunctionBackward"}
    below = {graph.nodes[s]["module"] for n in hooks for s in graph.successors(n)}
    assert "embed" in below  # the input hook node hands the gradient on to the embedding
    registry.detach_all()
    graph = trace(model, (ids,))
    assert all(a["kind"] != "hook" for _, a in graph.nodes(data=True))
