"""The NaN origin on every architecture of the model zoo (tests/zoo_models.py): NaN or Inf made
at the output of the module the zoo marks mid-network names that module — through attention
masks, relative position buckets, dropout, rotary embeddings, mixture-of-experts routing,
BatchNorm statistics the step writes NaN into, depthwise convolutions and SE blocks."""

from __future__ import annotations

import pytest
from zoo_models import ZOO

import gradexplorer as gx


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
@pytest.mark.parametrize("zoo", ZOO, ids=[m.name for m in ZOO])
def test_a_non_finite_value_made_mid_network_names_its_module(zoo, value):
    workload = zoo.build()
    workload.model.get_submodule(zoo.middle).register_forward_hook(
        lambda module, args, output: output * value)
    session = gx.TrainingSession(workload, gx.session.SessionConfig(device="cpu"))
    gx.session.SessionStack.on(session, gx.session.GradientMonitor())
    found = session.step().nonfinite_origin
    assert (found["where"], found["op"], found["module"]) == ("forward", "mul", zoo.middle)
