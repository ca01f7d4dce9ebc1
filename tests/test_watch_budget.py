"""watch(overhead=0.05): the cheap figures every step, the heavy ones (histograms, update ratio,
optimizer state) on a cadence chosen from their measured cost — the scheduler's decisions on
made-up costs (no timing), and on real models the cadence honoured, every figure of a measured
step equal to float64, the cadence said by the run directory, ``inspect`` and the report."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from stats_reference import assert_matches

import gradexplorer as gx
from gradexplorer.core.runs.settings_text import cadence_text
from gradexplorer.core.watch.budget import CHANGE, MARGIN, MAX_EVERY, CostBudget, choose_every

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import workloads as W  # noqa: E402 - bench/workloads.py: torchvision's ResNet-18, GPT-2


def test_choose_every_is_the_smallest_cadence_within_the_budget():
    # ResNet-18-like: light 4 ms, heavy 40 ms, bare 190 ms, 5%: 9.5 ms a step
    k = choose_every(0.004, 0.040, 0.190, 0.05)
    assert k == 7
    assert 0.004 + 0.036 / k <= 0.05 * 0.190 < 0.004 + 0.036 / (k - 1)
    assert choose_every(0.001, 0.002, 0.100, 0.05) == 1  # all of it fits every step
    assert choose_every(0.003, 0.002, 0.010, 0.05) == 1  # heavy steps cost no more than light
    assert choose_every(0.006, 0.040, 0.100, 0.05) == MAX_EVERY  # light alone is over budget


class Costs:
    """A made-up loop: the training thread's CPU a step outside watch (``bare``), inside its
    hooks on light and heavy steps, and its other threads' on each."""

    def __init__(self, bare, light, heavy, other_light=0.0, other_heavy=0.0):
        self.t = self.others = 0.0
        self.bare, self.light, self.heavy = bare, light, heavy
        self.other_light, self.other_heavy = other_light, other_heavy
        self.spent = 0.0  # watch's CPU, all threads

    def run(self, budget: CostBudget, steps: int) -> list[bool]:
        kinds = []

        def hook(step):
            heavy = budget.plan(step)
            cost = self.heavy if heavy else self.light
            other = self.other_heavy if heavy else self.other_light
            self.t += cost
            self.others += other
            self.spent += cost + other
            kinds.append(heavy)

        timed = budget.timed(hook)
        for step in range(1, steps + 1):
            self.t += self.bare
            timed(step)
        return kinds


def test_the_budget_settles_on_the_cadence_its_costs_allow_and_keeps_to_it():
    costs = Costs(bare=0.190, light=0.003, heavy=0.020, other_light=0.001, other_heavy=0.021)
    budget = CostBudget(0.05, lambda: costs.others, clock=lambda: costs.t)
    kinds = costs.run(budget, 400)
    # planned within 70% of the share (MARGIN: the rest for the estimates' noise)
    expected = choose_every(0.004, 0.041, 0.190, 0.05 * (1 - MARGIN))
    assert budget.every == expected == 14 > choose_every(0.004, 0.041, 0.190, 0.05)
    assert budget.costs == pytest.approx((0.004, 0.041, 0.190))
    heavy = [step for step, h in enumerate(kinds, 1) if h]
    assert heavy[:2] == [1, 2]  # measured at once: the first span is set aside
    assert set(np.diff(heavy[-20:])) == {expected}  # one heavy step in 14, steadily
    # rarer at once, from the first estimates (step 4: after the set-aside span, a heavy and a
    # light one), so the run's first steps are within the share too, not only its steady state
    assert budget.changes == [[4, expected]]
    early = [costs.heavy + costs.other_heavy if h else costs.light + costs.other_light
             for h in kinds[:60]]
    assert sum(early) / len(early) <= 0.05 * costs.bare
    late = kinds[-expected * 15:]  # whole cadences of the steady state
    late_cost = sum(costs.heavy + costs.other_heavy if h else costs.light + costs.other_light
                    for h in late) / len(late)
    assert late_cost <= 0.05 * (1 - MARGIN) * costs.bare


