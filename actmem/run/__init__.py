"""A training job: many layers, pipeline schedules, whole models, model states
and the peak per GPU. Asks :mod:`actmem.layer` for bytes per layer and never
rebuilds a ledger."""
