"""Published model configurations by name, each citing its source.

Shapes only: the storage options of a run (t, sequence parallelism,
recomputation) are arguments of :func:`actmem.training_memory`, and
GPT and the paper's models keep the attention map (``flash_attention`` off:
the paper's layer); LLaMA models do not: LLaMA's training used a causal
attention kernel that neither stores the attention weights nor computes the
masked scores (Touvron et al. 2023, "LLaMA", sec. 2.4, the xformers
memory-efficient attention), and Llama 2 and 3 keep that setup, so their
presets set ``flash_attention=True``. Change either with
``PRESETS[name].with_(flash_attention=...)``. LLaMA models train without
dropout; GPT models with it.
"""

from __future__ import annotations

from .model import ModelConfig

_GPT = dict(norm="layernorm", bias=True, tied_embeddings=True, positions="learned")
_LLAMA = dict(norm="rmsnorm", bias=False, tied_embeddings=False, positions="rotary",
              activation="swiglu", dropout=False, flash_attention=True)
_MEGATRON = "Korthikanti et al. 2022, Table 3 (heads, hidden size, layers); s=2048 and a " \
            "vocabulary of 51200 as in Narayanan et al. 2021, sec. 5.1"

PRESETS: dict[str, ModelConfig] = {
    "gpt2-large": ModelConfig(
        s=1024, b=1, h=1280, a=20, L=36, vocab_size=50257, **_GPT,
        source="Radford et al. 2019, Table 2 (GPT-2 774M: 36 layers, d_model 1280); "
               "20 heads, 1024 positions, vocabulary 50257"),
    "gpt3-175b": ModelConfig(
        s=2048, b=1, h=12288, a=96, L=96, vocab_size=50257, **_GPT,
        source="Brown et al. 2020, Table 2.1 (96 layers, d_model 12288, 96 heads, "
               "context 2048); GPT-2's vocabulary of 50257"),
    "22b": ModelConfig(s=2048, b=1, h=6144, a=64, L=48, vocab_size=51200, **_GPT,
                       source=_MEGATRON + "; paper's run: t=8, p=1"),
    "175b": ModelConfig(s=2048, b=1, h=12288, a=96, L=96, vocab_size=51200, **_GPT,
                        source=_MEGATRON + "; paper's run: t=8, p=8"),
    "530b": ModelConfig(s=2048, b=1, h=20480, a=128, L=105, vocab_size=51200, **_GPT,
                        source=_MEGATRON + "; paper's run: t=8, p=35"),
    "1t": ModelConfig(s=2048, b=1, h=25600, a=160, L=128, vocab_size=51200, **_GPT,
                      source=_MEGATRON + "; paper's run: t=8, p=64"),
    "llama2-7b": ModelConfig(
        s=4096, b=1, h=4096, a=32, L=32, vocab_size=32000, ffn_hidden_size=11008,
        **_LLAMA, source="Touvron et al. 2023 (Llama 2), Table 1 and model card: "
                         "6,738,415,616 parameters"),
    "llama2-13b": ModelConfig(
        s=4096, b=1, h=5120, a=40, L=40, vocab_size=32000, ffn_hidden_size=13824,
        **_LLAMA, source="Touvron et al. 2023 (Llama 2), Table 1 and model card"),
    "llama2-70b": ModelConfig(
        s=4096, b=1, h=8192, a=64, L=80, vocab_size=32000, ffn_hidden_size=28672,
        kv_heads=8, **_LLAMA,
        source="Touvron et al. 2023 (Llama 2), Table 1 (GQA with 8 key/value heads) "
               "and model card"),
    "llama3-8b": ModelConfig(
        s=8192, b=1, h=4096, a=32, L=32, vocab_size=128256, ffn_hidden_size=14336,
        kv_heads=8, **_LLAMA, source="Meta Llama 3 model card and config (8B)"),
    "llama3-70b": ModelConfig(
        s=8192, b=1, h=8192, a=64, L=80, vocab_size=128256, ffn_hidden_size=28672,
        kv_heads=8, **_LLAMA, source="Meta Llama 3 model card and config (70B)"),
}
"""Model shapes by name; ``PRESETS[name].source`` says where each comes from."""


def preset(name: str) -> ModelConfig:
    """``PRESETS[name]`` with a clear error for an unknown name.

    Raises:
        ValueError: ``name`` is not a preset; the message lists them.
    """
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, got {name!r}")
    return PRESETS[name]
