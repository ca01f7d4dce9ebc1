"""An optimizer step measured: where it is measured (``points``), the gradient as accumulated
(``accumulated``, ``probe``) and as applied, and the step ledger (``ledger``)."""
