"""Which noise-scale capture a watched loop gets (``watch``'s ``noise_scale`` argument): the
accumulation one (``noise_watch.py``) or, under DDP with several ranks, the ranks' one
(``noise_ranks.py``, which builds on the first: so the choice lives in neither)."""

from __future__ import annotations

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.watch.noise_cadence import auto_every_step, cadence_for
from gradexplorer.core.watch.noise_ranks import RankNoiseWatch
from gradexplorer.core.watch.noise_watch import NoiseSettings, NoiseWatch


def noise_for(recorder, value, every: int | str = 1) -> NoiseWatch | None:
    """The recorder's NoiseWatch for ``watch``'s ``noise_scale`` argument (True: the defaults,
    False, or NoiseSettings); several DDP ranks: every rank's ``RankNoiseWatch``
    (``noise_ranks.py``: the ranks' local gradients are the small batches). None where it does
    not apply: no accumulation probe (a rank that records nothing), several ranks without DDP
    or DTensor gradients, even on a mesh of one rank (each backward's own gradient is a
    DTensor: not combined across ranks, and its storage is its local tensor's, not the
    capture's to read)."""
    if value is not True and value is not False and not isinstance(value, NoiseSettings):
        raise UserError(f"watch: noise_scale must be True, False or a NoiseSettings, got "
                        f"{type(value).__name__}")
    if value is not False and recorder.plan.mode == "ddp" and recorder.plan.world > 1:
        if every == "auto":  # the default: every recorded step (noise_cadence.py says so)
            auto_every_step(recorder)
        elif every != 1:
            raise UserError("watch: noise_every is not supported under DDP yet (the ranks' "
                            "noise scale is recorded at every recorded step)")
        return RankNoiseWatch(recorder, NoiseSettings() if value is True else value)
    if value is False or recorder.probe is None or recorder.plan.world > 1 \
            or recorder.plan.sharded:
        return None
    return NoiseWatch(recorder.probe, recorder.plan.stats_model, recorder._names,
                      NoiseSettings() if value is True else value, recorder._report, recorder.writer,
                      cadence_for(recorder, every))