def test_a_budget_the_light_figures_exceed_makes_heavy_steps_rare_and_says_so():
    costs = Costs(bare=0.010, light=0.002, heavy=0.020)
    budget = CostBudget(0.05, lambda: costs.others, clock=lambda: costs.t)
    told = []  # (step, every, over_budget) at each call: the run's settings are kept from these
    budget.on_change = lambda step, every: told.append((step, every, budget.over_budget))
    costs.run(budget, 300)
    assert budget.over_budget
    assert told[-1][2] is True  # said as soon as measured, not only with the next cadence change
    costs.light = 0.0001  # the loop's own step unchanged, the light figures now cheap: within
    costs.run(budget, 40)
    assert not budget.over_budget and told[-1][2] is False
    assert budget.every >= 64  # doubling towards MAX_EVERY, on each fresh heavy figure
    assert budget.every <= MAX_EVERY


def test_a_pessimistic_first_estimate_is_undone_where_the_light_figures_are_near_the_budget():
    # the first light span costs 3× the rest (one-off work): the first estimate leaves no room
    # for heavy steps (one in MAX_EVERY); the light figures alone are 88% of the planned budget,
    # so a return only where a budget 20% tighter allowed it would never come
    costs = Costs(bare=0.120, light=0.0037, heavy=0.0252)
    budget = CostBudget(0.05, lambda: costs.others, clock=lambda: costs.t)
    costs.light = 0.011
    costs.run(budget, 3)  # heavy, heavy, then the light step measured as the first estimate
    assert budget.every == 1
    costs.run(budget, 1)
    assert budget.every == MAX_EVERY
    costs.light = 0.0037
    costs.run(budget, 40)  # the light mean falls as the 16 last light steps come in
    expected = choose_every(0.0037, 0.0252, 0.120, 0.05 * (1 - MARGIN))
    assert expected < 100 and budget.every / (1 + CHANGE) <= expected <= budget.every * (1 + CHANGE)
    assert budget.changes[0][1] == MAX_EVERY and len(budget.changes) <= 4


class Slowed(Costs):
    """A loop whose own step is three times slower one step in 4 (load, a heavy step's cold
    caches)."""

    steps = 0

    @property
    def bare(self):
        self.steps += 1
        return 0.300 if self.steps % 4 == 0 else 0.100

    @bare.setter
    def bare(self, value):
        pass


class Noisy(Costs):
    """A loaded machine's loop: every step's CPU, the loop's own and watch's, off by up to ±10%
    (a seeded draw, the same every run)."""

    def __init__(self, seed, **costs):
        super().__init__(**costs)
        self.draw = np.random.default_rng(seed)
        self.kept = dict(costs)

    def __getattribute__(self, name):
        if name in ("bare", "light", "heavy", "other_light", "other_heavy"):
            return self.kept[name] * self.draw.uniform(0.9, 1.1)
        return super().__getattribute__(name)

    def __setattr__(self, name, value):
        if name in ("bare", "light", "heavy", "other_light", "other_heavy"):
            self.__dict__.setdefault("kept", {})[name] = value
        else:
            super().__setattr__(name, value)


@pytest.mark.parametrize("seed", range(4))
def test_light_figures_near_the_budget_change_the_cadence_rarely_and_keep_the_share(seed):
    # bench/watch_floor.py's ResNet-18: the light figures 3.4% of the step against the 3.5%
    # planned; the room left for heavy steps is within the noise, so the cadence the estimates
    # give swings by 5-10× from step to step (before: 23 changes in 58 steps)
    costs = Noisy(seed, bare=0.188, light=0.0050, heavy=0.045, other_light=0.0014,
                  other_heavy=0.030)
    budget = CostBudget(0.05, lambda: costs.others, clock=lambda: costs.t)
    kinds = costs.run(budget, 600)
    assert len(budget.changes) <= 3, budget.changes
    steps = [s for s, _ in budget.changes]
    assert all(b - a >= 16 for a, b in zip(steps[:-1], steps[1:], strict=True))  # the hold: one in 16 steps
    assert not budget.over_budget
    light, heavy = 0.0064, 0.075  # watch's CPU a step, all threads, as drawn on average
    spent = sum(heavy if h else light for h in kinds[20:]) / len(kinds[20:])
    assert spent <= 0.05 * 0.188  # within the share, the first steps' measures aside


