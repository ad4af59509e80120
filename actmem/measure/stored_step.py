"""The configurations :mod:`.step` measures, and its stored result, without torch.

This module imports no torch: it names the configurations (each with its
``training_memory`` arguments), reads the measurement stored in
``actmem/data/step_measured.json`` (written by ``python -m actmem.measure
step --json``; a test checks it against a fresh run) and prints it as a
table, following :mod:`actmem.views.pipeline_measured`. Note that
``actmem/measure/__init__.py`` imports torch, so without torch a caller
must read the file as :func:`stored_measurement` does rather than import
this module.

The configurations (:data:`CONFIGS`): Megatron-LM's mixed precision (bf16
parameters, persistent fp32 gradient buffer, fp32 main parameters, Adam)
with recomputation none, selective and full, with a stored attention map
and with ``scaled_dot_product_attention``; the three losses
(``"vocab_parallel"``, ``"torch"``, ``"fused"``); and plain PyTorch with
``zero_grad(set_to_none=True)``: bf16 parameters with fp32 main copies,
fp32, and fp32 parameters under ``torch.autocast`` (bf16); and
Megatron-LM's multi-token prediction (two modules, :mod:`.step_mtp`).

Sizes
are small (s=32, b=2, h=64, a=4, L=2, a vocabulary of 1000 padded to 1024,
m=2 micro-batches) so all run in seconds on two CPU cores; one
configuration runs under ``FakeTensorMode`` at LLaMA-2-7B's width and
sequence (h=4096, a=32, s=4096, vocabulary 32000) with two layers, because
the reference layer has LayerNorm, biases, tied embeddings and learned
positions, not LLaMA's RMSNorm, no biases, untied embeddings and rotary
positions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib.resources import files

from ..run.moments.loss import fused_loss_chunk
from ..run.job.model import ModelConfig

STORED = "data/step_measured.json"
"""Where the stored measurement lives inside the package."""

SMALL_MODEL = dict(s=32, b=2, h=64, a=4, L=2, vocab_size=1000)
"""The small GPT's shape (ModelConfig arguments)."""
WIDE_MODEL = dict(s=4096, b=1, h=4096, a=32, L=2, vocab_size=32000,
                  flash_attention=True, dropout=False)
"""LLaMA-2-7B's h, a, s and vocabulary on the reference GPT, two layers."""


@dataclass(frozen=True)
class StepConfig:
    """One measured step.

    Attributes:
        title: what it is. model: ModelConfig arguments. m: micro-batches.
        recompute: ``"none"``, ``"selective"`` or ``"full"``.
        loss: ``"vocab_parallel"``, ``"torch"`` or ``"fused"``.
        gradient_buffer: ``"persistent"`` or ``"backward"``.
        accounting: ``training_memory``'s (``"megatron"``: 2+4+12 bytes per
            parameter; ``"zero"``: 2+2+12). fake: run under FakeTensorMode.
        precision: ``"bf16"`` (bf16 parameters, fp32 main copies),
            ``"fp32"`` or ``"autocast"`` (fp32 parameters, plain Adam).
        loss_chunk_tokens: tokens per chunk of the fused loss (None:
            :func:`actmem.run.moments.loss.fused_loss_chunk`).
    """

    title: str
    model_fields: dict = field(default_factory=lambda: dict(SMALL_MODEL))
    m: int = 2
    recompute: str = "none"
    loss: str = "vocab_parallel"
    gradient_buffer: str = "persistent"
    accounting: str = "megatron"
    fake: bool = False
    precision: str = "bf16"
    loss_chunk_tokens: int | None = None

    @property
    def model(self) -> ModelConfig:
        return ModelConfig(**self.model_fields)

    def chunk(self) -> int:
        """Tokens per chunk of the fused loss."""
        m = self.model
        return self.loss_chunk_tokens or fused_loss_chunk(m.s * m.b, m.padded_vocab(1), m.h)

    def model_args(self) -> dict:
        """The ModelConfig arguments (JSON)."""
        return dict(self.model_fields)

    def timeline_args(self, device: str = "cpu", cublas_workspace_config: str = ":0:0"
                      ) -> dict:
        """``training_memory`` keyword arguments for this step on ``device``
        (``"cpu"``: no workspace; ``"cuda"``: PyTorch's cuBLAS workspaces of
        ``cublas_workspace_config``), as JSON."""
        return {"m": self.m, "recompute": self.recompute, "loss": self.loss,
                "logits_bytes": 4, "gradient_buffer": self.gradient_buffer,
                "accounting": self.accounting, "precision": self.precision,
                "fused_projections": False,   # separate q, k, v linears
                "autocast_device": device,
                "gradient_accumulation_fusion": False,   # main_grad.add_(grad) hooks
                "loss_chunk_tokens": self.chunk() if self.loss == "fused" else None,
                "create_attention_mask_in_dataloader": True, "transformer_engine": False,
                "cublas_workspace_config": cublas_workspace_config}


