"""FSDP2 (``fully_shard``) measured: one training step on 2 gloo CPU ranks.

The small GPT of :mod:`.step_model` in fp32 with an untied output layer,
each layer and then the whole model wrapped by
``torch.distributed.fsdp.fully_shard`` (the root keeps the word and position
tables, the final norm and the output layer), with torchtitan's mixed
precision policy ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``,
trains one step with ``torch.optim.Adam(fused=True)`` on the sharded
parameters. Adam's states are made before the step (as every step after
the first has them, :class:`.step_model.PlainAdam`). The loss is
``F.cross_entropy`` on ``logits.float()`` (:func:`.step_losses.torch_cross_entropy`).

PyTorch's own ``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker``
counts every storage by FSDP's categories (sharded and unsharded parameters
and gradients, the all-gather outputs, the reduce-scatter inputs,
activations, temporaries of the backward, optimizer states); its peak and
the categories at that moment are set beside the timeline of
:func:`actmem.training_memory` with ``use_torch_fsdp2=True``
(:mod:`actmem.run.model_states.fsdp`) at d = 2.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultReduceScatter

from ..run.job.model import ModelConfig
from ..run.peak import training_memory
from .launch import on_ranks
from .step_losses import torch_cross_entropy
from .step_model import GPT, get_batch, reduce_loss

MODEL = dict(s=16, b=1, h=128, a=4, L=4, vocab_size=1000, flash_attention=True,
             dropout=False, tied_embeddings=False)
"""The measured GPT's shape: small, with parameters that outweigh one layer's
activations (as in a large FSDP job at a small micro-batch); untied, as
Megatron-LM's ``--use-torch-fsdp2`` requires."""

TIMELINE_ARGS = dict(d=2, loss="torch", gradient_buffer="backward", fused_projections=False,
                     autocast_device="cpu", create_attention_mask_in_dataloader=False,
                     transformer_engine=False, cublas_workspace_config=":0:0",
                     use_torch_fsdp2=True)
"""``training_memory``'s arguments for this step (no workspace on CPU; the
batch's mask is not made: the reference layer builds its own)."""

CATEGORIES = {"Sharded Param": "sharded_parameters", "Unsharded Param": "unsharded_parameters",
              "Sharded Grad": "sharded_gradients", "Unsharded Grad": "unsharded_gradients",
              "All Gather": "all_gather", "Reduce Scatter": "reduce_scatter",
              "Activation": "activations", "Temp": "temporaries", "OptState": "optimizer",
              "Buffer": "buffers", "Inputs": "inputs"}
"""FSDPMemTracker's categories (``_FSDPRefType``) -> the names reported here."""


class InPlaceReduceScatter(DefaultReduceScatter):
    """FSDP2's reduce-scatter done as NCCL's ``reduce_scatter`` allocates:
    nothing beside its input and output. Gloo's ``reduce_scatter_tensor``
    works on a copy of its input (FSDPMemTracker sees a storage of the
    input's size from the collective to the next operation), which a GPU
    job does not have; here the input is summed in place by ``all_reduce``
    and this rank's chunk copied to the output (``fully_shard``'s
    ``set_custom_reduce_scatter``)."""

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        torch.distributed.all_reduce(input_tensor, op=op, group=group)
        output_tensor.copy_(input_tensor.view(group.size(), -1)[group.rank()])


class UntiedGPT(GPT):
    """:class:`.step_model.GPT` with its own output layer (``output``, V x h,
    no bias), as Megatron-LM's ``--untie-embeddings-and-output-weights``."""

    def __init__(self, model: ModelConfig, dtype: torch.dtype):
        super().__init__(replace(model, tied_embeddings=True), dtype=dtype)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1)
            self.output = torch.nn.Linear(model.h, model.padded_vocab(1), bias=False,
                                          dtype=dtype)

    def forward(self, tokens, position_ids):
        return self.output(super().forward(tokens, position_ids, logits=False))