def test_a_few_slow_steps_do_not_move_the_loops_own_estimate():
    # the loop's own step is the median of its last steps, not their mean (1.5× it here): the
    # budget does not think it has more room than it has
    costs = Slowed(bare=None, light=0.002, heavy=0.0455)
    budget = CostBudget(0.05, lambda: costs.others, clock=lambda: costs.t)
    costs.run(budget, 300)
    assert budget.costs[2] == pytest.approx(0.100)
    planned = choose_every(0.002, 0.0455, 0.100, 0.05 * (1 - MARGIN))
    # the cadence first chosen kept while within the share (a 1-in-30 plan, not a change)
    assert planned / (1 + CHANGE) <= budget.every <= planned
    assert 0.002 + 0.0435 / budget.every <= 0.05 * 0.100  # (on the mean, 1.5×: one in 14, over)


def test_a_slower_loop_allows_more_heavy_steps_again():
    costs = Costs(bare=0.100, light=0.002, heavy=0.0455)
    budget = CostBudget(0.05, lambda: costs.others, clock=lambda: costs.t)
    costs.run(budget, 300)
    slow = budget.every
    assert slow == choose_every(0.002, 0.0455, 0.100, 0.05 * (1 - MARGIN)) == 30
    costs.bare = 2.0  # the loop got 20 times slower (a bigger batch): more heavy steps fit
    costs.run(budget, 60)
    assert budget.every == choose_every(0.002, 0.0455, 2.0, 0.05 * (1 - MARGIN)) == 1 < slow


@pytest.mark.parametrize("value", [0, -0.1, 1.5, True, "5%", float("nan")])
def test_overhead_must_be_a_share(value):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(gx.UserError, match="overhead must be a share") as found:
        gx.watch(model, opt, overhead=value)
    assert "\n" not in str(found.value)


def test_overhead_with_histogram_every_or_without_an_optimizer_is_refused():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(gx.UserError, match="overhead or histogram_every"):
        gx.watch(model, opt, overhead=0.05, histogram_every=4)
    with pytest.raises(gx.UserError, match="needs the optimizer"):
        gx.watch(model, overhead=0.05)
    gx.watch(model, opt, overhead=0.05).close()  # the refused calls left nothing attached


SMALL = 1 << 17  # tensors checked figure by figure against exact float64 sums


class KnownCosts(CostBudget):
    """A budget whose estimates are set (light 1 ms, heavy 10 ms, the loop's step 100 ms a
    step) once it has measured each kind: the cadence it then chooses is the scheduler's alone
    (tested on made-up costs above), not the few CPU readings of a 7-step run, where a heavy
    step's worker CPU may land in the next span's (the spread of a light step's and a heavy
    one's on GPT-2 tiny)."""

    @property
    def costs(self):
        measured = super().costs
        return None if measured is None else (0.001, 0.010, 0.100)


