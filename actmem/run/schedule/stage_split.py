"""How many Transformer layers each pipeline stage (and each model chunk) builds.

By default every stage gets ``L/p`` layers, and ``p`` must divide ``L``. Real
models are split unevenly, to relieve the first stage (embedding) or the last
(output layer, logits and loss). Megatron-LM's rules
(``megatron/core/transformer/transformer_block.py``, ``get_num_layers_to_build``,
and the checks of ``transformer_config.py``), with its flags in snake_case:

* ``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers``
  (``--decoder-first-pipeline-num-layers``, ``--decoder-last-pipeline-num-layers``):
  the first (last) stage gets that many layers (at least 1); the remaining
  stages share the rest equally, at least one layer each. At ``p=1`` the one
  stage is both the first and the last: it builds all L layers, so either
  value must be L (``transformer_config.py`` leaves no layers for the 0
  middle stages: ``Mismatch: ... middle layers remaining but 0 middle PP
  stages``);
* ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``:
  the embedding (the loss) counts as one layer, so ``L+1`` (``L+2``) must be a
  multiple of ``p`` and the first (last) stage builds one layer fewer;
* the two families cannot be combined. With ``v`` model chunks per stage each
  stage's count must be a multiple of ``v``; the embedding (loss) takes its
  layer from the first (last) chunk.

``stage_layers`` gives the counts directly: p ints (each stage's, split
evenly over its v chunks), or p tuples of v ints, each chunk's (Megatron-LM's
``--pipeline-model-parallel-layout`` written as numbers,
:func:`actmem.run.job.megatron_layout.layout_stage_layers`).
"""

from __future__ import annotations

from .training import chunk_layers
from ...validate import flag, integer, lists_keywords, positive_int, shown


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
        stage_layers: layers per stage, ``p`` non-negative ints summing to L,
            or per chunk, ``p`` tuples of ``v`` such ints.
        decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers,
        account_for_embedding_in_pipeline_split,
        account_for_loss_in_pipeline_split: Megatron-LM's options (module
            docstring).

    Returns:
        p tuples of v ints.

    Raises:
        TypeError, ValueError: a value of the wrong kind, options that cannot
            be combined, or counts that do not add up or do not divide; the
            message names the argument at fault first, its value and what is
            allowed (``decoder_last_pipeline_num_layers=40 must be at most L -
            (p-1) = 31 ...``).

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
    if stage_layers is not None and _per_chunk(stage_layers):
        return _given_chunks(stage_layers, L, p, v)
    if stage_layers is not None:
        counts, names = _given(stage_layers, L, p), [f"stage_layers[{i}]" for i in range(p)]
    elif not (first is not None or last is not None or embedding or loss):
        return ((_even(L, p, v),) * v,) * p
    elif first is not None or last is not None:
        counts, names = _first_last(L, p, v, first, last), [None] * p  # checked for v there
    else:
        counts, names = _accounted(L, p, embedding, loss), [None] * p
    return _chunks(counts, v, embedding, loss, names)


FIRST_LAST = ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")


def _refuse_mixtures(stage_layers, first, last, embedding, loss) -> None:
    families = [[("stage_layers", stage_layers)],
                [(name, n) for name, n in zip(FIRST_LAST, (first, last))],
                [("account_for_embedding_in_pipeline_split", embedding),
                 ("account_for_loss_in_pipeline_split", loss)]]
    chosen = [[f"{name}={shown(x)}" for name, x in family
               if x is not None and x is not False]
              for family in families]
    chosen = [" and ".join(given) for given in chosen if given]
    if len(chosen) > 1:
        raise ValueError(f"{chosen[0]} cannot be combined with {chosen[1]} (Megatron-LM "
                         "refuses it too); choose one way to split the layers: stage_layers, "
                         "decoder_first/last_pipeline_num_layers or "
                         "account_for_embedding/loss_in_pipeline_split")


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


def _per_chunk(stage_layers) -> bool:
    """``stage_layers`` gives each chunk's layers (tuples or lists inside)."""
    return isinstance(stage_layers, (tuple, list)) and any(
        isinstance(n, (tuple, list)) for n in stage_layers)


def _given_chunks(stage_layers, L: int, p: int, v: int) -> tuple[tuple[int, ...], ...]:
    """``stage_layers`` as p tuples of v chunk counts summing to L."""
    allowed = f"p={p} tuples of v={v} ints >= 0 summing to L={L}"
    if len(stage_layers) != p or not all(isinstance(chunks, (tuple, list))
                                         and len(chunks) == v for chunks in stage_layers):
        raise ValueError(f"stage_layers={shown(stage_layers)} per chunk must be {allowed}")
    counts = tuple(tuple(_count(f"stage_layers[{i}][{c}]", n) for c, n in enumerate(chunks))
                   for i, chunks in enumerate(stage_layers))
    if sum(map(sum, counts)) != L:
        raise ValueError(f"stage_layers={counts} must be {allowed}")
    return counts


def _count(name: str, value) -> int:
    """A layer count: an int >= 0."""
    count = integer(name, value, "an int >= 0")
    if count < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return count


