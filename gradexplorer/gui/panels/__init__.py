"""The docks' widgets that are not plots: parameter table, module tree, details, ledger, spikes, log."""
