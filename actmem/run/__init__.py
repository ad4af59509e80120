"""A training job: many layers, pipeline schedules, whole models, model states
and the peak per GPU. Asks :mod:`actmem.layer` for bytes per layer and never
rebuilds a ledger.

The folders follow :func:`actmem.training_memory`'s step:

* :mod:`actmem.run.job`: the job as given and checked (the model, its
  options, a GPU; Megatron-LM's arguments and Hugging Face configs in);
* :mod:`actmem.run.schedule`: the layers split over the stages and the
  pipeline schedule simulated (every stage's operations, their times, what
  they hold);
* :mod:`actmem.run.model_states`: per stage, weights, gradients and
  optimizer states (FSDP2, LoRA and FP8 included);
* :mod:`actmem.run.moments`: per stage, what a pass and a layer keep, the
  framework's and the precision's bytes, and the timeline of what is alive
  when;
* here: what the stages share (:mod:`actmem.run.step_setup`), each feature
  through one interface (:mod:`actmem.run.features`), the peak and the
  answer's records (:mod:`actmem.run.peak`, :mod:`actmem.run.stage_memory`),
  the reserve (:mod:`actmem.run.reserve`) and Megatron-LM's own estimate
  (:mod:`actmem.run.megatron_estimate`).
"""