def _first_last(L: int, p: int, v: int, first, last) -> list[int]:
    """Megatron-LM's ``transformer_config.py`` checks, each message naming
    the value at fault (the last one, when both are given and do not fit)."""
    given = {name: _count(name, n) for name, n in zip(FIRST_LAST, (first, last))
             if n is not None}
    for name, n in given.items():
        if n < 1:   # transformer_config.py: "must be larger than 0"
            raise ValueError(f"{name}={n} must be an int >= 1 (Megatron-LM refuses 0)")
    if p == 1:
        for name, n in given.items():
            if n != L:
                raise ValueError(
                    f"{name}={n} must be L={L} (or None) at p=1: the one stage is both the "
                    "first and the last and builds all L layers (Megatron-LM's "
                    "transformer_config.py leaves no layers to 0 middle stages)")
        return [L]
    layers, stages, taken = L, p, {}   # what the stages not yet named share
    for name, n in given.items():
        stages -= 1
        _fits(name, n, L, p, v, layers, stages, taken, share=len(taken) == len(given) - 1)
        layers -= n
        taken[name] = n
    counts = [layers // stages if stages else 0] * p
    counts[0] = given.get(FIRST_LAST[0], counts[0])
    counts[-1] = given.get(FIRST_LAST[1], counts[-1])
    return counts


def _fits(name: str, n: int, L: int, p: int, v: int, layers: int, stages: int, taken: dict,
          share: bool) -> None:
    """Refuse ``name=n`` unless it is a multiple of ``v``, leaves each of
    the other ``stages`` stages a layer of the ``layers`` that ``taken``
    (the values given before it) left and, where it is the last value
    given (``share``), unless those stages can share what it leaves
    equally, a multiple of v each."""
    rest = layers - n
    known = ", ".join([f"L={L}", f"p={p}", *(f"{k}={x}" for k, x in taken.items())])
    bound = "L" + "".join(f" - {k}" for k in taken) + f" - (p-{p - stages})"
    if n % v:   # transformer_config.py: "must be divisible by virtual pipeline parallel degree"
        raise ValueError(f"{name}={n} must be a multiple of v={v} ({known}): each of the "
                         "stage's v model chunks gets the same number of layers")
    if rest < stages or (share and not stages and rest):
        why = (f"the other {stages} stage(s) must share the remaining {max(rest, 0)} of "
               f"L={L} layers, at least one layer each" if stages else
               f"the first and the last stage hold all L={L} layers")
        raise ValueError(f"{name}={n} must be {'at most' if stages else 'exactly'} {bound} = "
                         f"{layers - stages} ({known}): {why}")
    if share and stages and rest % stages:   # transformer_config.py: middle layers divisible
        below = n - (n - layers) % stages
        near = " or ".join(str(x) for x in (below, below + stages) if x >= 1)
        raise ValueError(f"{name}={n} must leave a multiple of {stages} layers ({known}): "
                         f"the other {stages} stage(s) must share the remaining {rest} of "
                         f"L={L} layers equally; the nearest such {name}: {near}")
    if share and stages and rest // stages % v:
        raise ValueError(f"{name}={n} leaves {rest // stages} layers to each of the other "
                         f"{stages} stage(s) ({known}), which must be a multiple of v={v}: "
                         "each of a stage's v model chunks gets the same number of layers")


def _even(L: int, p: int, v: int) -> int:
    """The even split's layers per chunk (:func:`chunk_layers`, its rule),
    its refusal naming the uneven splits a launch can ask for instead."""
    try:
        return chunk_layers(L, p, v)
    except ValueError as error:
        raise ValueError(f"{error}; or split unevenly: decoder_first_pipeline_num_layers, "
                         "decoder_last_pipeline_num_layers or stage_layers (Megatron-LM's "
                         "--decoder-first-pipeline-num-layers, "
                         "--decoder-last-pipeline-num-layers)") from None


def _accounted(L: int, p: int, embedding: bool, loss: bool) -> list[int]:
    slots = L + embedding + loss
    if slots % p:
        flags = " and ".join(f"account_for_{name}_in_pipeline_split=True" for name, on in
                             (("embedding", embedding), ("loss", loss)) if on)
        extra = " + 1 (embedding)" * embedding + " + 1 (loss)" * loss
        raise ValueError(f"{flags}: p={p} must divide L={L}{extra} = {slots} (each stage "
                         "gets the same number of layers, counting the embedding/loss as "
                         f"one); choose a p that divides {slots}, or leave the option False")
    counts = [slots // p] * p
    counts[0] -= embedding
    counts[-1] -= loss
    return counts


def _chunks(counts: list[int], v: int, embedding: bool, loss: bool, names: list):
    """The v chunks of each stage; ``names[i]``: the argument that gave
    stage i's count (None: one the others leave)."""
    if v == 1:
        return tuple((n,) for n in counts)
    slots = [n + (i == 0) * embedding + (i == len(counts) - 1) * loss
             for i, n in enumerate(counts)]
    for i, n in enumerate(slots):
        if n % v and names[i]:
            raise ValueError(f"{names[i]}={counts[i]} must be a multiple of v={v} (each of "
                             "the stage's v model chunks gets the same number of layers)")
        if n % v:
            counted = ", the embedding/loss counted as a layer" if embedding or loss else ""
            raise ValueError(f"v={v} must divide the {n} layers of stage {i} (layers per "
                             f"stage {tuple(counts)}{counted}): each of a stage's v model "
                             "chunks gets the same number")
    chunks = [[n // v] * v for n in slots]
    chunks[0][0] -= embedding
    chunks[-1][-1] -= loss
    return tuple(map(tuple, chunks))
