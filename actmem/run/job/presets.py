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
from ...validate import lists_keywords, shown

_GPT = dict(norm="layernorm", bias=True, tied_embeddings=True, positions="learned")
_LLAMA = dict(norm="rmsnorm", bias=False, tied_embeddings=False, positions="rotary",
              activation="swiglu", dropout=False, flash_attention=True)
_MLA = dict(multi_latent_attention=True, kv_lora_rank=512, qk_head_dim=128,
            qk_pos_emb_head_dim=64, v_head_dim=128)
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
    "llama3.1-405b": ModelConfig(
        s=8192, b=1, h=16384, a=128, L=126, vocab_size=128256, ffn_hidden_size=53248,
        kv_heads=8, **_LLAMA,
        source="Dubey et al. 2024 (The Llama 3 Herd of Models, arXiv 2407.21783), Table 3 "
               "(126 layers, model dimension 16384, FFN dimension 53248, 128 heads, 8 "
               "key/value heads) and sec. 3.4.1 (sequences of 4,096, then 8,192 tokens); "
               "config.json of meta-llama/Llama-3.1-405B (vocabulary 128256, untied); "
               "405,853,388,800 parameters (its safetensors total, the card's 405B)"),
}
"""Model shapes by name; ``PRESETS[name].source`` says where each comes from."""

