"""Every symbol and term the notebooks use, in English and Chinese.

The source article (see the README) is in Chinese. Each entry gives the
Chinese term the course uses and, where the article writes it otherwise,
the article's own word (micro-batch, Attention Map, 中间态, stage), so that a
reader can go from one to the other. The Chinese table marks that word 原文
(微批次（原文：micro-batch）); any other parentheses hold the English name,
an abbreviation or a short gloss (隐藏维度（hidden size）, 张量并行度（TP）,
复制（每卡完整一份）).

``code`` lists the names in actmem that the entry explains (a placement, a
recomputation mode, a schedule, ...); the tests check that every such name
of actmem has an entry, so the glossary cannot fall behind the code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    """One glossary entry.

    Attributes:
        term: the symbol or term as the notebooks write it.
        meaning: what it is, in one line of English.
        chinese: the Chinese term (the source article's in parentheses
            where it differs).
        meaning_zh: the same line as ``meaning``, in Chinese.
        code: names in actmem it explains (values of PLACEMENTS, GROUPS,
            RECOMPUTE, SCHEDULES, ...), if any.
        chinese_zh: the Chinese table's cell, where it differs from
            ``chinese``: the article's word marked 原文 (the English table
            keeps ``chinese``, the article's word in parentheses).
    """

    term: str
    meaning: str
    chinese: str
    meaning_zh: str
    code: tuple[str, ...] = ()
    chinese_zh: str = ""


SYMBOLS = (
    Term("s", "sequence length: tokens per training sample", "序列长度",
         "序列长度：每个训练样本的 token 数"),
    Term("b", "micro-batch size: samples one forward pass processes together",
         "微批次（micro-batch）大小", "一次前向传播一起处理的样本数",
         chinese_zh="微批次大小（原文：micro-batch 大小）"),
    Term("h", "hidden size: width of each token's vector", "隐藏维度（hidden size）",
         "每个 token 向量的宽度"),
    Term("a", "attention heads; each works on h/a of the hidden vector", "注意力头数",
         "注意力头的个数；每个头处理隐藏向量的 h/a"),
    Term("t", "tensor-parallel size: GPUs that share one layer", "张量并行度（TP）",
         "共同分担一层的 GPU 数"),
    Term("p", "pipeline-parallel size: stages the layers are cut into", "流水线并行度（PP）",
         "全部层被切成的流水线级数"),
    Term("L", "number of Transformer layers", "层数", "Transformer 层的个数"),
    Term("m", "micro-batches per optimizer step (Megatron-LM's num_microbatches, the "
         "gradient-accumulation count); the source article's m is what a stage holds at "
         "one moment, here peak_in_flight", "每步微批次数",
         "每个优化器步的微批次数（Megatron-LM 的 num_microbatches，即梯度累积次数）；"
         "原文的 m 指某一级同一时刻保存的微批次数，本课程称 peak_in_flight"),
    Term("v", "model chunks per GPU in the interleaved schedule",
         "每卡模型块数（虚拟流水线并行度，VPP）", "交错式调度中每卡的模型块数"),
    Term("g", "key/value heads (grouped-query attention); g = a is multi-head", "KV 头数",
         "KV 头的个数（分组查询注意力）；g = a 即多头注意力"),
    Term("f", "MLP inner width (4h for GeLU)", "MLP 中间维度（ffn_hidden_size）",
         "MLP 内部的宽度（GeLU 时为 4h）"),
    Term("d", "data-parallel size: copies of the model", "数据并行度（DP）",
         "模型副本的份数"),
    Term("cp", "context-parallel size: GPUs that share one sequence, s/cp tokens each",
         "上下文并行度（CP）", "共同分担一条序列的 GPU 数，每卡 s/cp 个 token"),
    Term("ep", "expert-parallel size: GPUs that share a mixture-of-experts layer's experts, "
         "E/ep each", "专家并行度（EP）", "共同分担一个混合专家层的专家的 GPU 数，每卡 E/ep 个专家"),
    Term("etp", "expert tensor-parallel size: GPUs that split each expert's matrices "
         "(default t)", "专家张量并行度（ETP）", "切分每个专家矩阵的 GPU 数（默认等于 t）"),
    Term("d_h", "one attention head's width: h/a, or kv_channels", "注意力头宽度",
         "一个注意力头的宽度：h/a，或 kv_channels"),
    Term("M", "one layer's activation memory: bytes per micro-batch, per GPU",
         "单层激活显存", "一层的激活显存：每个微批次、每卡的字节数"),
    Term("k", "layers per group under full recomputation (recompute_num_layers)",
         "每组重计算层数", "完全重计算时每组的层数（recompute_num_layers）"),
    Term("N", "micro-batch group size of the interleaved schedule", "微批次组大小",
         "交错式调度中一组的微批次数"),
    Term("i", "index of a pipeline stage, 0 first", "流水线级序号",
         "流水线级的编号，首级为 0"),
    Term("j", "index of an attention head", "注意力头序号", "注意力头的编号"),
    Term("F", "a forward pass in a schedule chart", "前向计算", "调度图中的一次前向计算"),
    Term("B", "a backward pass in a schedule chart", "反向计算", "调度图中的一次反向计算"),
    Term("X", "a block's input", "输入", "一个模块的输入"),
    Term("V", "attention's value tensor; where logits are counted (notebooks 06, 09, 10, 12), "
         "the vocabulary size",
         "值矩阵 / 词表大小", "注意力的值张量；在讲 logits 的地方（笔记本 06、09、10、12）指词表大小"),
    Term("E", "experts in a mixture-of-experts layer (num_experts)", "专家数",
         "一个混合专家层中的专家个数（num_experts）"),
    Term("T", "routed token copies one GPU's experts run in a mixture-of-experts layer: "
         "N*k*etp/t under balanced routing (N = s*b tokens, k experts each)",
         "专家处理的路由 token 副本数", "一块 GPU 上的专家在一个混合专家层中处理的路由 token 副本数："
         "均衡路由时为 N*k*etp/t（N = s*b 个 token，每个 token 选 k 个专家）"),
    Term("c", "capacity factor: the tokens an expert takes, as a multiple of its share under "
         "balanced routing (--moe-expert-capacity-factor)", "容量因子",
         "一个专家接收的 token 数是均衡路由下其份额的多少倍（--moe-expert-capacity-factor）"),
    Term("D", "multi-token prediction modules after the last layer, each predicting one "
         "token further (mtp_num_layers, --mtp-num-layers)", "多 token 预测模块数",
         "最后一层之后的多 token 预测模块个数，每个模块多预测一个更远的 token"
         "（mtp_num_layers，--mtp-num-layers）"),
)
"""The paper's symbols, those the notebooks add (v, g, f, d, M, k, N, E, D) and
the letters they name things with."""

TERMS = (
    Term("activation memory", "tensors the forward pass keeps for the backward pass",
         "激活显存", "前向传播为反向传播保存的张量"),
    Term("storage convention", "what the paper counts: 16-bit activations, 1-byte masks, "
         "the map stored (sec. 4.1)", "存储口径",
         "论文的计数方式：16 位激活、每元素 1 字节的掩码、保存注意力矩阵（第 4.1 节）"),
    Term("per GPU", "on each GPU of a tensor-parallel group", "每卡",
         "张量并行组里每块 GPU 上的量"),
    Term("tensor parallelism", "one layer's matrices split over t GPUs (Megatron-LM)",
         "张量并行", "一层的矩阵分到 t 块 GPU 上（Megatron-LM）"),
    Term("column-parallel linear", "each GPU holds some columns of the weight and computes "
         "its own slice of the output", "列并行线性层",
         "每卡存权重的若干列，算出输出的一个切片"),
    Term("row-parallel linear", "each GPU holds some rows of the weight and computes a "
         "partial sum of the whole output", "行并行线性层",
         "每卡存权重的若干行，算出整个输出的一个部分和"),
    Term("all-reduce", "every GPU ends with the sum of all GPUs' tensors",
         "All-Reduce（全归约）", "每卡最后都得到所有卡上张量之和"),
    Term("sequence parallelism", "the tensors tensor parallelism replicates are split "
         "along s instead", "序列并行", "把张量并行中每卡完整保存的张量改为沿 s 切分"),
    Term("context parallelism", "each of cp GPUs keeps s/cp tokens of every activation; "
         "only the core attention exchanges keys and values (p2p: a ring; allgather) or "
         "heads (a2a: Ulysses all-to-all)", "上下文并行",
         "cp 块 GPU 各保存每个激活的 s/cp 个 token；只有核心注意力交换 K、V（p2p 环形传递、"
         "allgather 全收集）或注意力头（a2a：Ulysses 全对全）",
         ("p2p", "a2a", "allgather", "a2a+p2p")),
    Term("pipeline parallelism", "consecutive layers on different GPUs (stages)",
         "流水线并行", "相邻的若干层放在不同的 GPU（流水线级）上"),
    Term("pipeline stage", "the GPU (group) that runs L/p consecutive layers",
         "流水线级（stage）", "运行 L/p 个相邻层的 GPU（组）",
         chinese_zh="流水线级（原文：stage）"),
    Term("first / last stage", "stage 0, which runs the embedding; stage p-1, which runs "
         "the output layer and the loss", "首级 / 末级",
         "第 0 级（含嵌入层）；第 p-1 级（含输出层和损失函数）"),
    Term("micro-batch", "a slice of the batch that moves through the pipeline on its own",
         "微批次（micro-batch）", "批次中独立流过流水线的一小份",
         chinese_zh="微批次（原文：micro-batch）"),
    Term("peak_in_flight", "micro-batches whose activations a stage holds at one moment, at "
         "most (the source article's m)", "在途微批次数（原文的 m）",
         "某一级同一时刻最多保存激活的微批次数（即原文的 m）", ("peak_in_flight",),
         chinese_zh="在途微批次数（原文记作 m）"),
    Term("pipeline bubble", "time a stage waits idle for work", "流水线气泡",
         "某一级空等任务的时间"),
    Term("GPipe", "all forward passes, then all backward passes", "GPipe 调度",
         "先做完全部前向，再做全部反向", ("gpipe",)),
    Term("1F1B", "one forward, one backward: a stage holds at most p micro-batches",
         "1F1B 调度", "一次前向、一次反向交替：每级最多保存 p 个微批次", ("1f1b",)),
    Term("interleaved schedule", "1F1B over v model chunks per GPU: smaller bubble, more "
         "activations", "交错式调度", "每卡 v 个模型块上的 1F1B：气泡更小，激活更多",
         ("interleaved",)),
    Term("activation recomputation", "drop activations in the forward pass and compute "
         "them again in the backward pass", "激活重计算",
         "前向时丢弃激活，反向时重新算出"),
    Term("selective recomputation", "recompute only the core attention (the s x s maps)",
         "选择性重计算", "只重算核心注意力（s x s 矩阵）", ("selective",)),
    Term("full recomputation", "keep only each layer's input; recompute the whole layer",
         "完全重计算", "每层只保存输入，反向时重算整层", ("full",)),
    Term("FlashAttention", "attention computed tile by tile; the s x s map is never stored",
         "FlashAttention", "分块计算的精确注意力，从不保存 s x s 矩阵"),
    Term("grouped-query attention", "several query heads share one key/value head",
         "分组查询注意力（GQA）", "多个查询头共用一个 KV 头"),
    Term("query/key norm", "a norm over each head's query and key before the rotary "
         "embedding (qk_layernorm, Qwen3)", "查询/键归一化",
         "在旋转位置编码之前对每个头的查询和键做归一化（qk_layernorm，Qwen3）"),
    Term("token dispatch", "a mixture-of-experts layer sends each token's k copies to "
         "their experts' GPUs (all-to-all) and combines the results back",
         "token 分发", "混合专家层把每个 token 的 k 个副本发往其专家所在的 GPU（all-to-all），"
         "再把结果合并回来"),
    Term("multi-latent attention", "DeepSeek's attention: K and V (and Q) come from small "
         "latents of width kv_lora_rank (q_lora_rank) through up projections; in training "
         "every head still keeps its own Q, K and V", "多头潜在注意力（MLA）",
         "DeepSeek 的注意力：K、V（以及 Q）由宽度为 kv_lora_rank（q_lora_rank）的小潜在向量"
         "经上投影得到；训练时每个头仍保存自己的 Q、K、V"),
    Term("SwiGLU", "gated MLP activation: silu(gate) * up", "SwiGLU 激活函数",
         "带门控的 MLP 激活：silu(gate) * up"),
    Term("dropout mask", "which elements dropout zeroed, 1 byte each", "dropout 掩码",
         "记录 dropout 置零了哪些元素，每元素 1 字节"),
    Term("attention map", "the s x s softmax probabilities, one per head and sample",
         "注意力矩阵（Attention Map）", "每个头、每个样本一个 s x s 的 softmax 概率矩阵",
         chinese_zh="注意力矩阵（原文：Attention Map）"),
    Term("fixed term", "10sbh: tensors every tensor-parallel GPU keeps whole", "固定项",
         "10sbh：张量并行的每卡都完整保存的张量", ("fixed",)),
    Term("intermediate term", "24sbh/t: tensors split over the t GPUs",
         "中间项（原文：中间态）", "24sbh/t：分到 t 块 GPU 上的张量", ("intermediate",)),
    Term("attention-map term", "5as^2b/t: the s x s tensors, split by heads",
         "注意力矩阵项（Attention Map 项）", "5as^2b/t：按注意力头切分的 s x s 张量",
         ("attention_map",), chinese_zh="注意力矩阵项（原文：Attention Map 项）"),
    Term("replicated", "every tensor-parallel GPU keeps the whole tensor",
         "复制（每卡完整一份）", "张量并行的每卡都保存整个张量", ("replicated",)),
    Term("hidden-split", "each GPU keeps a 1/t slice of the tensor's last dimension (h, or "
         "the MLP's inner width 4h or f)", "按隐藏维度切分",
         "每卡保存张量最后一维（h，或 MLP 中间维度 4h、f）的 1/t", ("hidden-split",)),
    Term("head-split", "each GPU keeps a/t heads, each head whole", "按注意力头切分",
         "每卡保存 a/t 个完整的注意力头", ("head-split",)),
    Term("sequence-split", "each GPU keeps s/t positions", "按序列切分",
         "每卡保存 s/t 个位置", ("sequence-split",)),
    Term("expert-routed", "a mixture-of-experts layer's routed copies: each GPU keeps those its "
         "local experts receive", "按专家路由",
         "混合专家层中路由出去的副本：每卡保存分给本地专家的那些", ("expert-routed",)),
    Term("data parallelism", "d copies of the model, each on its own data", "数据并行",
         "d 份模型副本，各自处理自己的数据"),
    Term("model states", "weights, gradients and optimizer states", "模型状态",
         "权重、梯度和优化器状态"),
    Term("ZeRO", "model states split over the data-parallel GPUs", "ZeRO（零冗余优化器）",
         "把模型状态分到数据并行的各卡上", ("zero",)),
    Term("MiB / GiB", "2^20 / 2^30 bytes (GB is 10^9 bytes, but a GPU's \"80GB\" label "
         "means about 80 GiB: 81920 MiB on an A100 80GB)", "MiB / GiB（二进制单位）",
         "2^20 / 2^30 字节（GB 是 10^9 字节，但 GPU 标称的“80GB”约为 80 GiB："
         "A100 80GB 为 81920 MiB）"),
    Term("timeline", "the moments of one training step and the bytes alive at each",
         "显存时间线", "一步训练中的各个时刻，以及每一刻占用的字节数"),
    Term("peak", "the most bytes alive at one moment of a step: what "
         "torch.cuda.max_memory_allocated() reports; not the sum of the parts", "峰值显存",
         "一步训练中某一时刻占用字节数的最大值，即 torch.cuda.max_memory_allocated() "
         "报告的值；不是各部分之和"),
    Term("workspace", "scratch memory cuBLAS and Transformer Engine keep for matrix "
         "multiplications", "算子临时空间（workspace）",
         "cuBLAS 和 Transformer Engine 为矩阵乘法保留的临时显存"),
    Term("vocab-parallel cross-entropy", "Megatron-LM's loss: an fp32 copy of the logits "
         "beside them, the fp32 softmax kept for backward", "词表并行交叉熵",
         "Megatron-LM 的损失函数：在 logits 旁另存一份 fp32 副本，并为反向保存 fp32 的 softmax",
         ("vocab_parallel",)),
    Term("gradient buffer", "persistent fp32 gradients (Megatron-LM), or gradients "
         "created in backward (plain PyTorch)", "梯度缓冲区",
         "常驻的 fp32 梯度（Megatron-LM），或在反向中才创建的梯度（原生 PyTorch）",
         ("persistent", "backward")),
    Term("zero-bubble schedule", "the backward split into an input-gradient step (I) and a "
         "weight-gradient step (W) that fills the bubbles", "零气泡调度",
         "把反向拆成输入梯度（I）和权重梯度（W）两步，用 W 填补气泡",
         ("interleaved-zb", "zbv")),
    Term("DualPipeV", "DeepSeek's DualPipe cut in half: a V-shaped zero-bubble schedule, "
         "rank r holds stages r and 2p-1-r", "DualPipeV 调度",
         "DeepSeek 的 DualPipe 的一半：V 形零气泡调度，rank r 负责第 r 级和第 2p-1-r 级",
         ("dualpipev",)),
    Term("looped BFS", "interleaved chunks run breadth-first: all micro-batches through "
         "one chunk before the next", "循环广度优先调度",
         "交错的模型块按广度优先运行：所有微批次先过完一个块，再进入下一个块",
         ("looped-bfs",)),
    Term("uneven pipeline split", "stages with different numbers of layers, to relieve the "
         "first or last stage", "不均匀流水线切分", "各级层数不同，用来减轻首级或末级的负担"),
    Term("LoRA", "fine-tuning that freezes every weight and trains low-rank adapters "
         "(X A^T) B^T of rank r on chosen linear layers (lora_rank, lora_targets)",
         "低秩适配（LoRA）", "冻结全部权重，只在选定的线性层上训练秩为 r 的低秩适配器 "
         "(X A^T) B^T（lora_rank、lora_targets）"),
    Term("frozen weight", "a weight that is not trained: no gradient, no optimizer state, "
         "and its layer keeps no input for a weight gradient", "冻结权重",
         "不训练的权重：没有梯度和优化器状态，其所在层也不为权重梯度保存输入"),
    Term("FP8", "8-bit floating point (e4m3, e5m2) for the linear layers' inputs and "
         "weights under Transformer Engine, with a scale per tensor, or per block of 128 "
         "under blockwise scaling, or a one-byte power of two per 32 under MXFP8, which "
         "runs on Blackwell only (fp8, fp8_recipe)", "FP8 训练",
         "Transformer Engine 下线性层的输入和权重使用 8 位浮点（e4m3、e5m2），每个张量带一个缩放因子，"
         "分块缩放（blockwise）时每 128 个元素一块、每块一个；MXFP8 每 32 个元素一个 1 字节的 2 的幂，"
         "只在 Blackwell 上运行（fp8、fp8_recipe）"),
    Term("mixture of experts (MoE)", "a layer whose MLP is E experts; a router sends each "
         "token to k of them (num_experts, moe_router_topk)", "混合专家（MoE）",
         "MLP 换成 E 个专家的层；路由器把每个 token 送往其中 k 个专家（num_experts、moe_router_topk）"),
    Term("expert parallelism", "each of ep GPUs holds E/ep experts of every MoE layer: it "
         "divides the experts' weights and gradients, not the activations", "专家并行（EP）",
         "ep 块 GPU 各持有每个 MoE 层的 E/ep 个专家：切分专家的权重和梯度，不切分激活"),
    Term("named-module recomputation", "recompute chosen modules of each layer (Megatron-LM's "
         "recompute_modules: core_attn, mlp, layernorm, moe_act, ...)", "按模块重计算",
         "只重计算每层中选定的模块（Megatron-LM 的 recompute_modules：core_attn、mlp、"
         "layernorm、moe_act 等）"),
    Term("activation offloading", "the first n layers' large saved tensors go to pinned "
         "host memory in the forward and come back for the backward; at most L - n layers' "
         "stay on the GPU (cpu_offloading_num_layers)", "激活卸载",
         "前 n 层保存的大张量在前向时移到锁页主机内存，反向时再取回；GPU 上最多保留 L - n 层的激活"
         "（cpu_offloading_num_layers）", ("cpu_offloading_num_layers",)),
    Term("long context", "sequences of 32K to 128K tokens and more: activations grow with s, "
         "model states do not", "长上下文", "32K 到 128K 乃至更多 token 的序列：激活随 s 增长，模型状态不变"),
    Term("FSDP2", "PyTorch's fully_shard (ZeRO-3 as it runs): fp32 parameters, gradients and "
         "Adam states sharded over d; each layer's bf16 parameters all-gathered just before "
         "its forward and its backward, the next layer's prefetched, gradients "
         "reduce-scattered (use_torch_fsdp2)", "FSDP2（PyTorch 全分片数据并行）",
         "PyTorch 的 fully_shard（实际运行中的 ZeRO-3）：fp32 参数、梯度和 Adam 状态分到 d 块 GPU 上；"
         "每层的 bf16 参数在其前向和反向之前才 all-gather，并预取下一层的参数；梯度做 reduce-scatter"
         "（use_torch_fsdp2）", ("use_torch_fsdp2",)),
    Term("reshard_after_forward", "FSDP2's choice: free a layer's gathered parameters after "
         "its forward and gather them again for its backward (True), or keep every layer's "
         "until its backward (False)", "前向后重新分片（reshard_after_forward）",
         "FSDP2 的选项：前向之后释放该层聚合的参数、反向前再聚合一次（True），"
         "或把每层的保留到它的反向（False）", ("reshard_after_forward",)),
    Term("Megatron-FSDP", "Megatron-LM's own FSDP (use_megatron_fsdp): bf16 weights, fp32 main "
         "weights, gradients and Adam states sharded over d in buckets; layers gathered ahead "
         "until half the communication unit; each layer's gradients added into a gradient "
         "bucket, a temporary unsharded buffer, then reduce-scattered",
         "Megatron-FSDP（Megatron-LM 自带的全分片数据并行）",
         "Megatron-LM 自己的 FSDP（use_megatron_fsdp）：bf16 权重、fp32 主权重、梯度和 Adam 状态按桶分到 "
         "d 块 GPU 上；各层提前聚合，直到预取量达到通信单元的一半；每层的梯度先累加进梯度桶（一块临时的、"
         "未切分的缓冲区），再做 reduce-scatter", ("use_megatron_fsdp",)),
    Term("DeepEP", "DeepSeek's expert-parallel communication library: Megatron-LM's flex "
         "dispatcher sends each token once to every GPU that holds one of its experts, "
         "through DeepEP's buffers outside PyTorch's allocator; its HybridEP backend "
         "delivers them already sorted by expert "
         "(moe_token_dispatcher_type='flex', moe_flex_dispatcher_backend)",
         "DeepEP（专家并行通信库）",
         "DeepSeek 的专家并行通信库：Megatron-LM 的 flex 分发器把每个 token 只发一次，发往持有它某个专家的"
         "每块 GPU，经由 DeepEP 在 PyTorch 分配器之外的缓冲区传递；其 HybridEP 后端送达时 token 已按专家排好"
         "（moe_token_dispatcher_type='flex'、moe_flex_dispatcher_backend）",
         ("flex",)),
    Term("communication unit", "Megatron-FSDP's size in elements that bounds the prefetch (half "
         "of it) and the gradient buckets waiting to be freed: by default twice a layer's "
         "parameters, at least 10^9 (suggested_communication_unit_size)", "通信单元",
         "Megatron-FSDP 用来限定预取量（其一半）和等待释放的梯度桶的元素个数：默认为一层参数量的两倍，"
         "至少 10^9（suggested_communication_unit_size）", ("suggested_communication_unit_size",)),
)
"""The field's terms as the notebooks use them."""

