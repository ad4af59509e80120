"""GPU presets: each GPU's memory as its driver reports it, with the source.

A GPU's box says "80GB"; its driver says how many bytes there are, and that
is the number a memory budget must fit. For NVIDIA GPUs the number here is
``nvidia-smi --query-gpu=memory.total`` in MiB (2^20 bytes), as printed in
public ``nvidia-smi`` output (GitHub issues, pull requests, a blog post);
for the AMD MI300X it is the VRAM pool ``rocminfo`` prints. Each preset's
``source`` gives the address. Two things to know about the number:

* Older NVIDIA drivers print a smaller total for the same card (an A100
  40GB shows 40536 MiB under driver 470, 40960 MiB under later drivers;
  https://github.com/nanopool/phoenix-miner/issues/17); the presets use
  the newer drivers' figure.
* CUDA (``torch.cuda.mem_get_info``) sees a few hundred MiB less than
  ``nvidia-smi``: 40339 MiB on an A100 40GB
  (https://github.com/bottlerocket-os/bottlerocket/pull/3873). Set that
  aside with ``reserve`` in :func:`actmem.training_memory`.

Compute capabilities are NVIDIA's (https://developer.nvidia.com/cuda-gpus).
A GPU below 8.0 (Volta: the V100s) runs neither bf16 nor FlashAttention, so
:func:`check_gpu_runs` refuses them there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...units import format_value, parse_size
from .record_fields import check_fields
from ...validate import choice, compute_capability, lists_keywords, positive_int

MiB = 2**20
"""Bytes in a MiB, the unit ``nvidia-smi`` prints."""
_GPU_FIELDS = {"memory": positive_int, "label_gb": positive_int,
               "compute_capability": compute_capability}


@dataclass(frozen=True)
class GPU:
    """One GPU model and its memory.

    Attributes:
        name: the preset's name, e.g. ``"H100 80GB SXM"``.
        memory: total memory in bytes: ``nvidia-smi``'s ``memory.total``
            (MiB) x 2^20; for AMD, what ``rocminfo`` reports.
        compute_capability: CUDA compute capability, e.g. ``(9, 0)``;
            None for AMD GPUs.
        label_gb: the number on the box ("80GB" -> 80); NVIDIA and AMD
            round it, and it is neither the GB nor the GiB the card has.
        source: where the MiB figure is published, with its address.
    """

    name: str
    memory: int
    compute_capability: tuple[int, int] | None
    label_gb: int
    source: str

    def __post_init__(self):
        """Raises TypeError, ValueError: a name or source that is not a str,
        a memory or label that is not an integer >= 1, a compute capability
        that is not None or a pair of integers >= 0."""
        check_fields(self, _GPU_FIELDS)

    def __str__(self) -> str:
        """E.g. ``'H100 80GB SXM: 81559 MiB (79.65 GiB)'``; in a Chinese notebook
        (:func:`actmem.set_language`) with Chinese punctuation,
        ``'H100 80GB SXM：81559 MiB（79.65 GiB）'``, the same numbers."""
        from ...language import tr

        return tr("{name}: {mib} MiB ({gib} GiB)").format(
            name=self.name, mib=format_value(self.memory, "MiB"),
            gib=format_value(self.memory, "GiB"))


_MODAL = ("https://thundergolfer.com/blog/nvidia-gpu-memory-capacity (Modal's table of "
          "nvidia-smi totals; also https://github.com/modal-labs/modal-client/pull/2797)")


def _gpu(name: str, mib: int, cc: tuple[int, int] | None, label_gb: int, source: str) -> GPU:
    return GPU(name, mib * MiB, cc, label_gb, source)


GPUS: dict[str, GPU] = {gpu.name: gpu for gpu in (
    _gpu("A100 40GB", 40960, (8, 0), 40, _MODAL),
    _gpu("A100 80GB", 81920, (8, 0), 80, _MODAL),
    _gpu("H100 80GB SXM", 81559, (9, 0), 80,
         "nvidia-smi 'NVIDIA H100 80GB HBM3', driver 550.54.15: "
         "https://github.com/NVIDIA/nccl/issues/1264; " + _MODAL),
    _gpu("H100 80GB PCIe", 81559, (9, 0), 80,
         "nvidia-smi --query-gpu=name,memory.total prints 'NVIDIA H100 PCIe, 81559 MiB' in "
         "several public GitHub files found by exact-string search; no single address "
         "recorded. Same total as the SXM card's (HBM2e here, HBM3 there)"),
    _gpu("H200", 143771, (9, 0), 141, _MODAL),
    _gpu("B200", 183359, (10, 0), 180,
         "nvidia-smi 'NVIDIA B200', driver 580.95.05: "
         "https://github.com/NVIDIA/TensorRT-LLM/issues/10278 (label: 180 GB per GPU in "
         "HGX/DGX B200, 192 GB in early material)"),
    _gpu("GB200", 189471, (10, 0), 186,
         "nvidia-smi 'NVIDIA GB200', drivers 580.95.05 and 580.126.09, prints '189471MiB' "
         "in several public GitHub files found by exact-string search; no single address "
         "recorded (label: 186 GB of HBM3e per GPU, 13.4 TB over the 72 GPUs of a GB200 "
         "NVL72)"),
    _gpu("L4", 23034, (8, 9), 24,
         "nvidia-smi 'NVIDIA L4', driver 570.133.20: "
         "https://github.com/speaches-ai/speaches/pull/438; " + _MODAL),
    _gpu("L40S", 46068, (8, 9), 48,
         "nvidia-smi --query-gpu=memory.total, driver 595.71.05: "
         "https://github.com/akash-network/provider-configs/pull/99; " + _MODAL),
    _gpu("RTX 4090", 24564, (8, 9), 24,
         "nvidia-smi 'NVIDIA GeForce RTX 4090', driver 550.163.01: "
         "https://github.com/RLinf/RLinf/issues/255"),
    _gpu("V100 16GB", 16384, (7, 0), 16,
         "nvidia-smi 'Tesla V100-SXM2-16GB', driver 570.211.01: "
         "https://github.com/1CatAI/1Cat-vLLM/issues/85 (older drivers are said to print "
         "16160 MiB; no public address for that found)"),
    _gpu("V100 32GB", 32768, (7, 0), 32,
         "nvidia-smi 'Tesla V100-SXM2...' (32GB), driver 525.105.17: "
         "https://github.com/Wan-Video/Wan2.1/issues/5 (older drivers print less; see "
         "the module docstring)"),
    _gpu("MI300X", 196592, None, 192,
         "rocminfo VRAM pool 201310208 KB = 196592 MiB: "
         "https://github.com/ROCm/legacy-rocm-build/issues/4414; 8 CPX partitions of "
         "25767706624 bytes: https://github.com/ROCm/legacy-rocm-build/issues/4750"),
)}
"""Presets by name. ``gpu_capacity`` matches names ignoring case, spaces
and hyphens."""


def _key(name: str) -> str:
    return re.sub(r"[\s\-_]", "", name).lower()


_NAMES_BY_KEY = {_key(name): name for name in GPUS}


def _preset(text: str) -> GPU:
    name = _NAMES_BY_KEY.get(_key(text), text)
    try:
        return GPUS[choice("gpu_memory", name, tuple(GPUS))]
    except ValueError as error:
        raise ValueError(f"{error}; names ignore case, spaces and hyphens; or give bytes "
                         "(an int) or a size such as '80GiB'") from None


@lists_keywords
def gpu_capacity(gpu_memory: str | int | GPU) -> int:
    """A GPU's capacity in bytes (an int).

    ``gpu_memory`` is a preset name (a key of :data:`GPUS`, ignoring case,
    spaces and hyphens: ``"h100 80gb sxm"``, ``"A100-80GB"``), a
    :class:`GPU`, a positive int of bytes, or a size string read by
    :func:`actmem.units.parse_size` (``"80GiB"`` = 80 x 2^30 bytes).

    A GPU's label is not a unit: ``"80GB"`` here means 80 x 10^9 bytes
    (74.51 GiB), but an "80GB" GPU has about 80 GiB (an H100: 81559 MiB,
    79.65 GiB). Name the GPU instead:

    >>> gpu_capacity("H100 80GB SXM") // MiB, gpu_capacity("80GB") // MiB
    (81559, 76293)

    Raises:
        TypeError: not a string, an int or a :class:`GPU` (a bool or a
            float is refused).
        ValueError: an unknown name, a malformed size or a size < 1 byte.
        Both name ``gpu_memory``, its value and the GPU names allowed.
    """
    gpu = find_gpu(gpu_memory)
    if gpu is not None:
        return gpu.memory
    try:
        return parse_size("gpu_memory", gpu_memory)
    except (TypeError, ValueError) as error:
        names = ", ".join(repr(name) for name in GPUS)
        raise type(error)(f"{error}; or a GPU name: {names}") from None


def find_gpu(gpu_memory: str | int | GPU | None) -> GPU | None:
    """The :class:`GPU` that ``gpu_memory`` names (a preset name or a
    :class:`GPU`), or None when it is a size or None.

    Raises:
        ValueError: a string that is neither a size nor a GPU name.
    """
    if isinstance(gpu_memory, GPU):
        return gpu_memory
    if isinstance(gpu_memory, str):
        if _key(gpu_memory) in _NAMES_BY_KEY or not gpu_memory.strip()[:1].isdigit():
            return _preset(gpu_memory)
    return None


NEEDS = {
    "precision": ((8, 0), "bf16 needs compute capability 8.0 (Ampere) or newer: PyTorch's "
                          "torch.cuda.is_bf16_supported(including_emulation=False) is False "
                          "below it (torch/cuda/__init__.py)"),
    "flash_attention": ((8, 0), "FlashAttention-2 needs compute capability 8.0 (Ampere) or "
                                "newer (Dao-AILab/flash-attention's README; FlashAttention 1 also "
                                "ran on Turing, 7.5, and neither on Volta: "
                                "Dao-AILab/flash-attention#148)"),
    "fp8": ((8, 9), "Transformer Engine's FP8 needs compute capability 8.9 (Ada) or newer "
                    "(transformer_engine/pytorch/fp8.py: check_fp8_support, 'Device compute "
                    "capability 8.9 or higher required for FP8 execution.')"),
}
"""The compute capability each option needs, and why, with the source."""
RECIPE_NEEDS = {
    "blockwise": ((9, 0), None, "Transformer Engine's blockwise FP8 needs compute capability "
                                "9.0 (Hopper) or newer (transformer_engine/pytorch/"
                                "quantization.py: _compute_fp8_block_scaling_support, 'FP8 "
                                "block scaled GEMM requires compute capability 9.0 or higher')"),
    "mxfp8": ((10, 0), (12, 0), "Transformer Engine's MXFP8 needs compute capability 10.x or "
                                "11.x (Blackwell; transformer_engine/pytorch/quantization.py: "
                                "_compute_mxfp8_support, 'Device compute capability 10.0 or "
                                "higher required for MXFP8 execution', and 'MXFP8 (for all gemm "
                                "layouts) is not supported on 12.0+ architectures yet.')"),
}
"""The compute capabilities an FP8 recipe runs on, [from, below), and why."""
AMD_FP8 = ("actmem models NVIDIA's Transformer Engine FP8 (its weight copies and scales "
           "follow the CUDA compute capability), not AMD's ROCm port")
"""Why FP8 is refused on an AMD GPU."""
INSTEAD = {"precision": "precision='fp32'", "flash_attention": "flash_attention=False",
           "fp8": "fp8=None", "fp8_recipe": "fp8_recipe='tensorwise'"}


def _needs(option: str, fp8_recipe: str) -> tuple:
    """(from, below, why) for ``option``: :data:`NEEDS`, or for
    ``"fp8_recipe"`` the recipe's :data:`RECIPE_NEEDS`."""
    if option == "fp8_recipe":
        return RECIPE_NEEDS[fp8_recipe]
    needed, why = NEEDS[option]
    return needed, None, why