MOE_PRESETS: dict[str, ModelConfig] = {
    "mixtral-8x7b": ModelConfig(
        s=4096, b=1, h=4096, a=32, L=32, vocab_size=32000, ffn_hidden_size=14336,
        kv_heads=8, num_experts=8, moe_router_topk=2, **_LLAMA,
        source="Jiang et al. 2024 (Mixtral of Experts, arXiv 2401.04088), Table 1: "
               "dim 4096, 32 layers, 32 heads, 8 kv heads, hidden 14336, vocabulary 32000, "
               "8 experts, top 2; 46,702,792,704 parameters (the safetensors total of "
               "mistralai/Mixtral-8x7B-v0.1 on Hugging Face, \"46.7B\"; the paper's 47B)"),
    "deepseek-moe-16b": ModelConfig(
        s=4096, b=1, h=2048, a=16, L=28, vocab_size=102400, ffn_hidden_size=10944,
        num_experts=64, moe_router_topk=6, moe_ffn_hidden_size=1408,
        moe_shared_expert_intermediate_size=2816, moe_layer_freq=(0,) + (1,) * 27,
        moe_router_pre_softmax=True, **_LLAMA,
        source="Dai et al. 2024 (DeepSeekMoE, arXiv 2401.06066), sec. 5.1 and the config "
               "of deepseek-ai/deepseek-moe-16b-base: 28 layers (the first dense, "
               "intermediate 10944), h 2048, 16 heads, 64 routed experts of width 1408, "
               "top 6, 2 shared experts (2 x 1408), vocabulary 102400; 16,375,728,128 "
               "parameters (its safetensors total, \"16.4B\"). Its router takes the "
               "softmax over all 64 experts before top-k (Megatron-LM's "
               "moe_router_pre_softmax), which keeps 4sbE bytes instead of the 4sbk of the "
               "default softmax after top-k"),
    "deepseek-v3": ModelConfig(
        s=4096, b=1, h=7168, a=128, L=61, vocab_size=129280, ffn_hidden_size=18432,
        num_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
        moe_shared_expert_intermediate_size=2048, moe_layer_freq=(0,) * 3 + (1,) * 58,
        moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
        moe_router_num_groups=8, moe_router_group_topk=4, **_MLA, q_lora_rank=1536, **_LLAMA,
        source="DeepSeek-AI 2024 (DeepSeek-V3 Technical Report, arXiv 2412.19437), sec. 4.2 "
               "and the config.json of deepseek-ai/DeepSeek-V3: 61 layers (the first 3 dense, "
               "intermediate 18432), h 7168, 128 heads, MLA with q_lora_rank 1536, "
               "kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, "
               "256 routed experts of width 2048, top 8, 1 shared expert, vocabulary 129280, "
               "untied embeddings, pre-training at 4K tokens; \"671B total parameters\" of the "
               "main model: 671,026,404,352 here, 671,026,419,200 with the checkpoint's "
               "e_score_correction_bias (256 per MoE layer; Megatron-LM keeps it as the "
               "router's expert_bias buffer, no parameter). The multi-token-prediction "
               "module (1 more MoE layer, 3 norms and a 2h x h projection: 11.6B of its own; "
               "13.5B with the copies of the embedding and output layer its checkpoint "
               "keeps, the card's \"14B\") "
               "is left out, as the paper's 671B does. Its router scores with a sigmoid and "
               "an expert bias, picking 8 experts within 4 of 8 groups (sec. 2.1.2; "
               "Megatron-LM's moe_router_score_function='sigmoid', "
               "moe_router_enable_expert_bias, moe_router_num_groups=8, "
               "moe_router_group_topk=4): unfused it keeps the fp32 sigmoid of all 256 "
               "scores, 4sbE bytes (actmem.layer.router)"),
    "deepseek-v2-lite": ModelConfig(
        s=4096, b=1, h=2048, a=16, L=27, vocab_size=102400, ffn_hidden_size=10944,
        num_experts=64, moe_router_topk=6, moe_ffn_hidden_size=1408,
        moe_shared_expert_intermediate_size=2816, moe_layer_freq=(0,) + (1,) * 26,
        moe_router_pre_softmax=True, **_MLA, **_LLAMA,
        source="DeepSeek-AI 2024 (DeepSeek-V2, arXiv 2405.04434), appendix B and the "
               "config.json of deepseek-ai/DeepSeek-V2-Lite: 27 layers (the first dense, "
               "intermediate 10944), h 2048, 16 heads, MLA without Q compression "
               "(q_lora_rank null), kv_lora_rank 512, head dims 128 + 64 (rotary), "
               "v_head_dim 128, 64 routed experts of width 1408, top 6, 2 shared experts "
               "(2 x 1408), vocabulary 102400; \"15.7B\" total parameters (model card): "
               "15,706,484,224 here. Its router takes the softmax over all 64 experts "
               "before top-k, as deepseek-moe-16b's"),
    "qwen3-30b-a3b": ModelConfig(
        s=4096, b=1, h=2048, a=32, L=48, vocab_size=151936, kv_heads=4, kv_channels=128,
        qk_layernorm=True, ffn_hidden_size=6144, num_experts=128, moe_router_topk=8,
        moe_ffn_hidden_size=768, **_LLAMA,
        source="Qwen Team 2025 (Qwen3 Technical Report, arXiv 2505.09388), Table 2 and "
               "sec. 3.2 (pre-training sequences of 4,096 tokens), and the config.json of "
               "Qwen/Qwen3-30B-A3B: 48 layers, h 2048, 32 heads of width 128 (head_dim: "
               "Megatron-LM's --kv-channels 128, not h/a = 64), 4 key/value heads, "
               "q/k norms (--qk-layernorm), 128 experts of width 768, top 8 with the "
               "probabilities renormalised (norm_topk_prob: the ledger's softmax after "
               "top-k), every layer MoE, vocabulary 151936, untied; 30,532,122,624 "
               "parameters (its safetensors total, the card's 30.5B)"),
    "qwen3-235b-a22b": ModelConfig(
        s=4096, b=1, h=4096, a=64, L=94, vocab_size=151936, kv_heads=4, kv_channels=128,
        qk_layernorm=True, ffn_hidden_size=12288, num_experts=128, moe_router_topk=8,
        moe_ffn_hidden_size=1536, **_LLAMA,
        source="Qwen Team 2025 (Qwen3 Technical Report, arXiv 2505.09388), Table 2 and "
               "sec. 3.2, and the config.json of Qwen/Qwen3-235B-A22B: 94 layers, h 4096, "
               "64 heads of width 128 (--kv-channels 128, h/a = 64), 4 key/value heads, "
               "q/k norms, 128 experts of width 1536, top 8, every layer MoE, vocabulary "
               "151936, untied; 235,093,634,560 parameters (its safetensors total, the "
               "card's 235B)"),
}
"""Mixture-of-experts models by name, each citing its published parameter count.

Kept apart from :data:`PRESETS` (dense models, whose planner menus need no
expert sizes). Use them with :func:`actmem.parameter_count`,
:func:`actmem.model_states` and :func:`actmem.training_memory` (with ``ep``
and ``etp``; models that mix dense and MoE layers too)."""


@lists_keywords
def preset(name: str) -> ModelConfig:
    """``PRESETS[name]`` with a clear error for an unknown name.

    Raises:
        ValueError: ``name`` is not a preset; the message lists them.
    """
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, got name={shown(name)}")
    return PRESETS[name]
