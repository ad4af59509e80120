"""Multi-token prediction as Megatron-LM trains it (``--mtp-num-layers``, D
modules; DeepSeek-V3, Liu et al. 2024, sec. 2.2).

Source: ``megatron/core/transformer/multi_token_prediction.py`` and
``megatron/core/models/gpt/gpt_model.py`` (``_postprocess``) at d98e8a64.
Without a custom pipeline layout the modules run on the last stage, after
the decoder's final norm and before the output layer (mtp_on_this_rank).
Module k takes the hidden states h_{k-1} (the decoder's, after its final
norm, for k = 1) and the embedding of the tokens rolled k places
(``roll_tensor``). Per micro-batch it keeps, 2-byte activations, ``sbh``
divided by t under sequence parallelism:

* before its layer, alive until that layer's backward is done
  (:func:`mtp_rows` ``"before"``): what the embedding keeps
  (:func:`actmem.run.moments.pass_parts.embedding_activations`: the rolled
  token ids, the dropout mask), the inputs of ``enorm`` and ``hnorm`` (2sbh
  each; h_{k-1} is kept by nothing else) and ``eh_proj``'s input, their
  concatenation (4sbh, ``_concat_embeddings``);
* its layer, built from the decoder's last layer's spec (``gpt_builders.py``),
  with that layer's rows;
* after its layer, freed by the output layer's backward (``"after"``): its
  final norm's input (2sbh); the output layer's input, one more chunk of the
  concatenation ``torch.cat(hidden_states_list)`` that ``process_mtp_loss``
  splits with ``torch.chunk``: each output layer saves a view, so the whole
  (1+D)-chunk tensor stays (2sbh per module); the cross-entropy's targets
  (9sb, as the main loss's); the rolled fp32 loss mask its ``loss_mask *
  mtp_loss`` saves and the scaled loss ``MTPLossAutoScaler`` saves (4sb
  each);
* the logits its own cross-entropy keeps, as the main loss's
  (:func:`actmem.run.moments.loss.loss_bytes` ``"saved"``). The D losses are
  computed before the main one, so the main loss's forward runs beside the
  D saved ones; their backward comes after the main loss's, whose moment
  therefore holds the most.

Left out, as the ledger and the first stage's embedding leave them out:
the norms' fp32 statistics and, with learned positions, the rolled int64
position ids the position table saves. The step measured on CPU
(:mod:`actmem.measure.step_mtp`) names both beside the timeline's bytes.
"""

from __future__ import annotations

from dataclasses import replace

from .moe_timeline import dense_twin
from .pass_parts import embedding_activations
from .precision import SIXTEEN_BITS
from .timeline_events import LayerMoments

_REFUSED = {
    "fp8": "FP8 (the modules' linears would keep 1-byte inputs)",
    "use_torch_fsdp2": "FSDP2", "cpu_offloading_num_layers": "activation offloading",
    "defer_embedding_wgrad_compute": "the deferred output-layer weight gradient",
}


def mtp_rows(model, t: int, sequence_parallel: bool, layer_options: dict) -> dict[str, dict]:
    """One module's rows per micro-batch, bytes: ``{"before": ..., "after":
    ...}`` (module docstring) for ``model`` (the rank's, ``s/cp`` tokens; a
    dense one: :func:`actmem.run.moments.moe_timeline.dense_twin`)."""
    c = model.layer(t, sequence_parallel)
    sbh = c.s * c.b * c.h // (c.t if sequence_parallel else 1)
    before = {f"MTP {name}": n for name, n in
              embedding_activations(model, t, sequence_parallel, layer_options).items()}
    before.update({"MTP enorm input": 2 * sbh, "MTP hnorm input": 2 * sbh,
                   "MTP eh_proj input": 4 * sbh})
    after = {"MTP final norm input": 2 * sbh, "MTP output layer input": 2 * sbh,
             "MTP cross-entropy targets": 9 * c.s * c.b, "MTP loss mask and loss": 8 * c.s * c.b}
    return {"before": before, "after": after}


def module_moments(layer: LayerMoments, before: int) -> LayerMoments:
    """A module's moments: its layer's (the decoder's last kind) with
    ``before`` bytes held from before the layer's forward to after its
    backward."""
    grown = {name: getattr(layer, name) + before
             for name in ("to_softmax", "to_dispatch", "to_dispatch_recomputed", "to_attention",
                          "to_attention_recomputed") if getattr(layer, name)}
    return replace(layer, kept=layer.kept + before, full=layer.full + before, **grown)


def with_mtp(setup):
    """``setup`` (:class:`actmem.run.step_setup.StepSetup`) with D modules:
    their moments after the last chunk's layers (``mtp_layers``), their
    ``"after"`` rows and D more saved logits in what the last chunk keeps,
    and the main loss's forward beside the D saved logits."""
    d = setup.whole.mtp_num_layers
    if not d:
        return setup
    j, model = setup.job, setup.model
    rows = mtp_rows(dense_twin(model), j.t, j.sequence_parallel, setup.layer_options)
    kind = setup.kinds[model.moe_pattern()[-1]] if setup.kinds else setup.moments
    modules = (module_moments(kind, sum(rows["before"].values())),) * d
    saved = setup.losses["saved"]
    last = {**setup.last, **{name: d * n for name, n in rows["after"].items()},
            "logits": (1 + d) * saved}
    losses = {**setup.losses, "forward": setup.losses["forward"] + d * saved}
    return replace(setup, mtp_layers=modules, last=last, losses=losses)


def check_mtp(job) -> None:
    """Multi-token prediction's rules: Megatron-LM's (its loss, its 16-bit
    precisions, its schedules, full recomputation of one module at a time
    only: ``_checkpointed_forward`` asserts ``recompute_num_layers == 1``)
    and what actmem does not model with it, each refused by name.

    Raises:
        ValueError: the option, its value and why.
    """
    d = job.model.mtp_num_layers
    if not d:
        return
    head = f"mtp_num_layers={d}"
    for name, what in _REFUSED.items():
        if getattr(job, name):
            raise ValueError(f"{head} with {name}={getattr(job, name)!r}: multi-token "
                             f"prediction with {what} is not modelled")
    if job.model.lora_rank is not None or job.optimizer != "adam":
        raise ValueError(f"{head} with lora_rank={job.model.lora_rank!r}, "
                         f"optimizer={job.optimizer!r}: multi-token prediction is modelled "
                         "for full training with Adam only")
    if job.precision not in SIXTEEN_BITS or job.loss != "vocab_parallel":
        raise ValueError(f"{head} with precision={job.precision!r}, loss={job.loss!r}: "
                         f"Megatron-LM's MTP runs its own cross-entropy (loss='vocab_parallel') "
                         f"under bf16 or fp16 ({', '.join(map(repr, SIXTEEN_BITS))})")
    if job.schedule not in ("1f1b", "interleaved"):
        raise ValueError(f"{head} with schedule={job.schedule!r}: Megatron-LM runs MTP under "
                         "its own schedules, '1f1b' and 'interleaved'")
    if job.recompute == "full":
        raise ValueError(f"{head} with recompute='full': the modules' own checkpoint "
                         "(MultiTokenPredictionLayer._checkpointed_forward) is not modelled; "
                         "use 'selective' or 'none'")