def gpu_runs(gpu: GPU | None, precision: str, flash_attention: bool,
             fp8: str | None = None, fp8_recipe: str = "delayed") -> str | None:
    """The first option ``gpu`` cannot run: ``"precision"`` (bf16, or
    autocast's bf16), ``"flash_attention"``, ``"fp8"`` (any FP8 format;
    :data:`NEEDS`) or ``"fp8_recipe"`` (``"blockwise"`` or ``"mxfp8"``:
    :data:`RECIPE_NEEDS`); None when it runs them all (always for None or
    a size). An AMD GPU, whose capability is None, runs all but FP8:
    actmem models NVIDIA's Transformer Engine (:data:`AMD_FP8`)."""
    if gpu is None:
        return None
    if gpu.compute_capability is None:
        return "fp8" if fp8 is not None else None
    asked = {"precision": precision in ("bf16", "autocast"),
             "flash_attention": flash_attention, "fp8": fp8 is not None,
             "fp8_recipe": fp8 is not None and fp8_recipe in RECIPE_NEEDS}
    cc = gpu.compute_capability
    for option in (o for o in asked if asked[o]):
        needed, below, _ = _needs(option, fp8_recipe)
        if cc < needed or (below is not None and cc >= below):
            return option
    return None


def check_gpu_runs(gpu: GPU | None, precision: str, flash_attention: bool,
                   fp8: str | None = None, fp8_recipe: str = "delayed") -> None:
    """Refuse what ``gpu`` cannot run (:data:`NEEDS`, :data:`RECIPE_NEEDS`):
    bf16 (``precision="bf16"`` or ``"autocast"``, which computes in bf16)
    and FlashAttention (the model's ``flash_attention``) below compute
    capability 8.0, FP8 below 8.9 and on AMD GPUs (:data:`AMD_FP8`),
    blockwise FP8 below 9.0, MXFP8 outside 10.x and 11.x.

    Raises:
        ValueError: naming the GPU, the option, its value and why.
    """
    option = gpu_runs(gpu, precision, flash_attention, fp8, fp8_recipe)
    if option is not None and gpu.compute_capability is None:
        raise ValueError(f"fp8={fp8!r} does not run on gpu_memory={gpu.name!r} (an AMD GPU): "
                         f"{AMD_FP8}; use fp8=None")
    if option is not None:
        value = {"precision": precision, "flash_attention": flash_attention, "fp8": fp8,
                 "fp8_recipe": fp8_recipe}[option]
        needed, below, why = _needs(option, fp8_recipe)
        other = "a newer GPU" if gpu.compute_capability < needed else \
            f"a GPU of compute capability {needed[0]}.x to {below[0] - 1}.x"
        raise ValueError(
            f"{option}={value!r} does not run on gpu_memory={gpu.name!r} (compute capability "
            f"{'.'.join(map(str, gpu.compute_capability))}): {why}; use {INSTEAD[option]} or "
            f"{other}")
