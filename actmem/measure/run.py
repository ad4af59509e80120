"""Measure one rank of the reference layer: what autograd saves, in bytes.

:func:`measure_layer` runs one forward pass of
:class:`.layer.ReferenceLayer` under a :class:`.saved.Recorder` and
returns every saved storage. With ``config.t > 1`` it must run inside a
``torch.distributed`` process group of t ranks (see :mod:`.launch`); it
then also checks that the dropout masks of the replicated regions are the
same on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ..layer.config import LayerConfig
from ..layer.ledger import DROPOUT_ROWS
from .layer import ReferenceLayer, layer_input
from .saved import Recorder, SavedStorage


@dataclass(frozen=True)
class Measurement:
    """What one rank's layer saved for backward.

    Attributes:
        config: the layer (``config.t`` ranks).
        rank: this rank.
        mask: dropout mask storage (``"bool"`` or ``"noise"``).
        storages: every saved storage, parameters excluded, bytes exact.
        same_on_ranks: for each dropout mask the layer made, whether all
            ranks drew the same one (empty at t = 1).
    """

    config: LayerConfig
    rank: int
    mask: str
    storages: tuple[SavedStorage, ...]
    same_on_ranks: dict[str, bool] = field(default_factory=dict)


def measure_layer(config: LayerConfig, rank: int = 0, mask: str = "bool"
                  ) -> Measurement:
    """One forward pass of rank ``rank``'s layer, recorded.

    Raises:
        ValueError: see :class:`.layer.ReferenceLayer`.
    """
    layer = ReferenceLayer(config, rank, mask=mask)
    with Recorder(layer.parameters()) as rec:
        out = layer(layer_input(config))
    same = _masks_agree(rec) if config.t > 1 else {}
    return Measurement(config, rank, mask, rec.storages(out), same)


def recorded(layer, config: LayerConfig, mask: str = "bool", rank: int = 0) -> Measurement:
    """One forward pass of ``layer``, a reference layer of ``config`` on
    rank ``rank`` (one process), on :func:`.layer.layer_input`: every saved
    storage recorded, parameters excluded."""
    with Recorder(layer.parameters()) as rec:
        out = layer(layer_input(config))
    return Measurement(config, rank, mask, rec.storages(out))


def _masks_agree(rec: Recorder) -> dict[str, bool]:
    """All-gather each dropout mask and compare it with rank 0's."""
    agree = {}
    for key in DROPOUT_ROWS:
        mask = rec.tensor(key)
        if key == "attn_dropout_output" or mask is None:
            continue
        mine = mask.to(torch.uint8)
        every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(every, mine)
        agree[key] = all(torch.equal(every[0], m) for m in every)
    return agree
