"""How a run was recorded, in words: its settings' cadence, as ``inspect`` and the report say
it (``watch(overhead=)``'s budget: ``core/watch/budget.py``); and what a resumed run's settings
keep of the earlier run's (``resumed_settings``)."""

from __future__ import annotations

HISTORIES = ("cadence", "noise_cadence")  # [step, every] changes: the earlier run's kept on resume
BUDGET_MEASURES = ("over_budget", "light_share")  # the budget's last measures, while one is in force


def cadence_changes(settings: dict, key: str, before: int | None = None) -> list[list[int]]:
    """The ``[step, every]`` changes kept under ``key`` (``cadence``: the budget's,
    ``noise_cadence``: ``noise_every="auto"``'s), those at steps before ``before`` where given;
    [] where none are, or they are not such pairs."""
    changes = settings.get(key)
    if not isinstance(changes, list) or not all(
            isinstance(c, list) and len(c) == 2 and all(type(v) is int and v >= 1 for v in c)
            for c in changes):
        return []
    return [list(c) for c in changes if before is None or c[0] < before]


def resumed_settings(resumed: dict, settings: dict) -> dict:
    """The settings a run resumed from ``resumed`` (``runs/writer.py``'s ``resume_point``) keeps:
    the resumed recorder's ``settings`` (what is in force from its first step: the cadences,
    ``overhead``, ``histogram_every``), the earlier run's histories of cadence changes where the
    resumed recorder has written none yet (its budget's and "auto"'s go on from them:
    ``CostBudget.go_on``, ``NoiseCadence.go_on``), its budget's last measures while a budget is
    in force, its noise keys until the resumed one writes its own, and ``resumed``: the steps
    each resumed recording began at."""
    earlier, first = resumed.get("settings") or {}, resumed["step"] + 1
    kept = earlier.get("resumed") if isinstance(earlier.get("resumed"), list) else []
    carried = dict(settings, resumed=[s for s in kept if type(s) is int and s < first] + [first])
    for key in HISTORIES:
        if key not in settings and cadence_changes(earlier, key, first):
            carried[key] = cadence_changes(earlier, key, first)
    if "overhead" in settings and "overhead" in earlier:  # a budget then and now
        carried.update({k: earlier[k] for k in BUDGET_MEASURES if k in earlier and k not in settings})
    if "noise_every" not in settings and "noise_every" in earlier:
        carried["noise_every"] = earlier["noise_every"]
    return carried


def cadence_text(settings: dict) -> str:
    """How a run was recorded, as ``inspect`` and the report say it: the statistics' and
    histograms' cadence, and the cost budget that chose the latter (``overhead``)."""
    stats = settings.get("stats_every", settings.get("every", 1))
    hist = settings.get("histogram_every", 1)
    text = f"statistics every {stats} step(s), histograms every {hist}" if hist else \
        f"statistics every {stats} step(s), no histograms"
    overhead = settings.get("overhead")
    if isinstance(overhead, (int, float)) and not isinstance(overhead, bool):
        changes = settings.get("cadence") or []
        seen = ", ".join(f"{e} from step {s}" for s, e in changes[-4:]
                         if isinstance(s, int) and isinstance(e, int))
        text += (f" (chosen for overhead ≤ {overhead:.0%}: histograms, update ratio and "
                 f"optimizer state every {hist} step(s){'; ' + seen if seen else ''})")
        share = settings.get("light_share")
        if settings.get("over_budget") is True and isinstance(share, (int, float)) \
                and not isinstance(share, bool):
            text += (f"; over budget: the figures of every step alone cost {share:.1%} of the "
                     "loop's step, so heavy steps were made as rare as it allows")
    resumed = [s for s in settings.get("resumed") or [] if type(s) is int]
    if resumed:  # watch(resume=True): the cadence in force the last recording's
        text += f"; resumed at step {', '.join(map(str, resumed))}"
    return text


def noise_cadence_text(settings: dict) -> str:
    """``watch(noise_every=)`` in words ("" where every recorded step has its noise scale)."""
    every = settings.get("noise_every", 1)
    if every == "auto":
        changes = [f"{e} from step {s}" for s, e in (settings.get("noise_cadence") or [])[-4:]
                   if isinstance(s, int) and isinstance(e, int)]
        now = (settings.get("noise_cadence") or [[0, 2]])[-1][-1]
        return (f"noise scale on one step in {now} (auto, for ≤ 5% of the step; the EMAs over "
                f"those steps{': ' + ', '.join(changes) if changes else ''})")
    if isinstance(every, int) and not isinstance(every, bool) and every > 1:
        return f"noise scale on one step in {every} (the EMAs over those steps)"
    return ""
