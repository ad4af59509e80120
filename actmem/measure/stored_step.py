"""The configurations :mod:`.step` measures, and its stored result, without torch.

This module imports no torch: it names the configurations (each with its
``training_memory`` arguments), reads the measurement stored in
``actmem/data/step_measured.json`` (written by ``python -m actmem.measure
step --json``; a test checks it against a fresh run) and prints it as a
table, following :mod:`actmem.views.pipeline_measured`. Note that
``actmem/measure/__init__.py`` imports torch, so without torch a caller
must read the file as :func:`stored_measurement` does rather than import
this module.

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

from ..run.model import ModelConfig

STORED = "data/step_measured.json"
"""Where the stored measurement lives inside the package."""

SMALL_MODEL = dict(s=32, b=2, h=64, a=4, L=2, vocab_size=1000)
"""The small GPT's shape (ModelConfig arguments)."""
WIDE_MODEL = dict(s=4096, b=1, h=4096, a=32, L=2, vocab_size=32000,
                  flash_attention=True, dropout=False)
"""LLaMA-2-7B's h, a, s and vocabulary on the reference GPT, two layers."""
NO_WORKSPACE = dict(transformer_engine=False, cublas_workspace_config=":0:0")
"""``training_memory`` without device workspaces (none on CPU)."""


@dataclass(frozen=True)
class StepConfig:
    """One measured step.

    Attributes:
        title: what it is. model: ModelConfig arguments. m: micro-batches.
        recompute: ``"none"``, ``"selective"`` or ``"full"``.
        loss: ``"vocab_parallel"`` or ``"torch"``.
        gradient_buffer: ``"persistent"`` or ``"backward"``.
        accounting: ``training_memory``'s (``"megatron"``: 2+4+12 bytes per
            parameter; ``"zero"``: 2+2+12). fake: run under FakeTensorMode.
    """

    title: str
    model_fields: dict = field(default_factory=lambda: dict(SMALL_MODEL))
    m: int = 2
    recompute: str = "none"
    loss: str = "vocab_parallel"
    gradient_buffer: str = "persistent"
    accounting: str = "megatron"
    fake: bool = False

    @property
    def model(self) -> ModelConfig:
        return ModelConfig(**self.model_fields)

    def model_args(self) -> dict:
        """The ModelConfig arguments (JSON)."""
        return dict(self.model_fields)

    def timeline_args(self) -> dict:
        """``training_memory`` keyword arguments for this step (JSON)."""
        return {"m": self.m, "recompute": self.recompute, "loss": self.loss,
                "logits_bytes": 4, "gradient_buffer": self.gradient_buffer,
                "accounting": self.accounting,
                "create_attention_mask_in_dataloader": True, **NO_WORKSPACE}


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
    "plain_pytorch": StepConfig("plain PyTorch: .grad made in backward, "
                                "set_to_none=True, fp32 master Adam",
                                gradient_buffer="backward", accounting="zero"),
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
    """One line per configuration: MemTracker's and the counter's peak, the
    timeline's peak (bytes), where each is reached, and (measured -
    timeline) / timeline.

    >>> print(step_table(stored_measurement()).splitlines()[0])  # doctest: +NORMALIZE_WHITESPACE
    configuration  MemTracker peak  counter peak  timeline peak  difference  measured peak at  timeline peak at
    """
    head = (f"{'configuration':<20} {'MemTracker peak':>15}  {'counter peak':>12}  "
            f"{'timeline peak':>13}  {'difference':>10}  measured peak at  timeline peak at")
    lines = [head]
    for name, c in data["configs"].items():
        lines.append(f"{name:<20} {c['memtracker_peak']:>15}  {c['counter_peak']:>12}  "
                     f"{c['timeline_peak']:>13}  {c['relative_difference']:>+10.4%}  "
                     f"{c['counter_peak_moment']}  {c['timeline_peak_event']}")
    return "\n".join(lines)
