"""Every flag's bad value is refused as the command line is read: one line naming the flag,
exit status 2, no traceback (nothing loads, so a refusal never waits for a model or a run)."""

from __future__ import annotations

import pytest

from tests.cli_helpers import one_line_error

MLP = ("--model", "example:mlp")
RUN = ("run", *MLP)
REFUSED = [  # (argv, the flag the line must name)
    (("inspect", "R", "--width", "0"), "--width"),
    (("inspect", "R", "--width", "3"), "--width"),
    (("inspect", "R", "--step", "-1"), "--step"),
    (("spikes", "R", "--top", "-3"), "--top"),
    (("spikes", "R", "--top", "0"), "--top"),
    (("spikes", "R", "--step", "-2"), "--step"),
    (("export", "R", "--to", "csv", "d.csv", "--figures", ""), "--figures"),
    (("export", "R", "--to", "csv", "d.csv", "--figures", " , "), "--figures"),
    (("export", "R", "--to", "csv", "d.csv", "--stride", "0"), "--stride"),
    (("export", "R", "--to", "csv", "d.csv", "--stride", "-1"), "--stride"),
    (("export", "R", "--to", "csv", "d.csv", "--every", "0"), "--every"),
    (("report", "R", "--out", "r.html", "--top", "-1"), "--top"),
    (("diverge", "A", "B", "--top", "0"), "--top"),
    (("diverge", "A", "B", "--tol", "-0.1"), "--tol"),
    (("diverge", "A", "B", "--tol", "nan"), "--tol"),
    (("compare", "A", "--steps", "-1", "2"), "--steps"),
    ((*RUN, "--input-shape", ""), "--input-shape"),
    ((*RUN, "--input-shape", "2,0"), "--input-shape"),
    ((*RUN, "--input-shape", "a,b"), "--input-shape"),
    ((*RUN, "--steps", "0"), "--steps"),
    ((*RUN, "--steps", "-5"), "--steps"),
    ((*RUN, "--steps", ""), "--steps"),
    ((*RUN, "--lr", "0"), "--lr"),
    ((*RUN, "--lr", "-0.1"), "--lr"),
    ((*RUN, "--lr", "inf"), "--lr"),
    ((*RUN, "--lr", "nan"), "--lr"),
    ((*RUN, "--momentum", "-1"), "--momentum"),
    ((*RUN, "--momentum", "1.5"), "--momentum"),
    ((*RUN, "--batch-size", "0"), "--batch-size"),
    ((*RUN, "--bins", "0"), "--bins"),
    ((*RUN, "--bins", "5000"), "--bins"),
    ((*RUN, "--histogram-every", "0"), "--histogram-every"),
    ((*RUN, "--every", "-2"), "--every"),
    ((*RUN, "--export", "D", "--snapshot-every", "0"), "--snapshot-every"),
    ((*RUN, "--export", "D", "--keep-snapshots", "0"), "--keep-snapshots"),
    ((*RUN, "--export", "D", "--keep-last", "-1"), "--keep-last"),
    ((*RUN, "--weights", ""), "--weights"),
    ((*RUN, "--hook", "fc1"), "--hook"),
    ((*RUN, "--hook", "fc1="), "--hook"),
    (("graph", *MLP, "--out", "g.svg", "--collapse", "0"), "--collapse"),
    (("gui", "--steps", "-1"), "--steps"),
    (("open", "R", "--spike", "-1"), "--spike"),
    (("open", "R", "--tol", "-1"), "--tol"),
    (("open", "R", "R2", "--reference", "0"), "--reference"),
]


@pytest.mark.parametrize(("argv", "flag"), REFUSED, ids=[" ".join(a[2:] if a[0] == "run" else a)
                                                          for a, _ in REFUSED])
def test_a_bad_value_is_refused_naming_its_flag(run_cli, argv, flag):
    code, out, err = run_cli(*argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) in (1, 2), err  # an old name first says it is renamed, in a line of its own
    assert lines[-1].startswith(f"gradexplorer: error: argument {flag}: "), err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("action", ["noise:1e26", "noise:1:1e26", "scale:1e7", "scale:-1e7",
                                    "clip:1e300"])
def test_an_absurd_hook_number_is_refused_before_step_1(run_cli, action):
    code, out, err = run_cli(*RUN, "--steps", "2", "--hook", f"fc2={action}")
    one_line_error(code, out, err, action, "must be at most")
    assert "step 1" not in out


def test_a_weights_path_that_is_no_regular_file(run_cli, tmp_path):
    one_line_error(*run_cli(*RUN, "--steps", "1", "--weights", "/dev/zero"),
                   "/dev/zero is not a weights file")
    one_line_error(*run_cli(*RUN, "--steps", "1", "--weights", tmp_path), "not a weights file")
    one_line_error(*run_cli(*RUN, "--steps", "1", "--weights", tmp_path / "no.pt"), "not found")


def test_edge_values_still_run(run_cli, tmp_path):
    code, out, err = run_cli(*RUN, "--steps", "1", "--lr", "1e-12", "--momentum", "0",
                             "--batch-size", "1", "--bins", "1", "--histogram-every", "1",
                             "--hook", "fc2=noise:1e6",
                             "--export", tmp_path / "snaps", "--snapshot-every", "1",
                             "--keep-snapshots", "1")
    assert code == 0 and "step 1/1" in out, err
    code, out, err = run_cli("inspect", tmp_path / "snaps" / "step-000001", "--width", "4")
    assert code == 0 and "fc1.weight" in out, err