GLOSSARY = SYMBOLS + TERMS
"""Every entry: symbols first, then terms."""

HEADERS = {"en": ("term", "meaning", "中文"), "zh": ("符号或术语", "含义", "中文术语")}
"""The table's header in each language (:mod:`actmem.language`)."""


def glossary_table(language: str | None = None) -> str:
    """The glossary as a Markdown table: term, meaning, Chinese term.

    Args:
        language: ``"en"`` or ``"zh"`` (default: the current language,
            :func:`actmem.get_language`): the language of the header and of
            the meaning column.

    Raises:
        ValueError: ``language`` is not one of :data:`actmem.language.LANGUAGES`.
    """
    from .language import LANGUAGES, get_language

    language = language or get_language()
    if language not in LANGUAGES:
        raise ValueError(f"language={language!r} is not offered; choose one of "
                         f"{', '.join(map(repr, LANGUAGES))}")
    lines = ["| {} | {} | {} |".format(*HEADERS[language]), "|---|---|---|"]
    for e in GLOSSARY:
        term = f"`{e.term}`" if e in SYMBOLS or e.code == (e.term,) else e.term
        meaning = e.meaning_zh if language == "zh" else e.meaning
        chinese = (e.chinese_zh or e.chinese) if language == "zh" else e.chinese
        lines.append(f"| {term} | {meaning} | {chinese} |")
    return "\n".join(lines)
