"""One whole training step measured two ways, against ``training_memory``'s timeline.

The model of :mod:`.step_model` (embedding, reference layers, final norm,
tied output layer, a loss of :mod:`.step_losses`, and Megatron-LM's
gradient buffer with fp32 main parameters and fused Adam, or plain
PyTorch's Adam on fp32 parameters, in fp32 or under ``torch.autocast``)
trains one step of ``m`` micro-batches (gradient accumulation, p = 1). The
bytes alive are tracked by

1. PyTorch's own ``torch.distributed._tools.mem_tracker.MemTracker`` (a
   ``TorchDispatchMode``: every storage an operation returns is added, and
   subtracted by a weak-reference callback when it is freed; its peak is
   taken after each operation), and
2. :class:`~.live_bytes.LiveBytes`: the same principle, keyed by the C++
   storage, with the step's moments labelled (:func:`train_step`), so the
   peak of each moment can be set beside the timeline's event of the same
   name (:mod:`actmem.run.moments.timeline`).

What neither sees: memory an operator allocates and frees inside itself
(below the dispatcher). Checked with the profiler's CPU allocator events:
``torch.optim.Adam(fused=True)``'s CPU kernel allocates 12 bytes of scalars
per step, nothing parameter-sized; but ``main_grad.add_(grad)`` (fp32 +=
bf16) makes a hidden fp32 copy of the gradient on CPU (TensorIterator casts
a mixed-dtype input; CUDA casts inside the kernel). Device workspaces do not
exist on CPU: the timeline is asked for none (``transformer_engine=False``,
``cublas_workspace_config=":0:0"``); on a CUDA GPU see :mod:`.step_device`.
The configurations are :data:`CONFIGS` (:mod:`.stored_step`).
"""
from __future__ import annotations

import warnings
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

from ..run.peak import training_memory
from .live_bytes import LiveBytes
from .step_device import check_device, device_configs, workspace_config
from .stored_step import CONFIGS, StepConfig, step_table
from .step_losses import LOSS_FUNCTIONS, fused_loss
from .step_mtp import mtp_hidden
from .step_model import (GPT, GradientBuffer, MixedPrecisionAdam, PlainAdam, get_batch,
                         reduce_loss)

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "autocast": torch.float32}
"""The parameters' dtype under each ``precision``."""

__all__ = ["CONFIGS", "LiveBytes", "measure", "measurement", "step_table", "train_step"]


def build(config: StepConfig, gpt: GPT | None = None):
    """``(gpt, optimizer, tensors alive before the step)``, Adam's states
    made (:meth:`MixedPrecisionAdam.init_states`)."""
    gpt = gpt or GPT(config.model, config.recompute, dtype=DTYPES[config.precision])
    params = list(gpt.parameters())
    buffer = GradientBuffer(params) if config.gradient_buffer == "persistent" else None
    optimizer = (MixedPrecisionAdam(params, buffer) if config.precision == "bf16"
                 else PlainAdam(params))
    optimizer.init_states()
    kept = params + optimizer.tensors() + ([buffer.data] if buffer else [])
    return gpt, optimizer, kept


def fake_gpt(config: StepConfig, mode) -> GPT:
    """The model with FakeTensor parameters of ``mode`` (no memory).

    Built on the meta device, then each parameter becomes a fake CPU
    tensor: ``Module.to(bfloat16)`` cannot run under ``FakeTensorMode`` in
    torch 2.13 (it swaps the parameters, and a fake ``nn.Parameter`` has a
    weak reference, so ``torch.utils.swap_tensors`` refuses)."""
    with torch.device("meta"):
        gpt = GPT(config.model, config.recompute, dtype=DTYPES[config.precision])
    convert = mode.fake_tensor_converter.from_meta_and_device
    with mode:
        for module in gpt.modules():
            for name, p in list(module._parameters.items()):
                module._parameters[name] = nn.Parameter(
                    convert(mode, p, torch.device("cpu")))
    return gpt


