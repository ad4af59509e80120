"""Every symbol and term the notebooks use, in English and Chinese.

The source article (see the README) is in Chinese, so each entry gives
the Chinese term a reader of it will meet. ``code`` lists the names in
actmem that the entry explains (a placement, a recomputation mode, a
schedule, ...); the tests check that every such name of actmem has an
entry, so the glossary cannot fall behind the code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    """One glossary entry.

    Attributes:
        term: the symbol or term as the notebooks write it.
        meaning: what it is, in one line.
        chinese: the Chinese term.
        code: names in actmem it explains (values of PLACEMENTS, GROUPS,
            RECOMPUTE, SCHEDULES, ...), if any.
    """

    term: str
    meaning: str
    chinese: str
    code: tuple[str, ...] = ()


SYMBOLS = (
    Term("s", "sequence length: tokens per training sample", "序列长度"),
    Term("b", "micro-batch size: samples one forward pass processes together", "微批次大小"),
    Term("h", "hidden size: width of each token's vector", "隐藏层维度"),
    Term("a", "attention heads; each works on h/a of the hidden vector", "注意力头数"),
    Term("t", "tensor-parallel size: GPUs that share one layer", "张量并行大小"),
    Term("p", "pipeline-parallel size: stages the layers are cut into", "流水线并行大小"),
    Term("L", "number of Transformer layers", "层数"),
    Term("m", "micro-batches per training step, pipelined through the stages", "微批次数"),
    Term("v", "model chunks per GPU in the interleaved schedule", "虚拟流水线级数"),
    Term("g", "key/value heads (grouped-query attention); g = a is multi-head", "键值头数"),
    Term("f", "MLP inner width (4h for GeLU)", "前馈层中间维度"),
    Term("d", "data-parallel size: copies of the model", "数据并行大小"),
    Term("M", "one layer's activation memory: bytes per micro-batch, per GPU",
         "单层激活显存"),
    Term("k", "layers per group under full recomputation (recompute_num_layers)",
         "每组重计算层数"),
    Term("N", "micro-batch group size of the interleaved schedule", "微批次组大小"),
    Term("i", "index of a pipeline stage, 0 first", "流水线级序号"),
    Term("j", "index of an attention head", "注意力头序号"),
    Term("F", "a forward pass in a schedule chart", "前向计算"),
    Term("B", "a backward pass in a schedule chart", "反向计算"),
    Term("X", "a block's input", "输入"),
    Term("V", "attention's value tensor; in notebook 08, the vocabulary size",
         "值矩阵 / 词表大小"),
)
"""The paper's symbols, those the notebooks add (v, g, f, d, M, k, N) and
the letters they name things with."""

TERMS = (
    Term("activation memory", "tensors the forward pass keeps for the backward pass",
         "激活显存"),
    Term("tensor parallelism", "one layer's matrices split over t GPUs (Megatron-LM)",
         "张量并行"),
    Term("column-parallel linear", "each GPU holds some columns of the weight and computes "
         "its own slice of the output", "列并行线性层"),
    Term("row-parallel linear", "each GPU holds some rows of the weight and computes a "
         "partial sum of the whole output", "行并行线性层"),
    Term("all-reduce", "every GPU ends with the sum of all GPUs' tensors", "全归约"),
    Term("sequence parallelism", "the tensors tensor parallelism replicates are split "
         "along s instead", "序列并行"),
    Term("pipeline parallelism", "consecutive layers on different GPUs (stages)",
         "流水线并行"),
    Term("pipeline stage", "the GPU (group) that runs L/p consecutive layers", "流水线级"),
    Term("micro-batch", "a slice of the batch that moves through the pipeline on its own",
         "微批次"),
    Term("pipeline bubble", "time a stage waits idle for work", "流水线气泡"),
    Term("GPipe", "all forward passes, then all backward passes", "GPipe 调度", ("gpipe",)),
    Term("1F1B", "one forward, one backward: a stage holds at most p micro-batches",
         "1F1B 调度", ("1f1b",)),
    Term("interleaved schedule", "1F1B over v model chunks per GPU: smaller bubble, more "
         "activations", "交错式调度", ("interleaved",)),
    Term("activation recomputation", "drop activations in the forward pass and compute "
         "them again in the backward pass", "激活重计算"),
    Term("selective recomputation", "recompute only the core attention (the s x s maps)",
         "选择性重计算", ("selective",)),
    Term("full recomputation", "keep only each layer's input; recompute the whole layer",
         "完全重计算", ("full",)),
    Term("FlashAttention", "attention computed tile by tile; the s x s map is never stored",
         "FlashAttention 算法"),
    Term("grouped-query attention", "several query heads share one key/value head",
         "分组查询注意力"),
    Term("SwiGLU", "gated MLP activation: silu(gate) * up", "SwiGLU 激活函数"),
    Term("dropout mask", "which elements dropout zeroed, 1 byte each", "dropout 掩码"),
    Term("attention map", "the s x s softmax probabilities, one per head and sample",
         "注意力矩阵"),
    Term("fixed term", "10sbh: tensors every tensor-parallel GPU keeps whole", "固定项",
         ("fixed",)),
    Term("intermediate term", "24sbh/t: tensors split over the t GPUs", "中间项",
         ("intermediate",)),
    Term("attention-map term", "5as^2b/t: the s x s tensors, split by heads",
         "注意力矩阵项", ("attention_map",)),
    Term("replicated", "every tensor-parallel GPU keeps the whole tensor", "复制",
         ("replicated",)),
    Term("hidden-split", "each GPU keeps a 1/t slice of the MLP's inner width (4h or f)",
         "按隐藏维度切分",
         ("hidden-split",)),
    Term("head-split", "each GPU keeps a/t heads, each head whole", "按注意力头切分",
         ("head-split",)),
    Term("sequence-split", "each GPU keeps s/t positions", "按序列切分", ("sequence-split",)),
    Term("data parallelism", "d copies of the model, each on its own data", "数据并行"),
    Term("model states", "weights, gradients and optimizer states", "模型状态"),
    Term("ZeRO", "model states split over the data-parallel GPUs", "ZeRO 零冗余优化器",
         ("zero",)),
    Term("MiB / GiB", "2^20 / 2^30 bytes (GB is 10^9 bytes, but a GPU's \"80GB\" label "
         "means about 80 GiB: 81920 MiB on an A100 80GB)", "MiB / GiB（二进制单位）"),
    Term("timeline", "the moments of one training step and the bytes alive at each",
         "显存时间线"),
    Term("peak", "the most bytes alive at one moment of a step: what "
         "torch.cuda.max_memory_allocated() reports; not the sum of the parts", "峰值显存"),
    Term("workspace", "scratch memory cuBLAS and Transformer Engine keep for matrix "
         "multiplications", "工作区（workspace）"),
    Term("vocab-parallel cross-entropy", "Megatron-LM's loss: an fp32 copy of the logits "
         "beside them, the fp32 softmax kept for backward", "词表并行交叉熵",
         ("vocab_parallel",)),
    Term("gradient buffer", "persistent fp32 gradients (Megatron-LM), or gradients "
         "created in backward (plain PyTorch)", "梯度缓冲区", ("persistent", "backward")),
    Term("zero-bubble schedule", "the backward split into an input-gradient step (I) and a "
         "weight-gradient step (W) that fills the bubbles", "零气泡调度",
         ("interleaved-zb", "zbv")),
    Term("DualPipeV", "DeepSeek's DualPipe cut in half: a V-shaped zero-bubble schedule, "
         "rank r holds stages r and 2p-1-r", "DualPipeV 调度", ("dualpipev",)),
    Term("looped BFS", "interleaved chunks run breadth-first: all micro-batches through "
         "one chunk before the next", "循环广度优先调度", ("looped-bfs",)),
    Term("uneven pipeline split", "stages with different numbers of layers, to relieve the "
         "first or last stage", "非均匀流水线切分"),
)
"""The field's terms as the notebooks use them."""

GLOSSARY = SYMBOLS + TERMS
"""Every entry: symbols first, then terms."""


def glossary_table() -> str:
    """The glossary as a Markdown table (term, meaning, Chinese)."""
    lines = ["| term | meaning | 中文 |", "|---|---|---|"]
    lines += [f"| `{e.term}` | {e.meaning} | {e.chinese} |" if e in SYMBOLS
              else f"| {e.term} | {e.meaning} | {e.chinese} |" for e in GLOSSARY]
    return "\n".join(lines)
