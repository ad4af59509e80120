"""What one forward pass keeps, part by part, for a whole model's stages.

:func:`actmem.training_memory` (:mod:`actmem.peak`) puts these on each
pipeline stage's GPU, and :mod:`actmem.timeline` reads them at each moment:

* what only the first and the last stage keep, per pass (Korthikanti et al.
  2022, sec. 4.3, and Megatron-LM's ``theoretical_memory_usage.py``): the
  token ids (int64) and the embedding's dropout mask; the final norm's
  input, the output layer's input, the logits the cross-entropy keeps and
  its int64 targets with their 1-byte mask.

One layer's bytes at the moments the timeline looks at are
:func:`actmem.run.moments.precision.precision_moments`.

Under sequence parallelism the norm inputs and the embedding mask are split
along s (divided by t); without it every tensor-parallel rank keeps them
whole.
"""

from __future__ import annotations

from ..job.model import ModelConfig
from ...validate import integer


def embedding_activations(model: ModelConfig, t: int = 1, sequence_parallel: bool = False,
                          layer_options: dict | None = None) -> dict[str, int]:
    """Bytes the first stage keeps per micro-batch for the embedding:
    token ids (int64, ``8sb``) and, with dropout, the 1-byte dropout mask
    (``sbh``, ``sbh/t`` under sequence parallelism). ``layer_options``: the
    run's other layer options (:meth:`actmem.ModelConfig.layer`)."""
    c = model.layer(t, sequence_parallel, **(layer_options or {}))
    split = c.t if sequence_parallel else 1
    parts = {"token ids": 8 * c.s * c.b}
    if c.dropout:
        parts["embedding dropout mask"] = c.s * c.b * c.h // split
    return parts


def output_activations(model: ModelConfig, t: int = 1, sequence_parallel: bool = False,
                       logits_bytes: int = 4, layer_options: dict | None = None
                       ) -> dict[str, int]:
    """Bytes the last stage keeps per micro-batch for the output: the final
    norm's and the output layer's inputs (``2sbh`` each, ``/t`` under
    sequence parallelism), the logits the cross-entropy keeps
    (``logits_bytes * s*b*V/t``, V padded) and its targets and mask
    (``9sb``: int64 and 1 byte per token). ``layer_options``: as
    :func:`embedding_activations`."""
    c = model.layer(t, sequence_parallel, **(layer_options or {}))
    if integer("logits_bytes", logits_bytes, "4 or 2") not in (2, 4):
        raise ValueError(f"logits_bytes must be 4 (fp32, Megatron-LM) or 2 (16-bit), "
                         f"got {logits_bytes!r}")
    sbh = c.s * c.b * c.h // (c.t if sequence_parallel else 1)
    return {"final norm input": 2 * sbh, "output layer input": 2 * sbh,
            "logits": logits_bytes * c.s * c.b * model.padded_vocab(c.t) // c.t,
            "cross-entropy targets": 9 * c.s * c.b}
