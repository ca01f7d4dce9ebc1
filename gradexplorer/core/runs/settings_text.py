"""How a run was recorded, in words: its settings' cadence, as ``inspect`` and the report say
it (``watch(overhead=)``'s budget: ``core/watch/budget.py``)."""

from __future__ import annotations


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
    return text


def noise_cadence_text(settings: dict) -> str:
    """``watch(noise_every=)`` in words ("" where every recorded step has its noise scale)."""
    every, note = settings.get("noise_every", 1), settings.get("noise_every_note")
    if isinstance(note, str) and every in (1, "auto"):  # DDP: "auto" is every step (noise_cadence.py)
        return f"noise scale at every recorded step ({note})"
    if every == "auto":
        changes = [f"{e} from step {s}" for s, e in (settings.get("noise_cadence") or [])[-4:]
                   if isinstance(s, int) and isinstance(e, int)]
        now = (settings.get("noise_cadence") or [[0, 2]])[-1][-1]
        return (f"noise scale on one step in {now} (auto, for ≤ 5% of the step; the EMAs over "
                f"those steps{': ' + ', '.join(changes) if changes else ''})")
    if isinstance(every, int) and not isinstance(every, bool) and every > 1:
        return f"noise scale on one step in {every} (the EMAs over those steps)"
    return ""