def watched_steps(model, batch, loss_fn, run_dir, steps):
    """``steps`` SGD-momentum steps of ``model`` under watch(overhead=0.0005) (a budget no
    heavy step fits: they are spaced out at once; the estimates ``KnownCosts``'), every step's
    gradients and weights before and after kept: ``(recorder, {step: (grads, before, after)})``."""
    named = list(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    seen, step = {}, [0]

    def before(*_):
        step[0] += 1
        seen[step[0]] = ([p.grad.detach().clone() for _, p in named],
                         [p.detach().clone() for _, p in named])

    def after(*_):
        seen[step[0]] += ([p.detach().clone() for _, p in named],)

    opt.register_step_pre_hook(before)  # before watch's: the gradients watch is given
    rec = gx.watch(model, opt, run_dir, overhead=0.0005)
    rec.budget.__class__ = KnownCosts
    opt.register_step_post_hook(after)
    for k in range(steps):
        inputs, target = batch(k)
        opt.zero_grad()
        W.loss_of(model, inputs, target, loss_fn).backward()
        opt.step()
    rec.close()
    return rec, seen, [n for n, _ in named]


def small_resnet():
    model, _, loss_fn = W.resnet18(2, 32)
    model.fc = torch.nn.Linear(512, 10)  # torchvision's network, a small head and input

    def batch(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(2, 3, 32, 32, generator=g), torch.randint(0, 10, (2,), generator=g)
    return model, batch, loss_fn


@pytest.mark.parametrize("workload", ["resnet18", "gpt2-tiny"])
def test_the_cadence_is_honoured_and_measured_steps_equal_float64(tmp_path, workload, capsys):
    model, batch, loss_fn = small_resnet() if workload == "resnet18" else W.gpt2_tiny()
    rec, seen, names = watched_steps(model, batch, loss_fn, tmp_path / "run", 7)
    run = gx.open_run(tmp_path / "run")
    assert run.steps == list(range(1, 8))  # every step recorded
    heavy = [s for s in run.steps if run.histograms(s)]
    assert heavy[:2] == [1, 2] and 3 not in heavy and len(heavy) < 7
    assert len(heavy) == rec.budget.heavy_steps
    every = dict(rec.budget.changes)
    cadence, last = 1, 2
    for step in range(4, 8):  # heavy exactly where the cadence in force says
        cadence = every.get(step, cadence)
        assert (step in heavy) == (step - last >= cadence), (step, heavy, rec.budget.changes)
        last = step if step in heavy else last
    for step in run.steps:
        grads, before, after = seen[step]
        stats, hists, figures = run.stats(step), run.histograms(step), run.figures(step)
        for name, grad, old, new in zip(names, grads, before, after, strict=True):
            if grad.numel() <= SMALL:  # every figure, by exact sums (fsum: slow on big tensors)
                assert_matches(stats[name], hists.get(name), grad)
            else:  # the norm, extremes and histogram counts of the big ones
                x = grad.double().numpy().ravel()
                assert math.isclose(stats[name].norm, float(np.sqrt(np.sum(x * x))), rel_tol=1e-9)
                assert (stats[name].min, stats[name].max) == (x.min(), x.max())
                if name in hists:
                    assert np.array_equal(hists[name].counts, np.histogram(x, hists[name].edges)[0])
            ratio, state = stats[name].update_ratio, figures[name].get("momentum_norm")
            if step in heavy:
                assert name in hists
                moved = (new.double() - old.double()).norm() / old.double().norm()
                assert math.isclose(ratio, moved.item(), rel_tol=1e-12), (step, name)
                assert state is not None
            else:
                assert name not in hists and ratio is None and state is None
    settings = run.settings
    assert settings["overhead"] == 0.0005 and settings["histogram_every"] == rec.budget.every > 1
    assert settings["cadence"] == rec.budget.changes
    assert settings["over_budget"] is rec.budget.over_budget is True  # 0.05% of a step: light over
    assert 0 < settings["light_share"] < 1
    text = cadence_text(settings)
    assert f"over budget: the figures of every step alone cost {settings['light_share']:.1%}" in text
    assert f"histograms every {rec.budget.every}" in text and "overhead ≤ 0%" in text
    from gradexplorer.commands.run_tables import inspect_run

    inspect_run(str(tmp_path / "run"), None, 8)
    assert f"recorded: {text}" in capsys.readouterr().out


def test_the_report_says_the_cadence(tmp_path):
    model, batch, loss_fn = W.mlp256()
    rec, _, _ = watched_steps(model, batch, loss_fn, tmp_path / "run", 5)
    from gradexplorer.core.share.report_data import gather
    from gradexplorer.core.share.report_html import summary_section

    data = gather(gx.open_run(tmp_path / "run"))
    assert f"histograms every {rec.budget.every} (chosen for overhead" in summary_section(data)
    assert cadence_text({"stats_every": 2, "histogram_every": 5, "bins": 64}) == \
        "statistics every 2 step(s), histograms every 5"  # a run recorded without a budget