def train_step(gpt: GPT, optimizer: MixedPrecisionAdam, config: StepConfig,
               live: LiveBytes) -> None:
    """One optimizer step of ``config.m`` micro-batches, forward then
    backward each (1F1B at p = 1), the moments labelled on ``live`` with
    the timeline's event labels."""
    m = config.m
    live.mark("before the step")
    for i in range(m):
        name = f"micro-batch {i}"
        live.enter(f"forward of {name}")
        loss = _forward(gpt, config, i, live)
        live.mark(f"after the forward of {name}")
        live.enter(f"loss backward of {name}")
        loss.backward()
        del loss
        live.mark(f"after the backward of {name}")
    live.enter("optimizer step")
    optimizer.step()
    live.mark("after the step")
    live.enter("after the step")


def _forward(gpt, config, i, live):
    """Micro-batch ``i``'s forward step: batch, model, loss (Megatron-LM's
    ``forward_step``; the batch dies with it), under ``torch.autocast`` (bf16)
    for ``precision="autocast"``, the loss inside it as PyTorch's AMP recipe
    has it. The final norm starts the
    loss's moment (its input is the timeline's output activation); the
    backward moments are entered by gradient hooks."""
    name = f"micro-batch {i}"

    def at_norm(module, args):
        live.enter(f"loss of {name}")

    def after_norm(module, args, out):
        out.register_hook(lambda grad: live.enter(f"backward of {name}"))

    last = gpt.mtp[-1].norm if gpt.mtp else gpt.norm   # the first layer differentiated
    hooks = (gpt.norm.register_forward_pre_hook(at_norm),
             last.register_forward_hook(after_norm))
    device = torch.get_default_device()
    batch = {k: v.to(device) for k, v in get_batch(config.model, i).items()}
    autocast = torch.autocast(device.type, torch.bfloat16,
                              enabled=config.precision == "autocast")
    with autocast:
        out = gpt(batch["tokens"], batch["position_ids"],
                  logits=config.loss != "fused" and not gpt.mtp)
        if gpt.mtp:
            out = F.linear(mtp_hidden(gpt, out, batch, LOSS_FUNCTIONS[config.loss]),
                           gpt.word.weight)
        for hook in hooks:
            hook.remove()
        if config.loss == "fused":
            losses = fused_loss(out, gpt.word.weight, batch["labels"], config.chunk())
        else:
            out.register_hook(lambda grad: live.enter(f"output layer backward of {name}"))
            losses = LOSS_FUNCTIONS[config.loss](out, batch["labels"])
        tokens = config.model.s * config.model.b
        return reduce_loss(losses, batch["loss_mask"], tokens * config.m)


def run(config: StepConfig, fake: bool = False, device: str = "cpu") -> dict:
    """Measure one step of ``config``: MemTracker's peak, :class:`LiveBytes`'
    peak and its moments (bytes). ``fake``: under ``FakeTensorMode``
    (nothing is allocated; the configuration must have no dropout).
    ``device="cuda"``: on the GPU, adding ``cuda_max_memory_allocated``
    (:mod:`.step_device`)."""
    mode = FakeTensorMode() if fake else nullcontext()
    gpt = fake_gpt(config, mode) if fake else None
    cuda = device == "cuda"
    with mode, torch.device(device), warnings.catch_warnings():
        # MemTracker's post-accumulate hook runs after the gradient buffer's
        # hook has set .grad to None (it only relabels; bytes are unchanged)
        warnings.filterwarnings("ignore", "Expected a tensor", UserWarning)
        gpt, optimizer, kept = build(config, gpt)
        live, tracker = LiveBytes(), MemTracker()
        live.track(*kept)
        tracker.track_external(gpt, optimizer.adam, *kept)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        with tracker, live:
            train_step(gpt, optimizer, config, _Resetting(live, tracker))
    allocator = {"cuda_max_memory_allocated": torch.cuda.max_memory_allocated()} if cuda else {}
    return {"memtracker_peak": max(tracker._peak_mem.values()),
            "counter_peak": live.peak, "counter_peak_moment": live.peak_phase,
            **allocator, "moments": _moments(live)}


