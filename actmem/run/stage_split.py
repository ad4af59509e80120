"""How many Transformer layers each pipeline stage (and each model chunk) builds.

By default every stage gets ``L/p`` layers, and ``p`` must divide ``L``. Real
models are split unevenly, to relieve the first stage (embedding) or the last
(output layer, logits and loss). Megatron-LM's rules
(``megatron/core/transformer/transformer_block.py``, ``get_num_layers_to_build``,
and the checks of ``transformer_config.py``), with its flags in snake_case:

* ``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers``
  (``--decoder-first-pipeline-num-layers``, ``--decoder-last-pipeline-num-layers``):
  the first (last) stage gets that many layers (at least 1); the remaining
  stages share the rest equally, at least one layer each;
* ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``:
  the embedding (the loss) counts as one layer, so ``L+1`` (``L+2``) must be a
  multiple of ``p`` and the first (last) stage builds one layer fewer;
* the two families cannot be combined. With ``v`` model chunks per stage each
  stage's count must be a multiple of ``v``; the embedding (loss) takes its
  layer from the first (last) chunk.

``stage_layers`` gives the counts directly (Megatron-LM's
``--pipeline-model-parallel-layout`` written as numbers).
"""

from __future__ import annotations

from .training import chunk_layers
from ..validate import flag, integer, lists_keywords, positive_int, shown


@lists_keywords
def split_layers(L: int, p: int, v: int = 1, *, stage_layers=None,
                 decoder_first_pipeline_num_layers: int | None = None,
                 decoder_last_pipeline_num_layers: int | None = None,
                 account_for_embedding_in_pipeline_split: bool = False,
                 account_for_loss_in_pipeline_split: bool = False
                 ) -> tuple[tuple[int, ...], ...]:
    """Layers of every model chunk of every stage: ``result[i][c]``.

    Args:
        L: Transformer layers. p: pipeline stages. v: model chunks per stage.
        stage_layers: layers per stage, ``p`` non-negative ints summing to L.
        decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers,
        account_for_embedding_in_pipeline_split,
        account_for_loss_in_pipeline_split: Megatron-LM's options (module
            docstring).

    Returns:
        p tuples of v ints.

    Raises:
        TypeError, ValueError: a value of the wrong kind, options that cannot
            be combined, or counts that do not add up or do not divide; the
            message names the argument and what is allowed.

    >>> split_layers(126, 16, decoder_first_pipeline_num_layers=7,
    ...              decoder_last_pipeline_num_layers=7)[:2]
    ((7,), (8,))
    >>> split_layers(31, 4, account_for_embedding_in_pipeline_split=True)
    ((7,), (8,), (8,), (8,))
    """
    L, p, v = (positive_int(name, x) for name, x in (("L", L), ("p", p), ("v", v)))
    first, last = decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers
    embedding = flag("account_for_embedding_in_pipeline_split",
                     account_for_embedding_in_pipeline_split)
    loss = flag("account_for_loss_in_pipeline_split", account_for_loss_in_pipeline_split)
    _refuse_mixtures(stage_layers, first, last, embedding, loss)
    if stage_layers is not None:
        counts = _given(stage_layers, L, p)
    elif not (first is not None or last is not None or embedding or loss):
        return ((chunk_layers(L, p, v),) * v,) * p   # the even split, its rule and message
    elif first is not None or last is not None:
        counts = _first_last(L, p, first, last)
    else:
        counts = _accounted(L, p, embedding, loss)
    return _chunks(counts, v, embedding, loss)


def _refuse_mixtures(stage_layers, first, last, embedding, loss) -> None:
    families = {"stage_layers": stage_layers is not None,
                "decoder_first/last_pipeline_num_layers": first is not None or last is not None,
                "account_for_embedding/loss_in_pipeline_split": embedding or loss}
    chosen = [name for name, used in families.items() if used]
    if len(chosen) > 1:
        raise ValueError(f"{' and '.join(chosen)} cannot be combined (Megatron-LM refuses "
                         "it too); choose one way to split the layers")


def _given(stage_layers, L: int, p: int) -> list[int]:
    if not isinstance(stage_layers, (tuple, list)):  # not a str, a dict or an array
        raise TypeError(f"stage_layers must be a tuple of p={p} ints, got "
                        f"{shown(stage_layers)} ({type(stage_layers).__name__})")
    if len(stage_layers) != p:  # before reading a long one
        raise ValueError(f"stage_layers has {len(stage_layers)} entries; it must give "
                         f"p={p} stages whose layers sum to L={L}")
    counts = [_count(f"stage_layers[{i}]", n) for i, n in enumerate(stage_layers)]
    if len(counts) != p or sum(counts) != L:
        raise ValueError(f"stage_layers={tuple(counts)} must give p={p} stages whose "
                         f"layers sum to L={L}")
    return counts


def _count(name: str, value) -> int:
    """A layer count: an int >= 0."""
    count = integer(name, value, "an int >= 0")
    if count < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return count


def _first_last(L: int, p: int, first, last) -> list[int]:
    ends = {0: first, p - 1: last}
    given = {i: _count(name, n) for (i, n), name in zip(
        ends.items(), ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"))
        if n is not None}
    for name, n in zip(("decoder_first_pipeline_num_layers",
                        "decoder_last_pipeline_num_layers"), (first, last)):
        if n is not None and n < 1:   # transformer_config.py: "must be larger than 0"
            raise ValueError(f"{name}={n} must be an int >= 1 (Megatron-LM refuses 0)")
    rest, stages = L - sum(given.values()), p - len(given)
    # transformer_config.py: middle stages and middle layers both or neither
    if rest < 0 or bool(rest) != bool(stages) or (stages and rest % stages):
        raise ValueError(f"decoder_first_pipeline_num_layers={first}, "
                         f"decoder_last_pipeline_num_layers={last}: the other {stages} "
                         f"stage(s) must share the remaining {rest} of L={L} layers equally, "
                         "at least one layer each")
    return [given.get(i, rest // stages if stages else 0) for i in range(p)]


def _accounted(L: int, p: int, embedding: bool, loss: bool) -> list[int]:
    slots = L + embedding + loss
    if slots % p:
        extra = " + 1 (embedding)" * embedding + " + 1 (loss)" * loss
        raise ValueError(f"p={p} must divide L={L}{extra} = {slots} (each stage gets "
                         "the same number of layers)")
    counts = [slots // p] * p
    counts[0] -= embedding
    counts[-1] -= loss
    return counts


def _chunks(counts: list[int], v: int, embedding: bool, loss: bool):
    if v == 1:
        return tuple((n,) for n in counts)
    slots = [n + (i == 0) * embedding + (i == len(counts) - 1) * loss
             for i, n in enumerate(counts)]
    if any(n % v for n in slots):
        raise ValueError(f"layers per stage {tuple(counts)} must each be a multiple of "
                         f"v={v} (each of the v model chunks gets the same number)")
    chunks = [[n // v] * v for n in slots]
    chunks[0][0] -= embedding
    chunks[-1][-1] -= loss
    return tuple(map(tuple, chunks))
