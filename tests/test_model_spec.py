"""Model specs: examples, user files, modules, weights; every bad input is one clear line."""

import argparse
import sys

import pytest
import torch
from safetensors.torch import save_file

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.examples.lenet import LeNet
from gradexplorer.core.model.spec import ModelOptions, load_workload, parse_shape
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.session import Workload

DATA = __import__("pathlib").Path(__file__).parent / "data"
MY_MODEL = DATA / "my_model.py"


def test_user_file_returning_a_workload_trains():
    workload = load_workload(f"{MY_MODEL}:build")
    assert isinstance(workload, Workload) and workload.name.endswith("my_model.py:build")
    session = TrainingSession(workload, SessionConfig(device="cpu", lr=0.05))
    losses = [r.loss for r in session.run(30)]
    assert losses[-1] < losses[0]


def test_user_module_needs_an_input_shape_and_then_trains():
    with pytest.raises(UserError, match="give --input-shape"):
        load_workload(f"{MY_MODEL}:build_module")
    workload = load_workload(f"{MY_MODEL}:build_module", ModelOptions(input_shape=(8, 4)))
    inputs, target = workload.make_batch(0)
    assert list(inputs.shape) == [8, 4] and list(target.shape) == [8, 1]
    assert TrainingSession(workload, SessionConfig(device="cpu")).step().loss > 0


def test_bare_module_with_other_losses_and_batch_size():
    opts = ModelOptions(input_shape=(8, 4), loss="l1", batch_size=3)
    workload = load_workload(f"{MY_MODEL}:build_module", opts)
    assert list(workload.make_batch(0)[0].shape) == [3, 4]
    with pytest.raises(UserError, match="unknown loss 'hinge'"):
        load_workload(f"{MY_MODEL}:build_module", ModelOptions(input_shape=(8, 4), loss="hinge"))


def test_package_module_callable(tmp_path, monkeypatch):
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text(MY_MODEL.read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    workload = load_workload("userpkg.models:build")
    assert workload.name == "userpkg.models:build"
    sys.modules.pop("userpkg.models", None)
    sys.modules.pop("userpkg", None)


@pytest.mark.parametrize(
    "spec, pattern",
    [
        ("missing_dir/nothing.py:build", r"model file not found: missing_dir/nothing.py"),
        (f"{MY_MODEL}:nope", r"has no callable 'nope' \(callables there: .*build_module"),
        (f"{MY_MODEL}:NOT_CALLABLE", r"NOT_CALLABLE is a int, not a callable"),
        (f"{MY_MODEL}:build_wrong", r"build_wrong\(\) returned dict; expected an nn.Module or a "),
        (f"{MY_MODEL}:build_failing", r"build_failing\(\) failed at my_model.py:\d+: ValueError: the "),
        ("no_such_package_xyz.models:build", r"module 'no_such_package_xyz.models' not found"),
        ("justaword", r"bad model spec 'justaword'"),
        (f"{MY_MODEL}", r"bad model spec"),
    ],
)
def test_bad_specs_give_one_clear_line(spec, pattern):
    with pytest.raises(UserError, match=pattern) as info:
        load_workload(spec)
    assert "\n" not in str(info.value)


def test_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\n\ndef build(:\n    pass\n")
    with pytest.raises(UserError, match=r"syntax error in .*broken.py:3"):
        load_workload(f"{bad}:build")


def test_import_time_failure_names_the_line(tmp_path):
    bad = tmp_path / "explodes.py"
    bad.write_text("x = 1\nraise RuntimeError('no GPU here')\n")
    pattern = r"importing .*explodes.py failed at explodes.py:2: RuntimeError: no GPU"
    with pytest.raises(UserError, match=pattern):
        load_workload(f"{bad}:build")


def test_tutorial_mlp_forward_failure_names_module_and_shapes():
    with pytest.raises(UserError) as info:
        load_workload(f"{DATA / 'tutorial_mlp.py'}:build", ModelOptions(input_shape=(10, 10)))
    message = str(info.value)
    assert "module 'fc1' (Linear)" in message
    assert "input shapes to it: [100]" in message and "weight [10, 10]" in message


@pytest.mark.parametrize("text", ["1,x,3", "0,3", "", "-1,2"])
def test_bad_shapes(text):
    with pytest.raises(UserError, match="bad shape"):
        parse_shape(text)


def test_shapes_parse():
    assert parse_shape("1,1,32,32") == (1, 1, 32, 32) and parse_shape("8x4") == (8, 4)


def test_weights_from_safetensors_and_pt(tmp_path):
    source = LeNet()
    state = {k: v.clone() for k, v in source.state_dict().items()}
    save_file(state, tmp_path / "w.safetensors")
    torch.save(state, tmp_path / "w.pt")
    for name in ("w.safetensors", "w.pt"):
        workload = load_workload("example:lenet", ModelOptions(weights=str(tmp_path / name)))
        torch.testing.assert_close(workload.model.fc3.weight, source.fc3.weight)


def test_weights_that_do_not_fit_name_the_keys(tmp_path):
    state = LeNet().state_dict()
    state.pop("fc3.bias")
    state["extra.weight"] = torch.zeros(2)
    state["fc1.weight"] = torch.zeros(3, 3)
    save_file({k: v.contiguous() for k, v in state.items()}, tmp_path / "bad.safetensors")
    with pytest.raises(UserError) as info:
        load_workload("example:lenet", ModelOptions(weights=str(tmp_path / "bad.safetensors")))
    message = str(info.value)
    assert "missing keys: fc3.bias" in message and "unexpected keys: extra.weight" in message
    assert "fc1.weight [3, 3] vs model [120, 400]" in message


def test_arbitrary_pickles_are_refused(tmp_path):
    path = tmp_path / "evil.pt"
    path.write_bytes(
        b"\x80\x04\x95\x1f\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93\x94."
    )
    with pytest.raises(UserError, match="cannot read|refusing to load"):
        load_workload("example:lenet", ModelOptions(weights=str(path)))


def test_pickle_with_python_objects_is_refused(tmp_path):
    path = tmp_path / "objects.pt"
    torch.save({"fc1.weight": torch.zeros(1), "blob": argparse.Namespace(x=1)}, path)
    with pytest.raises(UserError, match="refusing to load .*objects.pt: it holds Python objects"):
        load_workload("example:lenet", ModelOptions(weights=str(path)))


def test_weights_file_errors(tmp_path):
    with pytest.raises(UserError, match="weights file not found"):
        load_workload("example:lenet", ModelOptions(weights=str(tmp_path / "none.safetensors")))
    (tmp_path / "w.npz").write_bytes(b"x")
    with pytest.raises(UserError, match="unsupported weights file w.npz"):
        load_workload("example:lenet", ModelOptions(weights=str(tmp_path / "w.npz")))
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(UserError, match="cannot read .* as safetensors"):
        load_workload("example:lenet", ModelOptions(weights=str(tmp_path / "junk.safetensors")))


def test_examples_refuse_module_only_options():
    with pytest.raises(UserError, match="apply to your own nn.Module"):
        load_workload("example:lenet", ModelOptions(loss="l1"))