def _flash(**changes) -> dict:
    return {**SMALL_MODEL, "flash_attention": True, "dropout": False, **changes}


CONFIGS: dict[str, StepConfig] = {
    "megatron": StepConfig("Megatron-LM mixed precision, stored attention map"),
    "megatron_selective": StepConfig("... with selective recomputation",
                                     recompute="selective"),
    "megatron_full": StepConfig("... with full recomputation", recompute="full"),
    "megatron_flash": StepConfig("... with scaled_dot_product_attention, no dropout",
                                 _flash()),
    "megatron_flash_full": StepConfig("... flash attention and full recomputation",
                                      _flash(), recompute="full"),
    "torch_loss": StepConfig("F.cross_entropy on logits.float(), persistent buffer",
                             loss="torch"),
    "plain_pytorch": StepConfig("bf16 parameters, .grad made in backward "
                                "(set_to_none=True), fp32 main copies and Adam",
                                gradient_buffer="backward", accounting="zero"),
    "pytorch_fp32": StepConfig("plain PyTorch in fp32: F.cross_entropy, .grad made in "
                               "backward (set_to_none=True), Adam on the parameters",
                               loss="torch", gradient_buffer="backward", precision="fp32"),
    "pytorch_autocast": StepConfig("plain PyTorch, fp32 parameters under torch.autocast "
                                   "(bf16): F.cross_entropy, set_to_none=True, Adam",
                                   loss="torch", gradient_buffer="backward",
                                   precision="autocast"),
    "fused_loss": StepConfig("Megatron-LM mixed precision, a chunked linear + "
                             "cross-entropy that keeps no logits", loss="fused"),
    "mtp": StepConfig("Megatron-LM mixed precision, two multi-token prediction modules",
                      {**SMALL_MODEL, "mtp_num_layers": 2}),
    "fake_wide": StepConfig("FakeTensorMode: h=4096, a=32, s=4096, V=32000, L=2, "
                            "flash attention", dict(WIDE_MODEL), m=1, fake=True),
}
"""Configuration name -> :class:`StepConfig`."""



def stored_measurement() -> dict:
    """The stored measurement: ``{"torch": version, "configs": {name: {...}}}``,
    each configuration with its ``model`` and ``training_memory`` arguments,
    ``memtracker_peak``, ``counter_peak``, ``timeline_peak`` (bytes), the
    peak's moment and event, ``relative_difference``, the timeline's
    ``events`` with the measured bytes at each, and the measured
    ``moments`` (label -> bytes, in order).

    Raises:
        FileNotFoundError: the package was installed without its data.
    """
    return json.loads(files("actmem").joinpath(STORED).read_text(encoding="utf-8"))


def step_table(data: dict) -> str:
    """One line per configuration: MemTracker's and the counter's peak (on
    CUDA also ``torch.cuda.max_memory_allocated()``), the timeline's peak
    (bytes), where each is reached, and (measured - timeline) / timeline.

    >>> print(step_table(stored_measurement()).splitlines()[0])  # doctest: +NORMALIZE_WHITESPACE
    configuration  MemTracker peak  counter peak  timeline peak  difference  measured peak at  timeline peak at
    """
    cuda = data.get("device") == "cuda"
    head = (f"{'configuration':<20} {'MemTracker peak':>15}  {'counter peak':>12}  "
            + (f"{'CUDA max allocated':>18}  " if cuda else "")
            + f"{'timeline peak':>13}  {'difference':>10}  measured peak at  timeline peak at")
    lines = [head]
    for name, c in data["configs"].items():
        allocated = f"{c['cuda_max_memory_allocated']:>18}  " if cuda else ""
        lines.append(f"{name:<20} {c['memtracker_peak']:>15}  {c['counter_peak']:>12}  "
                     f"{allocated}{c['timeline_peak']:>13}  {c['relative_difference']:>+10.4%}  "
                     f"{c['counter_peak_moment']}  {c['timeline_peak_event']}")
    return "\n".join(lines)