def fsdp_step(rank: int, model_fields: dict, reshard_after_forward: bool,
              in_place: bool = True) -> dict:
    """On rank ``rank`` of a 2-rank gloo group: one step of the FSDP2 GPT
    (``in_place``: with :class:`InPlaceReduceScatter`, else gloo's).

    Returns ``{"peak": bytes, "categories": {name: bytes at the peak}}``
    (FSDPMemTracker's peak snapshot, names of :data:`CATEGORIES`)."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    model = ModelConfig(**model_fields)
    gpt = UntiedGPT(model, dtype=torch.float32)
    mesh = init_device_mesh("cpu", (torch.distributed.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in gpt.layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy,
                    reshard_after_forward=reshard_after_forward)
    fully_shard(gpt, mesh=mesh, mp_policy=policy)
    if in_place:
        for module in [*gpt.layers, gpt]:
            module.set_custom_reduce_scatter(InPlaceReduceScatter())
    adam = torch.optim.Adam(gpt.parameters(), lr=1e-4, fused=True)
    for p in gpt.parameters():
        p.grad = torch.zeros_like(p)
    adam.step()
    adam.zero_grad(set_to_none=True)
    batch = get_batch(model, 0)
    tracker = FSDPMemTracker(gpt, adam)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)
        with tracker:
            logits = gpt(batch["tokens"], batch["position_ids"])
            loss = reduce_loss(torch_cross_entropy(logits, batch["labels"]),
                               batch["loss_mask"], model.s * model.b)
            del logits
            loss.backward()
            del loss
            adam.step()
            adam.zero_grad(set_to_none=True)
    snap = next(iter(tracker.get_tracker_snapshot("peak").values()))
    return {"peak": snap["Total"],
            "categories": {CATEGORIES[str(k.value)]: v for k, v in snap.items()
                           if k != "Total" and v}}


REPEATS = 5
"""Steps measured per run: the smallest peak is kept. On CPU, gloo's work
threads hold a collective's tensors until the work completes, so a busy
machine can keep a finished reduce-scatter's buffers alive a little longer
(measured: 0.3-0.5 MB more at the peak, on one step in several, when other
processes shared the 2 cores); scheduling can only add such bytes, so the
smallest of several steps is the step in program order."""


def _both(rank: int, fields: dict, runs) -> list[dict]:
    return [min((fsdp_step(rank, fields, *run) for _ in range(REPEATS)),
                key=lambda measured: measured["peak"]) for run in runs]


def measure_fsdp(model_fields: dict | None = None,
                 runs=((True, True), (False, True), (True, False))) -> dict:
    """Both ranks' FSDP2 steps (:func:`fsdp_step`), one per
    ``(reshard_after_forward, in_place)`` in ``runs`` (each the smallest
    peak of :data:`REPEATS` steps), in one pair of processes:
    ``{run: [rank 0's, rank 1's]}``."""
    fields = dict(MODEL if model_fields is None else model_fields)
    ranks = on_ranks(_both, 2, fields, tuple(runs))
    return {run: [r[i] for r in ranks] for i, run in enumerate(runs)}


def measurement(model_fields: dict | None = None) -> dict:
    """The FSDP2 step measured (:func:`measure_fsdp`: resharding after
    forward or not with the in-place reduce-scatter, and gloo's own once)
    beside ``training_memory``'s timeline peak: ``{"torch", "model",
    "runs": [...]}``, each run with both ranks' peaks, rank 0's categories,
    the timeline's peak, its event and categories, and the relative
    difference of the larger measured peak (bytes)."""
    fields = dict(MODEL if model_fields is None else model_fields)
    runs = []
    for (reshard, in_place), ranks in measure_fsdp(fields).items():
        peak = training_memory(ModelConfig(**fields), **TIMELINE_ARGS,
                               reshard_after_forward=reshard).stages[0].timeline.peak
        most = max(r["peak"] for r in ranks)
        runs.append({"reshard_after_forward": reshard,
                     "reduce_scatter": "in place" if in_place else "gloo",
                     "measured_peaks": [r["peak"] for r in ranks],
                     "categories": ranks[0]["categories"], "timeline_peak": peak.total,
                     "timeline_peak_event": peak.label,
                     "timeline_categories": peak.by_category,
                     "relative_difference": (most - peak.total) / peak.total})
    return {"torch": torch.__version__.split("+")[0], "model": fields, "runs": runs}


def fsdp_table(data: dict) -> str:
    """:func:`measurement`'s result as text, one line per run."""
    lines = [f"{'reshard':>8} {'reduce-scatter':>14} {'measured':>10} {'timeline':>10} "
             f"{'diff':>7}  timeline's peak event"]
    for r in data["runs"]:
        lines.append(f"{str(r['reshard_after_forward']):>8} {r['reduce_scatter']:>14} "
                     f"{max(r['measured_peaks']):>10} {r['timeline_peak']:>10} "
                     f"{r['relative_difference']:>+7.2%}  {r['timeline_peak_event']}")
    return "\n".join(lines)