class _Resetting:
    """:class:`LiveBytes`' labels, and MemTracker's module statistics reset
    before each forward (MemTracker refuses a second call of the root
    module otherwise; its byte counts are kept)."""

    def __init__(self, live: LiveBytes, tracker: MemTracker):
        self.live, self.tracker = live, tracker
        self.mark = live.mark

    def enter(self, phase: str) -> None:
        if phase.startswith("forward of"):
            self.tracker.reset_mod_stats()
        self.live.enter(phase)


SCORES, SOFTMAX_GRADIENT = "after the last _softmax", "after the first _softmax_backward_data"
"""Measured moments inside a phase: the last layer's attention softmax in
its forward, and its softmax gradient in backward (the first one
differentiated)."""


def _moments(live: LiveBytes) -> dict[str, int]:
    """Label -> bytes, in order: the marks, each phase's most alive
    (``"<phase>: most alive"``), and the moments :data:`SCORES` and
    :data:`SOFTMAX_GRADIENT` where the phase has them."""
    moments = dict(live.marks)
    for phase, most in live.peaks.items():
        moments[f"{phase}: most alive"] = most
        if (phase, "_softmax") in live.after_op and phase.startswith("forward of"):
            moments[f"{phase}: {SCORES}"] = live.after_op[phase, "_softmax"][1]
        if (phase, "_softmax_backward_data") in live.after_op:
            moments[f"{phase}: {SOFTMAX_GRADIENT}"] = live.after_op[
                phase, "_softmax_backward_data"][0]
    return moments


def timeline(config: StepConfig, args: dict | None = None):
    """``training_memory``'s stage-0 timeline for ``config`` (``args``: its
    keyword arguments, default the CPU's: no workspace)."""
    args = config.timeline_args() if args is None else args
    return training_memory(config.model, **args).stages[0].timeline


def measure(name: str, device: str = "cpu") -> dict:
    """Configuration ``name`` measured and set beside its timeline: bytes,
    the relative difference at the peak (against MemTracker on CPU,
    ``torch.cuda.max_memory_allocated()`` on CUDA), and per timeline event
    the measured bytes of the moment with the same label.

    Raises:
        KeyError: an unknown name (:data:`CONFIGS`). ValueError: a
            ``device`` that is not here or cannot run it (:mod:`.step_device`).
    """
    config = CONFIGS[name]
    check_device(device, [name])
    measured = run(config, fake=config.fake, device=device)
    args = config.timeline_args(device, workspace_config(device))
    line = timeline(config, args)
    peak = line.peak
    reference = measured.get("cuda_max_memory_allocated", measured["memtracker_peak"])
    events = [{"label": e.label, "timeline": e.total,
               "measured": _measured_at(measured["moments"], e.label)}
              for e in line.events]
    return {"name": name, "title": config.title, "fake": config.fake,
            "device": device, "model": config.model_args(), "training_memory": args,
            **{k: v for k, v in measured.items() if k != "moments"},
            "timeline_peak": peak.total, "timeline_peak_event": peak.label,
            "relative_difference": (reference - peak.total) / peak.total,
            "events": events, "moments": measured["moments"]}


def _measured_at(moments: dict[str, int], label: str) -> int | None:
    """The measured bytes at the timeline event ``label``: a mark of the
    same label; inside a forward, the last layer's softmax (attention
    scores beside it); inside a backward, its softmax gradient; else the
    most alive in the phase of that name (None if there is none)."""
    if label in moments:
        return moments[label]
    phase, _, inside = label.partition(": ")
    key = {"attention scores": SCORES, "softmax gradient": SOFTMAX_GRADIENT}.get(
        " ".join(inside.split(" ")[:2]).rstrip(","), "most alive")
    return moments.get(f"{phase}: {key}")


def measurement(names=None, device: str = "cpu") -> dict:
    """Every configuration that runs on ``device`` (or ``names``) measured:
    ``{"torch": version, "device": device, "configs": {name: measure(name)}}``.

    Raises:
        ValueError: as :func:`measure`, before anything runs.
    """
    names = device_configs(device) if names is None else list(names)
    check_device(device, names)
    return {"torch": torch.__version__.split("+")[0], "device": device,
            "configs": {n: measure(n, device) for n in names}}
