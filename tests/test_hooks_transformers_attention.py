"""Hooks on transformers' attention, which ``LlamaDecoderLayer`` calls by keyword
(``self_attn(hidden_states=..., ...)``): ``block`` and ``scale`` act on the attention's input
gradient, through the session API, ``gradexplorer run --hook`` and ``watch(hooks=...)``.

The references change the same gradient by hand: a forward pre-hook on the attention hands it
``hidden_states.detach()`` (block) or ``hidden_states`` behind a tensor hook that halves its
gradient (scale:0.5). Every parameter's gradient must equal the reference's, bit for bit.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from gradexplorer import read_snapshot, watch
from gradexplorer.core.hooks.hookable import NO_GRAD_INPUTS
from gradexplorer.core.model.workload import Workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.hooks import HookRegistry, hookable_modules
from tests.hooks_helpers import GradRecorder

transformers = pytest.importorskip("transformers")

ATTENTION = "model.layers.1.self_attn"
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
            vocab_size=64, intermediate_size=64, max_position_embeddings=64)
SPEC = """\
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from gradexplorer.session import Workload

def build():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**{tiny!r}))
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    return Workload(model, lambda step: {{"input_ids": ids, "labels": ids}}, None, name="tiny")
"""


def tiny(arch: str = "Llama"):
    """A seeded tiny ``<arch>ForCausalLM`` and its keyword inputs."""
    torch.manual_seed(0)
    config = getattr(transformers, f"{arch}Config")(**TINY)
    model = getattr(transformers, f"{arch}ForCausalLM")(config)
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    return model, {"input_ids": ids, "labels": ids}


def detached(module, args, kwargs):
    return args, {**kwargs, "hidden_states": kwargs["hidden_states"].detach()}


def halved(module, args, kwargs):
    hidden = kwargs["hidden_states"].view_as(kwargs["hidden_states"])
    hidden.register_hook(lambda grad: grad * 0.5)
    return args, {**kwargs, "hidden_states": hidden}


REFERENCES = {"block": detached, "scale:0.5": halved}


def param_grads(model) -> dict:
    return {n: None if p.grad is None else p.grad.detach().clone()
            for n, p in model.named_parameters()}


def reference(change) -> dict:
    """Parameter gradients of one step with ``change`` as a forward pre-hook on the attention
    (None: no change), called as transformers' docs do."""
    model, inputs = tiny()
    handle = change and model.get_submodule(ATTENTION).register_forward_pre_hook(
        change, with_kwargs=True)
    model(**inputs).loss.backward()
    if handle:
        handle.remove()
    return param_grads(model)


@pytest.fixture(scope="module")
def expected():
    return {None: reference(None), **{a: reference(f) for a, f in REFERENCES.items()}}


def assert_same_grads(grads: dict, want: dict, plain: dict) -> None:
    assert grads.keys() == want.keys()
    for name, grad in grads.items():
        assert (grad is None) == (want[name] is None), name
        assert grad is None or torch.equal(grad, want[name]), name
    changed = {n for n, g in want.items() if g is None or not torch.equal(g, plain[n])}
    # what lies upstream of the attention's input changes (the norm before it feeds only the
    # attention: no gradient at all under block); the rest of layer 1 does not
    assert "model.layers.1.input_layernorm.weight" in changed
    assert "model.layers.0.self_attn.q_proj.weight" in changed
    assert not any(n.startswith(f"{ATTENTION}.") or ".1.mlp." in n for n in changed)


@pytest.mark.parametrize("action", list(REFERENCES))
def test_session_api(action, expected):
    model, inputs = tiny()
    session = TrainingSession(Workload(model, lambda step: inputs, None), SessionConfig(device="cpu"))
    registry = HookRegistry(model)
    registry.install(session)
    registry.attach(ATTENTION, action)
    recorder = GradRecorder()
    session.add_observer(recorder)
    results = list(session.run(2))
    assert_same_grads(recorder.grads[0], expected[action], expected[None])
    assert [r.hooks for r in results] == [[{"module": ATTENTION, "action": action, "calls": n}]
                                         for n in (1, 2)]
    assert not any("need no gradient" in e for e in registry.events)


@pytest.mark.parametrize("action", list(REFERENCES))
def test_run_with_hook(action, expected, run_cli, tmp_path):
    spec = tmp_path / "tiny_llama.py"
    spec.write_text(SPEC.format(tiny=TINY))
    code, out, err = run_cli("run", "--model", f"{spec}:build", "--steps", "1",
                             "--hook", f"{ATTENTION}={action}", "--export", tmp_path / "run")
    assert code == 0, err
    assert f"hook {action} on '{ATTENTION}' attached" in out and "need no gradient" not in out
    snapshot = read_snapshot(tmp_path / "run" / "step-000001")
    assert snapshot.manifest["hooks"] == [{"module": ATTENTION, "action": action, "calls": 1}]
    stored = snapshot.gradients()  # a parameter without gradient has no entry
    assert stored.keys() <= expected[action].keys()
    assert_same_grads({n: stored.get(n) for n in expected[action]}, expected[action],
                      expected[None])


@pytest.mark.parametrize("action", list(REFERENCES))
def test_watch_with_hooks(action, expected, tmp_path):
    model, inputs = tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, optimizer, tmp_path / "run", hooks={ATTENTION: action}):
        model(**inputs).loss.backward()
        grads = param_grads(model)
        optimizer.step()
    assert_same_grads(grads, expected[action], expected[None])


@pytest.mark.parametrize("arch", ["Llama", "Mistral", "Qwen2"])
def test_the_advice_is_true_for_attention_called_by_keyword(arch):
    model, inputs = tiny(arch)
    rows = {r.path: r for r in hookable_modules(model, inputs)}
    for layer in range(2):
        attention = rows[f"model.layers.{layer}.self_attn"]
        assert attention.safe and attention.reason == "", attention.reason
    assert rows["model.embed_tokens"].reason.endswith(NO_GRAD_INPUTS)  # token ids: true


def test_hooks_command_lists_attention_as_safe(run_cli, tmp_path):
    spec = tmp_path / "tiny_llama.py"
    spec.write_text(textwrap.dedent(SPEC.format(tiny=TINY)))
    code, out, err = run_cli("hooks", "--model", f"{spec}:build")
    assert code == 0, err
    rows = {line.split()[0]: line.split()[2:4] for line in out.splitlines()[2:] if line.strip()}
    assert rows[ATTENTION][1] == "safe" and rows["model.embed_tokens"][1] == "observe"
