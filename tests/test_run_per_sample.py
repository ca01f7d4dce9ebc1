"""``gradexplorer run --per-sample-norms``: a line per step with the per-sample norms."""

import re

LINE = re.compile(r"^  step (\d+): per-sample grad norm over (\d+) samples: median ([\d.e+-]+), "
                  r"p90 ([\d.e+-]+), max ([\d.e+-]+) \(sample (\d+)\)$")


def per_sample_lines(run_cli, *extra):
    code, out, err = run_cli("run", "--model", "example:mlp", "--steps", "2", "--seed", "3",
                             "--device", "cpu", "--per-sample-norms", *extra)
    assert code == 0, err
    return [LINE.match(line) for line in out.splitlines() if line.startswith("  step ")]


def test_run_prints_each_steps_per_sample_norms_for_the_reduction_given(run_cli):
    mean = per_sample_lines(run_cli)
    assert [m.group(1) for m in mean] == ["1", "2"]
    summed = per_sample_lines(run_cli, "--per-sample-reduction", "sum")
    batch = int(mean[0].group(2))
    for a, b in zip(mean, summed, strict=True):  # the same steps: mean's norms are batch × sum's
        assert a.group(6) == b.group(6)
        for column in (3, 4, 5):
            assert abs(float(a.group(column)) / float(b.group(column)) / batch - 1) < 1e-3


def test_run_names_the_modules_it_leaves_out(run_cli):
    code, out, err = run_cli("run", "--model", "example:transformer", "--steps", "1",
                             "--device", "cpu", "--per-sample-norms")
    assert code == 0, err
    left_out = next(line for line in out.splitlines() if "per-sample gradient norms leave out"
                    in line)  # its bare position parameter; its attention has figures now
    assert left_out.endswith("leave out (model) (TinyTransformer): TinyTransformer is not "
                             "supported")
