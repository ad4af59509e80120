"""Megatron-LM's virtual pipeline stages (:func:`virtual_stages`) and its
``--pipeline-model-parallel-layout`` as actmem's per-chunk ``stage_layers``
(:func:`actmem.split_layers`).

Source: ``megatron/core/transformer/pipeline_parallel_layer_layout.py`` at
d98e8a64 (``PipelineParallelLayerLayout``). The string lists the virtual
stages, separated by ``|``, each a run of letters: ``E`` the embedding, ``t``
a decoder layer, ``m`` a multi-token prediction module, ``L`` the loss;
commas are cosmetic, ``(...)*n`` and ``x*n`` repeat (``parse_str_to_list``).
Virtual stage ``k`` of the flat list is chunk ``k // p`` of pipeline rank
``k % p`` (``__init__``), so there are ``v = stages / p`` chunks per rank
(``arguments.py``: ``virtual_pipeline_model_parallel_size``). Megatron-LM
checks that ``E`` opens and ``L`` closes the list, once each, and that it
holds L decoder layers and D modules after them (``validate_layer_layout``).
actmem puts the embedding on the first chunk and the loss, with the modules,
on the last; a layout whose modules sit in a virtual stage without the loss
(Megatron-LM's ``mtp_standalone``) is refused.
"""

from __future__ import annotations

import re

_UNROLL = (re.compile(r"\(([^)]+)\)\*(\d+)"), re.compile(r"(.)\*(\d+)"))
"""``parse_str_to_list``'s patterns, applied in this order."""


def layout_stages(text: str) -> list[str]:
    """The virtual stages of a layout string, each a run of letters."""
    flat = text.replace(",", "")
    for pattern in _UNROLL:
        flat = pattern.sub(lambda found: found.group(1) * int(found.group(2)), flat)
    return flat.split("|")


def layout_stage_layers(text: str, p: int, L: int, mtp_num_layers: int | None
                        ) -> tuple[int, tuple[tuple[int, ...], ...]]:
    """``(v, stage_layers)``: chunks per pipeline rank and each chunk's
    decoder layers, ``p`` tuples of ``v`` counts.

    Raises:
        ValueError: a layout Megatron-LM refuses, or one whose modules are not
            with the loss; the message names the flag and its value.
    """
    flag, stages = f"--pipeline-model-parallel-layout {text}", layout_stages(text)
    flat, mtp = "".join(stages), mtp_num_layers or 0
    unknown = sorted(set(flat) - set("ELtm"))
    if unknown:
        raise ValueError(f"{flag}: unknown letters {unknown}; Megatron-LM's are E (embedding), "
                         "t (decoder layer), m (multi-token prediction), L (loss)")
    if len(stages) % p:
        raise ValueError(f"{flag}: its {len(stages)} virtual stages must be a multiple of p={p}")
    if (flat[:1], flat[-1:], flat.count("E"), flat.count("L")) != ("E", "L", 1, 1):
        raise ValueError(f"{flag}: E must open it and L close it, once each "
                         "(Megatron-LM's validate_layer_layout)")
    if (flat.count("t"), flat.count("m")) != (L, mtp):
        raise ValueError(f"{flag}: it holds {flat.count('t')} decoder layers and "
                         f"{flat.count('m')} MTP modules; --num-layers {L} and --mtp-num-layers "
                         f"{mtp_num_layers} must match")
    if "m" in "".join(stages[:-1]) or "t" in stages[-1].partition("m")[2]:
        raise ValueError(f"{flag}: the MTP modules must follow the decoder layers in the last "
                         "virtual stage, with the loss: modules in a stage of their own "
                         "(Megatron-LM's mtp_standalone) are not modelled")
    v = len(stages) // p
    return v, tuple(tuple(stages[c * p + i].count("t") for c in range(v)) for i in range(p))


def virtual_stages(a: dict, model, p: int) -> tuple[int, tuple | None]:
    """``(v, stage_layers)``: model chunks per GPU (Megatron-LM's virtual
    pipeline stages) and, from ``--pipeline-model-parallel-layout``, each
    chunk's layers (:func:`layout_stage_layers`; else None)."""
    per_stage, stages, layout = a["num_layers_per_virtual_pipeline_stage"], \
        a["num_virtual_stages_per_pipeline_rank"], a["pipeline_model_parallel_layout"]
    given = [flag for flag, value in (("--num-layers-per-virtual-pipeline-stage", per_stage),
                                      ("--num-virtual-stages-per-pipeline-rank", stages),
                                      ("--pipeline-model-parallel-layout", layout)) if value]
    if len(given) > 1:
        raise ValueError(f"{' with '.join(given)}: Megatron-LM takes one (arguments.py)")
    if layout:
        return layout_stage_layers(layout, p, model.L, model.mtp_num_layers)
    if per_stage:
        if model.L % (p * per_stage):
            raise ValueError(f"--num-layers-per-virtual-pipeline-stage {per_stage}: p={p} times "
                             f"it must divide --num-layers {model.L}")
        return model.L // (p * per_stage), None
    return stages or 1, None
