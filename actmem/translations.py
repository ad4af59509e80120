"""Chinese labels for figures and widgets, keyed by the English label.

Read by :func:`actmem.language.chinese` after ``actmem.set_language("zh")``.
A key is exactly the English text the code passes to ``tr`` (a label, or a
``str.format`` template whose ``{fields}`` the Chinese keeps); names that
come from data (ledger rows, placements, Table 2 rows, variants) and the
figure titles the notebooks pass in are keys too. Terms follow
:mod:`actmem.glossary`; symbols (s, b, h, a, t, p, L, m, v, k) and units
stay as they are. ``tests/test_language.py`` checks that every label a
figure or explorer draws has an entry, and that every entry is used.
"""

ZH = {
    # ---- readouts (actmem.views.widgets)
    "total: {size}": "总计：{size}",
    "fixed: {size}": "固定项：{size}",
    "intermediate: {size}": "中间项：{size}",
    "attention map: {size}": "注意力矩阵项：{size}",
    "fixed per GPU: {size}": "每卡固定项：{size}",
    "intermediate per GPU: {size}": "每卡中间项：{size}",
    "attention map per GPU: {size}": "每卡注意力矩阵项：{size}",
    "hidden activations (s, b, h) = ({s}, {b}, {h}); Q, K, V on one GPU (s, b, h/t) = "
    "({s}, {b}, {h_t}); "
    "MLP inner (s, b, 4h/t) = ({s}, {b}, {f_t}); attention map on one GPU (b, a/t, s, s) = "
    "({b}, {a_t}, {s}, {s})":
        "隐藏层激活 (s, b, h) = ({s}, {b}, {h})；单块 GPU 上的 Q、K、V (s, b, h/t) = "
        "({s}, {b}, {h_t})；MLP 内部激活 (s, b, 4h/t) = ({s}, {b}, {f_t})；单块 GPU 上的注意力矩阵 "
        "(b, a/t, s, s) = ({b}, {a_t}, {s}, {s})",
    "fixed {fixed}, intermediate {intermediate}, {attention}":
        "固定项 {fixed}，中间项 {intermediate}，{attention}",
    "attention-map statistics {k} bas/t (no s x s map)":
        "注意力矩阵项只剩统计量 {k} bas/t（不保存 s x s 矩阵）",
    "attention map {term}": "注意力矩阵项 {term}",
    # ledger table
    "tensor": "张量",
    "block": "模块",
    "shape": "形状",
    "bytes/elem": "字节/元素",
    "placement": "存放方式",
    "group": "分组",
    "MiB per GPU": "每卡显存（MiB）",
    "needed for": "反向传播中的用途",
    # controls
    "FlashAttention": "FlashAttention",
    "sequence parallel": "序列并行",
    "attention mask from the data loader": "数据加载器生成注意力掩码",
    "recompute": "重计算",
    "dropout": "dropout",
    "layer": "层",
    "schedule": "调度",
    "model": "模型",
    "states": "模型状态",
    "gpu": "GPU",
    "kv_heads": "KV 头数",
    "etp": "etp",
    "none": "不重计算",
    "selective": "选择性",
    "full": "完全",
    "full, k={k}": "完全，k={k}",
    # ---- ledger rows: names, blocks, placements, groups, why kept
    "input of the first LayerNorm": "第一个 LayerNorm 的输入",
    "input of the QKV projection": "QKV 投影的输入",
    "Q (query)": "Q（查询）",
    "K (key)": "K（键）",
    "V (value)": "V（值）",
    "softmax output (attention probabilities)": "softmax 输出（注意力概率）",
    "attention-dropout mask": "注意力 dropout 掩码",
    "attention-dropout output (multiplies V)": "注意力 dropout 输出（与 V 相乘）",
    "input of the output projection": "输出投影的输入",
    "dropout mask after the attention block": "注意力模块之后的 dropout 掩码",
    "input of the second LayerNorm": "第二个 LayerNorm 的输入",
    "input of the MLP's first linear": "MLP 第一个线性层的输入",
    "GeLU input (first linear's output)": "GeLU 的输入（第一个线性层的输出）",
    "ReLU output (squared ReLU's input to pow)": "ReLU 的输出（平方 ReLU 中 pow 的输入）",
    "input of the MLP's second linear": "MLP 第二个线性层的输入",
    "dropout mask after the MLP block": "MLP 模块之后的 dropout 掩码",
    "softmax log-sum-exp (fp32)": "softmax 的 log-sum-exp（fp32）",
    "attention output in flash-attn's layout (beside Transformer Engine's contiguous copy)":
        "flash-attn 布局下的注意力输出（Transformer Engine 另有一份连续副本）",
    "cos and sin of the unfused rotary embedding (Q's and K's)":
        "未融合旋转位置编码的 cos 与 sin（Q 与 K 各一份）",
    "SwiGLU gate projection output": "SwiGLU gate 投影的输出",
    "SwiGLU up projection output": "SwiGLU up 投影的输出",
    "layer input (checkpoint for recomputation)": "层的输入（重计算用的检查点）",
    "LayerNorm": "LayerNorm",
    "attention": "注意力",
    "MLP": "MLP",
    "replicated": "每卡完整一份",
    "sequence-split": "按序列切分",
    "hidden-split": "按隐藏维度切分",
    "head-split": "按注意力头切分",
    "expert-routed": "按专家路由",
    "fixed": "固定项",
    "intermediate": "中间项",
    "attention_map": "注意力矩阵项",
    "LayerNorm backward: the input is normalized again to get the gradients of the input, "
    "scale and shift": "LayerNorm 反向：重新归一化输入，求输入、缩放和偏移的梯度",
    "weight gradient of the Q, K, V projections: dW = X^T dY": "Q、K、V 投影的权重梯度：dW = X^T dY",
    "gradient of K: the scores are S = Q K^T, so dK = dS^T Q":
        "K 的梯度：分数 S = Q K^T，所以 dK = dS^T Q",
    "gradient of Q: dQ = dS K": "Q 的梯度：dQ = dS K",
    "gradient of the attention probabilities: dP = dO V^T": "注意力概率的梯度：dP = dO V^T",
    "softmax backward: dS = P * (dP - rowsum(dP * P)) needs P":
        "softmax 反向：dS = P * (dP - rowsum(dP * P)) 需要 P",
    "dropout backward: the gradient is multiplied by the same mask": "dropout 反向：梯度乘以同一个掩码",
    "gradient of V: dV = P_dropped^T dO (the matmul's other input)":
        "V 的梯度：dV = P_dropped^T dO（矩阵乘法的另一个输入）",
    "weight gradient of the output projection: dW = X^T dY": "输出投影的权重梯度：dW = X^T dY",
    "weight gradient of the MLP's first linear: dW = X^T dY": "MLP 第一个线性层的权重梯度：dW = X^T dY",
    "GeLU backward: dX = dY * GeLU'(X) needs X": "GeLU 反向：dX = dY * GeLU'(X) 需要 X",
    "squared ReLU backward: pow's dR = dY * 2R and relu's mask (R > 0) need R = relu(X)":
        "平方 ReLU 反向：pow 的 dR = dY * 2R 与 relu 的掩码（R > 0）需要 R = relu(X)",
    "weight gradient of the MLP's second linear: dW = X^T dY":
        "MLP 第二个线性层的权重梯度：dW = X^T dY",
    "FlashAttention backward: rebuilds P = exp(S - lse) tile by tile from Q and K":
        "FlashAttention 反向：由 Q 和 K 逐块重建 P = exp(S - lse)",
    "FlashAttention backward: D = rowsum(dO * O) reads the output in flash-attn's own layout "
    "(b, s, a, d)": "FlashAttention 反向：D = rowsum(dO * O) 读取 flash-attn 自身布局 (b, s, a, d) "
                    "下的输出",
    "rotary embedding backward: the gradient of t * cos + rotate_half(t) * sin multiplies by "
    "cos and sin": "旋转位置编码反向：t * cos + rotate_half(t) * sin 的梯度要乘以 cos 和 sin",
    "SwiGLU backward: d(up) = dY * silu(gate) and d(gate) = dY * up * silu'(gate) need the gate":
        "SwiGLU 反向：d(up) = dY * silu(gate) 和 d(gate) = dY * up * silu'(gate) 需要 gate",
    "SwiGLU backward: d(gate) = dY * up * silu'(gate) needs up":
        "SwiGLU 反向：d(gate) = dY * up * silu'(gate) 需要 up",
    "full recomputation: the layer's forward pass is run again from it during the backward pass":
        "完全重计算：反向传播时从它出发重新运行该层的前向计算",
    # ---- figures (actmem.views.figures)
    "fixed (replicated)": "固定项（每卡完整一份）",
    "intermediate (split by hidden or heads)": "中间项（按隐藏维度或注意力头切分）",
    "attention map (split by heads)": "注意力矩阵项（按注意力头切分）",
    "fixed term": "固定项",
    "intermediate term": "中间项",
    "attention-map term (s x s maps or their statistics)": "注意力矩阵项（s x s 矩阵或其统计量）",
    "full copy on each GPU": "完整副本",
    "a 1/t slice of h (Q, K, V) or of the MLP's 4h": "沿 h（Q、K、V）或 MLP 的 4h 切出 1/t",
    "{placement}: {size}": "{placement}：{size}",
    "a/t heads, each map whole s x s": "a/t 个头，每个头的 s x s 矩阵完整保存",
    "global tensor": "全局张量",
    "GPU 1 (of {t})": "GPU 1（共 {t} 块）",
    "{size} per GPU": "每卡 {size}",
    "t = 1: no GPU 1": "t = 1：没有 GPU 1",
    "{shape} (one square per head)": "{shape}（每个头一个方块）",
    "Who keeps what at t = {t} (s={s}, b={b}, h={h}, a={a}); logical shapes, not to scale":
        "t = {t} 时谁保存什么（s={s}, b={b}, h={h}, a={a}）；逻辑形状，不按比例",
    "X  (s, b, h)\nwhole": "X  (s, b, h)\n完整",
    "X W1[:, part {gpu}]\n(s, b, 4h/t)": "X·W1（第 {gpu} 组列）\n(s, b, 4h/t)",
    "column-parallel linear\n(GPU i: part i of W1's columns)": "列并行线性层\n（GPU i：W1 的第 i 组列）",
    "partial sum {gpu}\n(s, b, h)": "部分和 {gpu}\n(s, b, h)",
    "row-parallel linear\n(GPU i: part i of W2's rows)": "行并行线性层\n（GPU i：W2 的第 i 组行）",
    "Y  (s, b, h)\nwhole": "Y  (s, b, h)\n完整",
    "all-reduce:\nsum over GPUs": "All-Reduce：\n各卡求和",
    "An MLP block on t = {t} GPUs (Megatron-LM): only the 4h-wide middle is split; "
    "input and output are whole on every GPU":
        "t = {t}（{t} 块 GPU）时的 MLP 模块（Megatron-LM）：只有 4h 宽的中间部分被切分；"
        "输入和输出在每块 GPU 上都是完整的",
    "whole tensor": "完整张量",
    "kept by one GPU: {term}": "单块 GPU 保存：{term}",
    "{part} of {whole}": "{part}（共 {whole}）",
    "MiB per layer, per micro-batch (bar lengths to scale)": "显存（MiB；每层、每个微批次；条形长度按比例）",
    "What one GPU keeps at t = {t} (s={s}, b={b}, h={h}, a={a}), to scale":
        "t = {t} 时单块 GPU 保存的内容（s={s}, b={b}, h={h}, a={a}；按比例绘制）",
    "the layer": "基准层",
    "MiB per layer, per micro-batch, per GPU": "显存（MiB；每层、每个微批次、每卡）",
    "Double one symbol (s={s}, b={b}, h={h}, a={a}, t={t})":
        "把一个符号翻倍（s={s}, b={b}, h={h}, a={a}, t={t}）",
    "fixed floor: the same at every t": "固定项下限：任何 t 下都相同",
    "outlined: the t chosen": "粗框：选定的 t",
    "tensor-parallel size t (GPUs)": "张量并行度 t（GPU 数）",
    "activation memory (MiB)\nper layer, per micro-batch, per GPU": "激活显存（MiB）\n每层、每个微批次、每卡",
    "Three terms against t (s={s}, b={b}, h={h}, a={a});\nfixed floor (dashed) {size} at every t":
        "三项随 t 的变化（s={s}, b={b}, h={h}, a={a}）；\n固定项下限（虚线）：任何 t 下都是 {size}",
    "Three terms against t (s={s}, b={b}, h={h}, a={a}); fixed floor (dashed) {size} at every t":
        "三项随 t 的变化（s={s}, b={b}, h={h}, a={a}）；固定项下限（虚线）：任何 t 下都是 {size}",
    "model states": "模型状态",
    "parameters": "参数",
    "gradients": "梯度",
    "optimizer states": "优化器状态",
    "activations": "激活",
    "Transformer layers (this formula)": "Transformer 层（本公式）",
    "embedding, output layer and loss": "嵌入层、输出层和损失",
    "runtime": "运行时",
    "communication buffers": "通信缓冲区",
    "kernel workspaces": "算子临时空间（workspace）",
    "allocator overhead and fragmentation": "内存分配开销与显存碎片",
    # ---- schedules (actmem.views.schedule_figures, schedule_views)
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved": "交错式",
    "interleaved-zb": "交错式零气泡",
    "zbv": "ZBV（V 形零气泡）",
    "dualpipev": "DualPipeV",
    "looped-bfs": "循环广度优先",
    "GPipe": "GPipe",
    "1F1B": "1F1B",
    "interleaved 1F1B": "交错式 1F1B",
    "interleaved zero bubble": "交错式零气泡（ZB-1p）",
    "zero bubble V": "ZBV（V 形零气泡）",
    "DualPipe V": "DualPipeV",
    "looped breadth-first": "循环广度优先",
    "input gradient I (1 unit)": "输入梯度 I（1 个单位）",
    "weight gradient W (1 unit)": "权重梯度 W（1 个单位）",
    "order": "执行顺序",
    "stage {i}": "第 {i} 级",
    "forward (1 unit per stage)": "前向（每级 1 个单位）",
    "backward (2 units)": "反向（2 个单位）",
    "model chunk >= 1": "本地模型块 ≥ 1",
    ", v={v} chunks per GPU": "，每卡 v={v} 个模型块",
    "{title}: p={p} stages, m={m} micro-batches{chunks}\n"
    "bubble {bubble:.1%} of the ideal time; {note}":
        "{title}：p={p} 级，m={m} 个微批次{chunks}\n"
        "气泡占理想时间的 {bubble:.1%}；{note}",
    "{title}: p={p} stages, m={m} micro-batches{chunks}; {note}":
        "{title}：p={p} 级，m={m} 个微批次{chunks}；{note}",
    "box numbers: micro-batch": "方框中的数字：微批次编号",
    "boxes too narrow for micro-batch numbers": "方框太窄，未标微批次编号",
    "stage {i}: peak {peak}": "第 {i} 级：峰值 {peak}",
    "chunk passes held": "保存的块计算数",
    "micro-batches held": "保存的微批次数",
    "time (units: one forward pass of one micro-batch through one stage)":
        "时间（单位：一个微批次经过一个流水线级的一次前向计算）",
    "interleaved 1F1B, v=2, m={m}: % over L*M on each bar":
        "交错式 1F1B，v=2，m={m}：柱上标出高于 L*M 的百分比",
    "L*M = {size}: all L layers, one micro-batch": "L*M = {size}：全部 L 层，一个微批次",
    "L*M/p: naive, not the peak": "L*M/p：朴素估计，不是峰值",
    "pipeline-parallel size p (stages)": "流水线并行度 p（级数）",
    "first stage's activations (MiB)": "首级（第 0 级）的激活（MiB）",
    "Under 1F1B p cancels: the first stage holds L*M whatever p (L={L}, M={size});\n"
    "interleaving (hatched) holds more, except at m = p":
        "1F1B 下 p 被约掉：无论 p 多大，首级都保存 L*M（L={L}，M={size}）；\n"
        "交错式（斜线柱）保存得更多，m = p 时除外",
    "stage": "级",
    "passes held at peak": "峰值时保存的计算数",
    "layers per pass": "每次计算的层数",
    "first stage: {held} x {layers} layers x {M} = {first}, {ratio:.3f} x L*M ({whole})":
        "首级：{held} x {layers} 层 x {M} = {first}，{ratio:.3f} x L*M（{whole}）",
    "bubble: {fraction} of the ideal time = {percent:.1%} (simulated)":
        "气泡：理想时间的 {fraction} = {percent:.1%}（模拟）",
    # ---- will it fit (actmem.views.fit_figures, fit_views, train_cli)
    "weights": "权重",
    "optimizer": "优化器",
    "layer activations": "层激活",
    "embedding activations": "嵌入层激活",
    "output activations": "输出层激活",
    "recompute working set": "重计算工作集",
    "reserve": "预留",
    "GPU: {size} (fits)": "GPU：{size}（放得下）",
    "GPU: {size} (does not fit)": "GPU：{size}（放不下）",
    "memory per GPU (GiB)": "每卡显存（GiB）",
    "Peak memory of each pipeline stage's GPU": "每个流水线级所在 GPU 的峰值显存",
    # timeline (actmem.views.fit_figures.timeline_figure)
    "logits and loss": "logits 和损失",
    "transient (inside an operation)": "临时张量（算子内部）",
    "workspaces and buffers": "算子临时空间和缓冲区",
    "capacity less the reserve": "容量减去预留",
    "events of one step, in order": "一个训练步中的事件（按顺序）",
    "What is alive when: one training step": "显存里何时有什么：一个训练步",
    "measured (stored)": "实测（已存数据）",
    "measured": "实测",
    "micro-batch {i}": "微批次 {i}",
    "micro-batch {i}, chunk {c}": "模型块 {c} 上的微批次 {i}",
    # timeline events (actmem.run.moments.timeline), {name}: a micro-batch as above
    "before the step": "训练步开始前",
    "forward of {name}: attention scores beside the softmax": "{name} 的前向：softmax 输出旁还有注意力分数",
    "end of the forward of {name}, its batch still loaded": "{name} 的前向结束，其输入数据仍在显存中",
    "loss of {name}": "{name} 的损失",
    "after the forward of {name}": "{name} 的前向之后",
    "loss backward of {name}": "{name} 的损失反向",
    "backward of {name}: softmax gradient": "{name} 的反向：softmax 的梯度",
    "backward of {name}: softmax gradient, recomputing": "{name} 的反向：softmax 的梯度，正在重计算",
    "backward of {name}: last layer, recomputing": "{name} 的反向：最后一层，正在重计算",
    "backward of {name}: last layer": "{name} 的反向：最后一层",
    "backward of {name}: the last layer's MLP": "{name} 的反向：最后一层的 MLP",
    "backward of {name}: the last layer's gradients made": "{name} 的反向：最后一层的梯度已全部算出",
    "backward of {name}: the last layer's reduce-scatter copy-in":
        "{name} 的反向：最后一层的梯度拷入 reduce-scatter 缓冲区",
    "backward of {name}: the second-to-last layer's gradients made": "{name} 的反向：倒数第二层的梯度已全部算出",
    "backward of {name}: the second-to-last layer's reduce-scatter copy-in":
        "{name} 的反向：倒数第二层的梯度拷入 reduce-scatter 缓冲区",
    "backward of {name}: the second layer's gradients made": "{name} 的反向：第二层的梯度已全部算出",
    "backward of {name}: the second layer's reduce-scatter copy-in":
        "{name} 的反向：第二层的梯度拷入 reduce-scatter 缓冲区",
    "backward of {name}: the first layer's gradients made": "{name} 的反向：第一层的梯度已全部算出",
    "backward of {name}: the first layer's reduce-scatter copy-in":
        "{name} 的反向：第一层的梯度拷入 reduce-scatter 缓冲区",
    "backward of {name}: the root's gradients made": "{name} 的反向：根模块的梯度已全部算出",
    "backward of {name}: the root's reduce-scatter copy-in":
        "{name} 的反向：根模块的梯度拷入 reduce-scatter 缓冲区",
    "forward of {name}: the layer forward that holds the most (activations, gathered layers; "
    "Megatron-FSDP)": "{name} 的前向：占用最多的那一层前向（激活、已聚合的层；Megatron-FSDP）",
    "backward of {name}: the layer backward that holds the most (activations, gathered layers, "
    "gradient buckets; Megatron-FSDP)":
        "{name} 的反向：占用最多的那一层反向（激活、已聚合的层、梯度桶；Megatron-FSDP）",
    "backward of {name}: end of the backward, before its gradient buckets are freed "
    "(Megatron-FSDP)": "{name} 的反向：反向结束、梯度桶释放之前（Megatron-FSDP）",
    "d=8 -> d=64: model states {a} -> {b}; layer activations {c} -> {d} (FSDP2 does not shard "
    "them)": "d=8 -> d=64：模型状态 {a} -> {b}；层激活 {c} -> {d}（FSDP2 不切分激活）",
    "forward of {name}: the last MoE layer's token dispatch":
        "{name} 的前向：最后一个 MoE 层的 token 分发",
    "backward of {name}: the last layer's MoE combine": "{name} 的反向：最后一层 MoE 的结果合并",
    "backward of {name}: the last layer's token dispatch, recomputing":
        "{name} 的反向：最后一层的 token 分发，正在重计算",
    "forward of {name}: the last layer's context-parallel attention":
        "{name} 的前向：最后一层的上下文并行注意力",
    "backward of {name}: the last layer's context-parallel attention":
        "{name} 的反向：最后一层的上下文并行注意力",
    "backward of {name}: the last layer's context-parallel attention, recomputing":
        "{name} 的反向：最后一层的上下文并行注意力，正在重计算",
    # full recomputation, k not dividing the layers: an earlier group sets the peak
    "backward of {name}: softmax gradient, recomputing, in the recomputed group that holds the most":
        "{name} 的反向：softmax 的梯度，正在重计算（在占用最多的那个重计算组中）",
    "backward of {name}: last layer, recomputing, in the recomputed group that holds the most":
        "{name} 的反向：该组最后一层，正在重计算（在占用最多的那个重计算组中）",
    "backward of {name}: the last layer's MLP, in the recomputed group that holds the most":
        "{name} 的反向：该组最后一层的 MLP（在占用最多的那个重计算组中）",
    "backward of {name}: the last layer's MoE combine, in the recomputed group that holds the most":
        "{name} 的反向：该组最后一层 MoE 的结果合并（在占用最多的那个重计算组中）",
    "backward of {name}: the last layer's token dispatch, recomputing, in the recomputed group that holds the most":
        "{name} 的反向：该组最后一层的 token 分发，正在重计算（在占用最多的那个重计算组中）",
    "backward of {name}: the last layer's context-parallel attention, in the recomputed group that holds the most":
        "{name} 的反向：该组最后一层的上下文并行注意力（在占用最多的那个重计算组中）",
    "backward of {name}: the last layer's context-parallel attention, recomputing, in the recomputed group that holds the most":
        "{name} 的反向：该组最后一层的上下文并行注意力，正在重计算（在占用最多的那个重计算组中）",
    "after the backward of {name}": "{name} 的反向之后",
    "optimizer step": "优化器更新",
    "checkpoints held between passes": "前向与反向之间保存的检查点",
    "one group recomputed in backward": "反向时重计算的一组",
    "peak: their sum": "峰值：两者之和",
    "lowest peak: k={k}, {size}": "最低峰值：k={k}，{size}",
    "k = recompute_num_layers (layers per checkpointed group, log scale)":
        "k = recompute_num_layers（每个检查点组的层数，对数坐标）",
    "first stage's layer activations (GiB)": "首级（第 0 级）的层激活（GiB）",
    "Full recomputation: the peak against k ({layers} layers on the stage)":
        "完全重计算：峰值随 k 的变化（该级有 {layers} 层）",
    "GiB per GPU": "每卡显存（GiB）",
    "total": "总计",
    "Megatron-LM (18 B/param)": "Megatron-LM（每参数 18 B）",
    "Megatron-LM distributed optimizer": "Megatron-LM 分布式优化器",
    "ZeRO stage 0 (16 B/param)": "ZeRO 第 0 阶段（每参数 16 B）",
    "ZeRO stage 1": "ZeRO 第 1 阶段",
    "ZeRO stage 2": "ZeRO 第 2 阶段",
    "ZeRO stage 3": "ZeRO 第 3 阶段",
    "{model} on {gpu} GPUs": "{model}，{gpu} GPU",
    # the planner's model menu (actmem.views.fit_views.MODEL_NAMES) and 02's MLP menu
    "22B (Korthikanti et al.)": "22B（Korthikanti 等人）",
    "175B (Korthikanti et al.)": "175B（Korthikanti 等人）",
    "530B (Korthikanti et al.)": "530B（Korthikanti 等人）",
    "1T (Korthikanti et al.)": "1T（Korthikanti 等人）",
    "gelu": "GeLU",
    "swiglu": "SwiGLU",
    "squared ReLU": "平方 ReLU",
    "most loaded: stage {stage}, peak {size} at '{event}'":
        "负载最重：第 {stage} 级，峰值 {size}，出现在“{event}”",
    " + reserve {size}": " + 预留 {size}",
    " + reserve {size} (driver {driver}, CUDA context {context}, NCCL {nccl}, allocator {allocator} GiB)":
        " + 预留 {size}（驱动 {driver}，CUDA 上下文 {context}，NCCL {nccl}，分配器 {allocator} GiB）",
    " + reserve {size} (driver {driver}, CUDA context {context}, NCCL {nccl}, DeepEP {deepep}, "
    "allocator {allocator} GiB)":
        " + 预留 {size}（驱动 {driver}，CUDA 上下文 {context}，NCCL {nccl}，DeepEP {deepep}，"
        "分配器 {allocator} GiB）",
    "  driver-reserved": "  驱动保留",
    "default estimate": "默认估计",
    "  CUDA context": "  CUDA 上下文",
    "tensor-parallel group": "张量并行组",
    "data-parallel group": "数据并行组",
    "gradient-norm group": "梯度范数组",
    "pipeline neighbours": "流水线相邻级",
    "embedding group": "嵌入层组",
    "context-parallel group": "上下文并行组",
    "expert-parallel group": "专家并行组",
    "expert tensor group": "专家张量并行组",
    "expert data group": "专家数据并行组",
    "expert gradient-norm group": "专家梯度范数组",
    "FP8 amax group": "FP8 amax 归约组",
    "NCCL communicators counted: {names}": "计入的 NCCL 通信组：{names}",
    "c=2.0: peak + reserve - GPU = {}": "c=2.0：峰值 + 预留 - GPU 显存 = {}",
    "  NCCL buffers": "  NCCL 缓冲区",
    "  DeepEP buffers": "  DeepEP 缓冲区",
    "  allocator gap": "  分配器碎片",
    "{line}, of {gpu}: margin {margin} GiB, {verdict}":
        "{line}，GPU 容量 {gpu}，余量 {margin} GiB：{verdict}",
    "{size} ({gpu})": "{size}（{gpu}）",
    "sum of the parts": "各部分之和",
    "peak (one moment)": "峰值（同一时刻）",
    "peak event": "峰值事件",
    "Transformer layers": "Transformer 层数",
    "layers per stage": "每级层数",
    "cp comm": "cp 通信",
    "selective: {modules}": "选择性：{modules}",
    "off": "关",
    "offloaded layers": "卸载到主机的层数",
    "host memory (offload)": "主机内存（卸载）",
    "GPUs: t·p·cp·d = {t}·{p}·{cp}·{d} = {n}": "GPU 数：t·p·cp·d = {t}·{p}·{cp}·{d} = {n}",
    "; the experts share them: ep·etp = {ep}·{etp}, expert data-parallel {edp}":
        "；专家层共用这些 GPU：ep·etp = {ep}·{etp}，专家数据并行度 {edp}",
    # Megatron-LM's --recompute-modules names, in the recompute menu's Chinese labels
    "core_attn": "核心注意力", "layernorm": "LayerNorm", "mlp": "MLP", "moe_act": "专家激活",
    "moe": "专家层", "shared_experts": "共享专家", "mla_up_proj": "潜在注意力上投影",
    "even split": "均匀切分",
    "embedding counted as a layer": "嵌入层计作一层",
    "loss counted as a layer": "损失计作一层",
    "embedding and loss counted as layers": "嵌入层与损失各计作一层",
    "first stage {n} layers": "首级 {n} 层",
    "last stage {n} layers": "末级 {n} 层",
    "{split} ({layers})": "{split}（{layers}）",
    "{k} stages of {n}": "{k} 级各 {n} 层",
    "loss": "损失函数",
    "gradient_buffer": "梯度缓冲区",
    "Megatron-LM cross-entropy (fp32 copy)": "Megatron-LM 词表并行损失（fp32 副本）",
    "PyTorch F.cross_entropy": "PyTorch F.cross_entropy",
    "fused loss (no logits kept)": "融合损失（不保存 logits）",
    "gradient buffer from the start": "梯度缓冲区一开始就在",
    "gradients made in backward": "梯度在反向时才创建",
    " (give --gpu-memory for a verdict)": "（给出 --gpu-memory 才能判定）",
    "fits": "放得下",
    "DOES NOT FIT": "放不下",
    # ---- what each trick removes (actmem.views.variant_views)
    "attention map": "注意力矩阵项",
    "paper's layer (no options)": "论文原始配置（不加任何选项）",
    "chosen layer: {sizes}": "所选的层：{sizes}",
    "change: {change}": "变化：{change}",
    "under 0.1%": "不到 0.1%",
    "SwiGLU default": "SwiGLU 默认",
    "change": "变化",
    "before (MiB)": "之前（MiB）",
    "after (MiB)": "之后（MiB）",
    "difference (MiB)": "差值（MiB）",
    "removed": "去掉",
    "shrunk": "缩小",
    "unchanged": "不变",
    "grown": "变大",
    "added": "新增",
    "layer input, kept for full recomputation": "层的输入，为完全重计算而保存",
    "activation memory per layer, per micro-batch, per GPU (MiB)": "每层、每个微批次、每卡的激活显存（MiB）",
    "paper's layer": "论文中的层",
    "chosen": "所选",
    "Paper's layer (no options) vs the chosen options": "论文原始配置与所选配置对比",
    "no parallelism": "无并行",
    "tensor parallel": "张量并行",
    "tensor + sequence parallel": "张量并行 + 序列并行",
    "tensor parallel + selective recompute": "张量并行 + 选择性重计算",
    "tensor + sequence parallel + selective recompute": "张量并行 + 序列并行 + 选择性重计算",
    "full recompute": "完全重计算",
    "GPT-3 175B, Table 2 (s=2048, b=1, h=12288, a=96; t=8, the no-parallelism row t=1)":
        "GPT-3 175B，表 2（s=2048, b=1, h=12288, a=96；t=8，“无并行”那一行 t=1）",
    "LLaMA-style layer (s=4096, b=1, h=8192, a=64, t=8): 8 KV heads, SwiGLU f=28672, no dropout, "
    "FlashAttention":
        "LLaMA 风格的层（s=4096，b=1，h=8192，a=64，t=8）：8 个 KV 头，SwiGLU f=28672，无 dropout，"
        "FlashAttention",
    # ---- measuring (actmem.measure)
    "bytes saved for backward (KiB)": "为反向传播保存的字节（KiB）",
    "ledger row": "账本行",
    "extras (not in ledger)": "额外项（不在账本中）",
    "ledger, t=1": "账本，t=1",
    "measured, t=1": "实测，t=1",
    "measured, t={t} rank {rank}": "实测，t={t} rank {rank}",
    "ledger, t={t} rank {rank}": "账本，t={t} rank {rank}",
    "ledger, t={t} (each rank)": "账本，t={t}（每个 rank）",
    "{variant}: {parts}": "{variant}：{parts}",
    "{category}: {parts}": "{category}：{parts}",
    "; ": "；",
    "t={t} rank {rank}: ledger {ledger} B, rows measured {measured} B "
    "({exact}/{rows} exact), extras {extras} B":
        "t={t} rank {rank}：账本 {ledger} B，实测各行 {measured} B"
        "（{exact}/{rows} 行完全一致），额外项 {extras} B",
    "The paper's layer: ledger and measurement": "论文中的层：账本与实测",
    "the paper's layer (sec. 4.1)": "论文中的层（第 4.1 节）",
    "the paper's layer": "论文中的层",
    "dropout masks as F.dropout keeps them on CPU": "F.dropout 在 CPU 上保存的 dropout 掩码",
    "selective recomputation (checkpointed core attention)": "选择性重计算（对核心注意力做检查点）",
    "full recomputation (checkpointed layer)": "完全重计算（对整层做检查点）",
    "no dropout": "无 dropout",
    "scaled_dot_product_attention, no dropout": "scaled_dot_product_attention，无 dropout",
    "scaled_dot_product_attention with dropout": "scaled_dot_product_attention，带 dropout",
    "grouped-query attention, 2 key/value heads": "分组查询注意力，2 个 KV 头",
    "grouped-query attention": "分组查询注意力",
    "eager (unfused) SwiGLU MLP": "eager（未融合）SwiGLU MLP",
    "Every ledger row is measured exactly; the only extras are the LayerNorm statistics.":
        "账本的每一行都与实测完全一致；唯一的额外项是 LayerNorm 的统计量。",
    "Same tensors, but each mask is the scaled noise in bfloat16: 2 bytes per element instead "
    "of the paper's 1-byte mask.":
        "张量相同，但每个掩码是 bfloat16 的缩放噪声：每个元素 2 字节，而不是论文中 1 字节的掩码。",
    "The three s x s tensors are gone; the checkpoint keeps Q, K and V (already ledger rows) "
    "as the inputs it recomputes from.":
        "三个 s x s 张量都没有了；检查点保存 Q、K 和 V（本来就是账本中的行），作为重计算的输入。",
    "Only the layer input is kept: 2sbh, no extras.": "只保存层的输入：2sbh，没有额外项。",
    "The masks and the dropout output go; the softmax output, saved by softmax and by the "
    "matmul with V, is one storage, counted once.":
        "掩码和 dropout 输出都没有了；softmax 输出由 softmax 和与 V 的矩阵乘法共同保存，"
        "是同一块存储，只计一次。",
    "CPU runs a FlashAttention-style kernel: no s x s tensor, an fp32 log-sum-exp per query "
    "and head; the output it keeps is the output projection's input (one storage).":
        "CPU 上运行 FlashAttention 式的 kernel：没有 s x s 张量，每个查询和头一个 fp32 的 "
        "log-sum-exp；它保存的输出就是输出投影的输入（同一块存储）。",
    "CPU has no fused kernel with dropout: the math fallback upcasts to fp32 and keeps the "
    "whole map, far above the FlashAttention ledger.":
        "CPU 上没有带 dropout 的融合 kernel：退回 math 后端，提升为 fp32 并保存整个矩阵，"
        "远高于 FlashAttention 的账本。",
    "K and V shrink to g/a of their size; the grouped matmul never copies them per query head.":
        "K 和 V 缩小到原来的 g/a；分组矩阵乘法不会为每个查询头复制它们。",
    "The ledger counts Megatron's fused SwiGLU (gate, up, fc2 input); the eager product also "
    "keeps silu(gate), one more 2sbf.":
        "账本按 Megatron 的融合 SwiGLU 计算（gate、up、fc2 输入）；eager 模式的乘积还会保存 "
        "silu(gate)，多一个 2sbf。",
    # ---- fits: notebook 09's title
    "LLaMA-2-7B, t=2, p=2, d=2, m=8 on A100 80GB GPUs": "LLaMA-2-7B，t=2，p=2，d=2，m=8，A100 80GB GPU",
    "LLaMA-3-8B, s=131072, t=8, cp=2 on H100 80GB SXM GPUs": "LLaMA-3-8B，s=131072，t=8，cp=2，H100 80GB SXM GPU",
    # ---- cheat sheet (actmem.views.cheatsheet)
    "Training memory cheat sheet (activations: Korthikanti et al. 2022, arXiv 2205.05198; "
    "numbers from actmem)":
        "训练显存速查表（激活：Korthikanti 等人 2022，arXiv 2205.05198；数字由 actmem 计算）",
    "Activations: bytes per layer, micro-batch, GPU": "激活：每层、每个微批次、每卡的字节数",
    "Model states, logits and the peak": "模型状态、logits 与峰值",
    "Common mistakes, costliest first (cost: bytes misjudged)":
        "常见错误，代价大的在前（代价：算错的字节数）",
    "Does it fit? A checklist": "放得下吗？检查清单",
    "formula": "公式",
    "when it holds": "成立条件",
    "one number": "示例数字",
    # ---- cheat sheet, page 2 (actmem.views.cheatsheet_levers)
    "every activation row at s/cp tokens per GPU; weights and gradients whole; the distributed optimizer shards over d·cp; the attention exchanges K and V (p2p: cp ring buffers and per-step outputs, alive inside it)":
        "每个激活行每卡只有 s/cp 个 token；权重与梯度完整保存；分布式优化器在 d·cp 上分片；注意力交换 K 和 V（p2p：cp 个环形缓冲区和每步输出，只在注意力内部存活）",
    "the experts' weights and gradients over ep·etp GPUs, their optimizer over the expert data-parallel group; router and norms whole; token dispatch buffers inside each MoE layer":
        "专家的权重与梯度分到 ep·etp 块 GPU 上，其优化器状态在专家数据并行组上分片；路由器与归一化完整保存；每个 MoE 层内部有 token 分发缓冲区",
    "the linear layers' saved inputs in 1 byte plus a 4-byte scale; FlashAttention's output stays 16-bit; the model states gain FP8 weight copies (and their transposes on Hopper)":
        "线性层保存的输入每元素 1 字节，外加一个 4 字节缩放因子；FlashAttention 的输出仍为 16 位；模型状态多出 FP8 权重副本（Hopper 上还有其转置）",
    "saves the latent projections' inputs (q_lora_rank, kv_lora_rank) and still every head's Q, K, V at qk_head_dim + qk_pos_emb_head_dim":
        "保存潜在投影的输入（q_lora_rank、kv_lora_rank），并且每个头仍保存宽度为 qk_head_dim + qk_pos_emb_head_dim 的 Q、K、V",
    "each named module drops the rows its checkpoint covers; the backward rebuilds one module at a time":
        "每个指定的模块丢弃其检查点覆盖的行；反向时一次重建一个模块",
    "LLaMA-3-8B, s={s}: a layer keeps {one} at cp=1, {eight} at cp=8, plus {ring} inside its attention; optimizer {o1} -> {o8}":
        "LLaMA-3-8B，s={s}：cp=1 时每层保存 {one}，cp=8 时 {eight}，注意力内部另有 {ring}；优化器状态 {o1} -> {o8}",
    "Mixtral 8x7B, d={d}: weights {w1} at ep=1, {w8} at ep={d}; gradients {g1} -> {g8}":
        "Mixtral 8x7B，d={d}：ep=1 时权重 {w1}，ep={d} 时 {w8}；梯度 {g1} -> {g8}",
    "LLaMA-2-7B: a layer keeps {a} -> {b}; weights {w} -> {wf}":
        "LLaMA-2-7B：每层保存 {a} -> {b}；权重 {w} -> {wf}",
    "frozen weights: {w} bytes, no gradient, no optimizer state; adapters: {w} + {g} + {o} bytes per parameter; each adapter keeps its input":
        "冻结的权重：{w} 字节，无梯度，无优化器状态；适配器：每个参数 {w} + {g} + {o} 字节；每个适配器保存其输入",
    "LLaMA-2-7B, rank {r} on {targets}: peak {a} -> {b}":
        "LLaMA-2-7B，在 {targets} 上秩 {r}：峰值 {a} -> {b}",
    "the first n layers' saved tensors of at least {n} elements go to pinned host memory while the pass waits; the newest layer stays":
        "前 n 层中至少 {n} 个元素的已保存张量在等待反向时放到锁页主机内存；最新的一层留在 GPU 上",
    "LLaMA-2-7B, {n} layers: peak {a} -> {b}, {host} on the host":
        "LLaMA-2-7B，卸载 {n} 层：峰值 {a} -> {b}，主机上 {host}",
    "DeepSeek-V3, a dense layer at s={s} ({a} heads of {d}): {value}":
        "DeepSeek-V3，s={s} 时一个稠密层（{a} 个头，每头宽 {d}）：{value}",
    "LLaMA-2-7B, {names}: a layer keeps {kept} instead of {full}, rebuilds {ws} at once":
        "LLaMA-2-7B，{names}：每层保存 {kept}（原为 {full}），一次重建 {ws}",
    "lever":
        "手段",
    "what it does to the bytes":
        "对字节数的作用",
    "Today's levers: what each does to the bytes (numbers from actmem)":
        "当前常用的显存手段：各自对字节数的作用（数字由 actmem 计算）",
    "offloading  (--cpu-offloading-num-layers)": "激活卸载（--cpu-offloading-num-layers）",
    "cost": "代价",
    "mistake": "错误",
    "what the numbers say": "正确的数字",
    "worked example, t=8: {value}": "算例，t=8：{value}",
    "GPT-3 175B, t=8: {value}": "GPT-3 175B，t=8：{value}",
    "GPT-3 175B: {value}": "GPT-3 175B：{value}",
    "worked example: {value} at every t": "算例：任何 t 下都是 {value}",
    "worked example, L={L}, t=8: {value}": "算例，L={L}，t=8：{value}",
    "p={p}, m={m}: {value}": "p={p}，m={m}：{value}",
    "p={p}, v={v}: {value}": "p={p}，v={v}：{value}",
    "p={p}, m={m}: {one}; v={v}: {interleaved}": "p={p}，m={m}：{one}；v={v}：{interleaved}",
    "per layer, micro-batch, GPU; 16-bit, masks 1 B, map stored":
        "每层、每个微批次、每卡；16 位激活，掩码 1 B，保存注意力矩阵",
    "the fixed term: does not shrink with t, a floor for tensor parallelism":
        "固定项：不随 t 缩小，是张量并行的下限",
    "+ sequence parallelism (t divides s)": "+ 序列并行（t 整除 s）",
    "+ sequence parallelism + selective recomputation": "+ 序列并行 + 选择性重计算",
    "full recomputation: only the layer input is kept": "完全重计算：只保存层的输入",
    "FlashAttention: fp32 log-sum-exp instead of the map": "FlashAttention：用 fp32 的 log-sum-exp 代替注意力矩阵",
    "whole model; also the 1F1B first stage when m >= p (p cancels)":
        "整个模型；m ≥ p 时也是 1F1B 首级的峰值（p 被约掉）",
    "GPipe: every stage holds all m micro-batches": "GPipe：每一级都保存全部 m 个微批次",
    "interleaved 1F1B first stage (m >= 2p)": "交错式 1F1B 的首级（m ≥ 2p）",
    "bubble: GPipe and 1F1B; interleaved": "气泡：GPipe 和 1F1B；交错式",
    "LLaMA-2-7B ({n} B): {value}": "LLaMA-2-7B（参数量 {n} B）：{value}",
    "bytes per parameter, ZeRO's mixed-precision Adam: fp16 weights, fp16 gradients, fp32 "
    "weights and Adam moments":
        "每参数字节数，ZeRO 的混合精度 Adam：fp16 权重、fp16 梯度、fp32 权重副本及 Adam 的一阶、二阶矩（动量与方差）",
    "bytes per parameter, Megatron-LM: fp32 gradient buffer":
        "每参数字节数，Megatron-LM：梯度缓冲区为 fp32",
    "bytes per parameter, Megatron-LM's distributed optimizer shards the {o}":
        "每参数字节数，Megatron-LM 的分布式优化器把其中的 {o} 切分到 d 个数据并行副本上",
    "d={d}: {value}": "d={d}：{value}",
    "logits on the last stage, kept in fp32 by the loss; in parentheses the loss moment, "
    "when Megatron's loss also holds the bf16 logits":
        "末级的 logits：损失函数以 fp32 保存；括号内是计算损失的那一刻，此时 Megatron 的损失函数"
        "还同时保留着 bf16 的 logits",
    "LLaMA-3-8B, s={s}, V={V}: {kept} ({at_loss})": "LLaMA-3-8B，s={s}，V={V}：{kept}（{at_loss}）",
    "peak = the largest moment": "峰值 = 最大的那一刻",
    "of the step's timeline, not the sum of the parts: weights, gradients and activations "
    "are not all alive at once":
        "取一步训练的显存时间线上最大的时刻，而不是各部分之和：权重、梯度和激活不会同时全部存在",
    "LLaMA-2-7B, gradients freed after each step: peak {peak}, parts {parts}":
        "LLaMA-2-7B，每步结束后释放梯度：峰值 {peak}，各部分之和 {parts}",
    "Capacity: what the driver reports, {gpu} = {mib} MiB = {gib}":
        "容量：以驱动报告的为准，{gpu} = {mib} MiB = {gib}",
    "Model states: bytes per parameter x the stage's parameters, / d where sharded":
        "模型状态：每参数字节数 x 该级的参数量，切分的部分再除以 d",
    "Activations: L/p layers x M x peak_in_flight (the micro-batches a stage holds at once, "
    "not m); the logits on the last stage":
        "激活：L/p 层 x M x peak_in_flight（一个流水线级同时保存的微批次数，不是 m）；末级还要加上 logits",
    "Peak: the largest moment of each stage's step, on the most loaded stage (first or last)":
        "峰值：取每一级在一步训练中最大的时刻，看负载最重的那一级（首级或末级）",
    "Keep a reserve for what a GPU needs beyond the peak (what the driver keeps, CUDA "
    "context, NCCL buffers, the allocator's cached blocks)":
        "为峰值之外 GPU 还需要的显存留出预留（驱动保留的部分、CUDA 上下文、NCCL 缓冲区、分配器缓存着的内存块）",
    "LLaMA-2-7B, t={t}, p={p}, d={d}, m={m} on {gpu}: stage {stage} peaks at {peak}, "
    "{margin} to spare":
        "LLaMA-2-7B，t={t}，p={p}，d={d}，m={m}，{gpu}：第 {stage} 级峰值 {peak}，余量 {margin}",
    "counting only the bf16 weights (2 bytes per parameter)": "只算了 bf16 权重（每参数 2 字节）",
    "LLaMA-2-7B's model states under Megatron-LM: {total}, not the {weights} of its bf16 "
    "weights":
        "LLaMA-2-7B 在 Megatron-LM 下的模型状态是 {total}，而不只是 bf16 权重的 {weights}",
    "micro-batches per step taken as in flight": "把每步的微批次数当成在途微批次数",
    "with m=64 per step, 1F1B's first stage holds {held} (peak_in_flight = p = {p}), not "
    "{all} (all 64, as GPipe)":
        "每步 m=64 时，1F1B 的首级保存 {held}（peak_in_flight = p = {p}），而不是 {all}"
        "（像 GPipe 那样全部 64 个）",
    "believing ZeRO-3 shards the activations": "以为 ZeRO-3 也切分激活",
    "it shards model states only: LLaMA-2-7B at d={d} keeps {held} of activations on every "
    "GPU, not {shard}":
        "它只切分模型状态：d={d} 时 LLaMA-2-7B 每卡仍保存 {held} 激活，而不是 {shard}",
    "forgetting the fp32 logits at a 128k vocabulary": "词表 128k 时忘了 fp32 的 logits",
    "LLaMA-3-8B (s={s}, V={V}, t=1): the loss keeps {kept} for the backward and holds "
    "{at_loss} at its peak":
        "LLaMA-3-8B（s={s}，V={V}，t=1）：损失函数为反向计算保存 {kept}，在它的峰值时占 {at_loss}",
    "reading a GPU's \"{label}GB\" as {label} x 10^9 bytes":
        "把 GPU 标称的“{label}GB”当成 {label} x 10^9 字节",
    "{gpu} reports {mib} MiB = {gib}; {label} x 10^9 bytes is only {decimal}":
        "{gpu} 报告 {mib} MiB = {gib}；{label} x 10^9 字节只有 {decimal}",
    "L·M/p as a pipeline stage's peak": "把 L·M/p 当成流水线级的峰值",
    "1F1B's first stage holds L·M = {whole} (worked example, L={L}, p={p}), not L·M/p = {naive}":
        "1F1B 的首级保存 L·M = {whole}（算例，L={L}，p={p}），而不是 L·M/p = {naive}",
    "assuming the first stage is the most loaded": "以为首级的负载总是最重",
    "LLaMA-3-8B, p={p}, m={m}, full recomputation: stage {last} peaks at {peak} (output layer "
    "and logits), stage 0 at {first}":
        "LLaMA-3-8B，p={p}，m={m}，完全重计算：第 {last} 级（输出层和 logits）峰值 {peak}，"
        "首级（第 0 级）只有 {first}",
    "forgetting the attention map with FlashAttention off": "关闭 FlashAttention 时忘了注意力矩阵",
    "5as²b/t = {map} per layer in the worked example (t=8): {total} for L={L} layers":
        "算例（t=8）每层 5as²b/t = {map}：L={L} 层共 {total}",
    "forgetting dropout": "忘了 dropout",
    "three masks and the attention-dropout output: the worked example keeps {kept} per layer "
    "at t=8, {without} without them":
        "三个掩码加上注意力 dropout 的输出：算例在 t=8 时每层保存 {kept}，去掉它们后是 {without}",
    "SwiGLU at the wrong width": "SwiGLU 用错了宽度",
    "LLaMA-2-70B's f=28672 keeps {published} per layer; the default width {f} gives {default}":
        "LLaMA-2-70B 的 f=28672 每层保存 {published}；默认宽度 {f} 得到 {default}",
    "selective recomputation on top of FlashAttention": "在 FlashAttention 之上再做选择性重计算",
    "saves only the log-sum-exp: {saved} of {total} (worked example, t=8)":
        "只省下 log-sum-exp：{total} 中的 {saved}（算例，t=8）",
    # ---- answers (actmem.views.answers)
    "Show the numbers behind the answers": "显示答案背后的数字",
    # ---- printed conclusions of notebooks 03, 04, 07, 08 (numbers filled in by the cell)
    "Show the result": "显示结果",
    "Takeaway: at t=2 each GPU keeps the fixed {fixed} whole, half of the split tensors "
    "({intermediate}) and half of the heads ({attention_map}).":
        "要点：t=2 时每卡完整保存固定项的 {fixed}，切分的张量只存一半（{intermediate}），"
        "注意力头也只存一半（{attention_map}）。",
    "Takeaway: the fixed term is {share:.0%} of the total at t={t} and {share_max:.0%} at "
    "t={t_max}; more GPUs only shave the split part.":
        "要点：t={t} 时固定项占总量的 {share:.0%}，t={t_max} 时占 {share_max:.0%}；"
        "再加 GPU 只能削减被切分的那部分。",
    "Takeaway: at t=8, sequence parallelism plus selective recomputation keeps {best} per GPU, "
    "against {worst} with no parallelism: no attention map and no replicated copies are left.":
        "要点：t=8 时，序列并行加选择性重计算每卡只保存 {best}，不并行时是 {worst}："
        "注意力矩阵和每卡完整的副本都没有了。",
    "Takeaway: with FlashAttention the attention map is a sliver ({map} per GPU); the fixed "
    "group is the big lever, and sequence parallelism takes the layer from {tp} to {sp}.":
        "要点：用了 FlashAttention，注意力矩阵项只剩薄薄一层（每卡 {map}）；固定项才是该下手的地方，"
        "序列并行把这一层从 {tp} 降到 {sp}。",
    "Takeaway: all {rows} ledger rows measured exactly on every rank ({equal}); the only extra "
    "is {extra} bytes of LayerNorm statistics.":
        "要点：账本的 {rows} 行在每个 rank 上都测得分毫不差（全部一致：{equal}）；唯一的额外项是 "
        "LayerNorm 统计量的 {extra} 字节。",
    # printed conclusions of notebooks 05 and 09
    "Takeaway: under GPipe every stage holds all m={m} micro-batches at its peak: {held} per "
    "stage ({m} x {layers} layers x {M}).":
        "要点：GPipe 下每一级在峰值时都保存全部 m={m} 个微批次：每级 {held}"
        "（{m} x {layers} 层 x {M}）。",
    "Takeaway: the same bubble as GPipe, but stage i holds p - i micro-batches instead of m.":
        "要点：气泡与 GPipe 相同，但第 i 级只保存 p - i 个微批次，而不是 m 个。",
    "Takeaway: under 1F1B the first stage keeps L*M(t) = {whole} for every p; interleaving "
    "(next sections) keeps more, except when m = p.":
        "要点：1F1B 下无论 p 取多少，首级都保存 L*M(t) = {whole}；交错式调度（后面几节）"
        "保存得更多，m = p 时除外。",
    "Takeaway: the {size} of layer activations is one of these parts; notebook 09 puts a "
    "number on every part, stage by stage, and finds the moment each GPU peaks.":
        "要点：{size} 的层激活只是其中一项；笔记本 09 会逐级为每一项给出数字，"
        "并找出每块 GPU 达到峰值的时刻。",
    "Takeaway: stage {stage} is the most loaded (it holds p={p} micro-batches of {layers} "
    "layers); its peak and reserve leave {margin} of an A100's 80 GiB.":
        "要点：第 {stage} 级负载最重（它保存 p={p} 个微批次，每个 {layers} 层）；"
        "峰值和预留之外还剩 {margin}（A100 共 80 GiB）。",
    # ---- notebook 09's per-stage lines and common mistakes (printed, not drawn)
    "stage {stage}: {events} events; sum of the parts {total}, peak {peak} at '{event}'":
        "第 {stage} 级：{events} 个事件；各部分之和 {total}，峰值 {peak}，出现在“{event}”",
    "a GPU's name is not a size: an A100 80GB has {a100}; '80GB' read as 80 x 10^9 bytes is {decimal}":
        "GPU 的型号名不是容量：A100 80GB 有 {a100}；把“80GB”当作 80 x 10^9 字节，就只剩 {decimal}",
    "the peak is not the sum of the parts: stage 1 of case 1 peaks at {peak} ('{event}'); "
    "its parts add up to {total}":
        "峰值不是各部分之和：算例 1 的第 1 级峰值为 {peak}（“{event}”），各部分加起来却是 {total}",
    "the logits exist twice at the loss: {size} on stage 1 of case 1, not only the fp32 part "
    "kept for backward":
        "计算损失时 logits 同时存在两份：算例 1 的第 1 级上共 {size}，不只是为反向传播保留的 fp32 那一份",
    "recomputation still peaks: 175B selective needs {size} more during backward":
        "重计算也有峰值：175B 使用选择性重计算时，反向传播期间还要再多用 {size}",
    "m (micro-batches per step) is not peak_in_flight (what a stage holds at one moment): "
    "with m=64 under 1F1B stage 0 still holds p=2 passes: {size} (as with m=8)":
        "m（每个优化器步的微批次数）不是 peak_in_flight（一个流水线级在同一时刻保存的微批次数）："
        "m=64 时，1F1B 下第 0 级仍只保存 p=2 个微批次的激活：{size}（与 m=8 时相同）",
    # ---- notebook 08: each variant's expectation after its title
    "{title}: {expect}": "{title}：{expect}",
    # ---- notebook 07's variant explorer: readouts with full-width punctuation
    ", ": "，",
    "{total} ({parts})": "{total}（{parts}）",
    "{change} MiB ({share})": "{change} MiB（{share}）",
    "{baseline}: {sizes}": "{baseline}：{sizes}",
    # ---- what the notebooks print (issue 40): labels, table layouts and templates of the
    # cells' output; numbers are filled in by the cell. A layout key (only fields and
    # spaces) gives the Chinese columns their own widths: a Han character takes two.
    # notebook 01
    "hidden units per head, h/a:": "每个注意力头的宽度 h/a：",
    "valid tensor-parallel sizes for this h and a:": "这组 h、a 下可用的张量并行度：",
    "ValueError:": "ValueError：",
    "{shape:14} {elements:>13,} elements": "{shape:14} {elements:>13,} 个元素",
    "elements ratio:": "元素个数之比：",
    "bytes =": "字节 =",
    "ledger agrees:": "账本与公式一致：",
    "{change}: fixed x{0}, intermediate x{1}, attention map x{2}":
        "{change}：固定项 x{0}，中间项 x{1}，注意力矩阵项 x{2}",
    "1. attention map: {a} -> {b} (x{n}); fixed and intermediate x{k}":
        "1. 注意力矩阵项：{a} -> {b}（x{n}）；固定项和中间项 x{k}",
    "2. valid t for h=6656, a=52:": "2. h=6656、a=52 时可用的 t：",
    "3. a doubled:": "3. a 翻倍：",
    "; 52 % 8 =": "；52 % 8 =",
    "; 6656 / 13 =": "；6656 / 13 =",
    # notebook 02
    "bytes per element used:": "用到的每元素字节数：",
    "{:42} {:9} {:13} {:>4} {:12} {:>6} {:>7}": "{:35} {:9} {:13} {:>9} {:16} {:>6} {:>7}",
    "B/el": "字节/元素",
    "global": "全局",
    "per GPU": "每卡",
    "{name:42} {why}": "{name:35} {why}",
    "  sum: {}": "  合计：{}",
    "GeLU, f = 4h:": "GeLU，f = 4h：",
    "GeLU, f = 4h:   ": "GeLU，f = 4h：   ",
    "SwiGLU, f = 8h/3:": "SwiGLU，f = 8h/3：",
    "SwiGLU, f = 4h:": "SwiGLU，f = 4h：",
    "placements in the fixed group:": "固定项各行的存放方式：",
    "sequence_parallel={sp}: fixed term per GPU {size}": "sequence_parallel={sp}：每卡固定项 {size}",
    "SwiGLU, f = {f} (Megatron-LM default): {split} = {value}":
        "SwiGLU，f = {f}（Megatron-LM 的默认值）：{split} = {value}",
    "doubling s multiplies the attention-map term by {n}": "s 翻倍，注意力矩阵项变为原来的 {n} 倍",
    "stored maps: {maps}  FlashAttention: {flash}": "保存完整矩阵：{maps}；FlashAttention：{flash}",
    "1. rows removed:": "1. 去掉的行：",
    "   bracket without dropout:": "   没有 dropout 时括号里的系数：",
    "2. GeLU input: {k} of the 24; one GPU at t=4 keeps {size}":
        "2. GeLU 的输入：占 24 中的 {k}；t=4 时单块 GPU 保存 {size}",
    # notebook 03
    "{:14} {:12} {:>8}  {}": "{:12} {:16} {:>8}  {}",
    "widths on one GPU: h/t = {}  4h/t = {}": "单块 GPU 上的宽度：h/t = {}，4h/t = {}",
    "heads per GPU a/t = {} ; each map {}": "每卡的头数 a/t = {}；每个头的矩阵 {}",
    "largest split tensor per GPU: {} ; the whole term: {}": "每卡最大的切分张量：{}；整个中间项：{}",
    "1. heads per GPU at t=8: {} ; each map {}": "1. t=8 时每卡的头数：{}；每个头的矩阵 {}",
    "2. fixed rows:": "2. 固定项各行：",
    "; fixed per GPU {} -> {}": "；每卡固定项 {} -> {}",
    # notebook 04: the worked example's table, with the source article's column names
    " t    fixed  intermediate  attention map    total": " t   固定项        中间态  Attention Map     合计",
    "t={small} -> t={big}: {before} -> {after}, {percent}% less":
        "t={small} -> t={big}：{before} -> {after}，减少 {percent}%",
    "t={big} keeps {fraction} = {share:.3f} of t=1 (if everything were split it would keep "
    "1/{big} = {ideal:.3f})":
        "t={big} 时还剩 t=1 时的 {fraction} = {share:.3f}（假如每一项都能切分，就只剩 "
        "1/{big} = {ideal:.3f}）",
    "t={t}, MiB per GPU:       fixed  intermediate  attention map     total":
        "t={t}，每卡（MiB）           固定项        中间项   注意力矩阵项      总计",
    "{:27} {:>5} {:>13} {:>14} {:>9}": "{:26} {:>6} {:>13} {:>14} {:>9}",
    "tensor parallel only": "仅张量并行",
    "+ sequence parallelism": "+ 序列并行",
    "+ selective recomputation": "+ 选择性重计算",
    "1. floor {floor} = {fraction} of M(1) = {share:.1%}": "1. 下限 {floor} = M(1) 的 {fraction} = {share:.1%}",
    "2. s={s}: M(t) = {floor} + {split}/t MiB; t={small} -> t={big}: {before} -> {after}, "
    "{percent}% less":
        "2. s={s}：M(t) = {floor} + {split}/t MiB；t={small} -> t={big}：{before} -> {after}，"
        "减少 {percent}%",
    "3. at t={t} sequence parallelism removes {sp} ; selective recomputation removes {sel}":
        "3. t={t} 时，序列并行去掉 {sp}；选择性重计算去掉 {sel}",
    # notebook 05
    "stage {i}:": "第 {i} 级：",
    "peak in flight per stage:": "各级峰值时保存的微批次数：",
    "peak in flight per stage:    ": "各级峰值时保存的微批次数：",
    "closed form min(p - i, m):   ": "闭式解 min(p - i, m)：   ",
    "stage {i}: {n} x {layers} layers x M(t) = {held}": "第 {i} 级：{n} x {layers} 层 x M(t) = {held}",
    "p={p:>2}: first stage {first}, equal to L*M(t): {equal}; naive L*M(t)/p = {naive}":
        "p={p:>2}：首级 {first}，等于 L*M(t)：{equal}；朴素估计 L*M(t)/p = {naive}",
    "bubble (simulated): {}  (p-1)/m: {}": "气泡（模拟）：{}；(p-1)/m：{}",
    " (F3/1: micro-batch 3, local chunk 1)": "（F3/1：微批次 3，本地模型块 1）",
    "peak chunk passes in flight per stage:": "各级峰值时保存的块计算数：",
    "bubble: {} against {} for 1F1B": "气泡：{}，1F1B 为 {}",
    "stage 0 holds {peak} chunk passes of {chunk} layers = {layers} layers' worth; L = {L}":
        "第 0 级保存 {peak} 个块计算，每个 {chunk} 层，合计相当于 {layers} 层；L = {L}",
    "factor: {} = 1 + (p-1)/(p*v) with p=4, v=2": "系数：{} = 1 + (p-1)/(p*v)，其中 p=4，v=2",
    "first stage: {} = {} x {}": "首级：{} = {} x {}",
    "m={m:>2}: first stage = {ratio} x L*M(t); factor applies: {holds}":
        "m={m:>2}：首级 = {ratio} x L*M(t)；系数适用：{holds}",
    "schedule      m  v  bubble  first stage": "调度          m  v    气泡  首级",
    "schedule         v  bubble  passes held (until B or W)  first stage":
        "调度                v    气泡  保存的块计算数（直到 B 或 W） 首级",
    "{:<15} {:>2} {:>7.1%}  {:<27} {}": "{:<18} {:>2} {:>7.1%}  {:<29} {}",
    "measured on this machine with torch {version}": "在本机实测（torch {version}）",
    "STORED result (torch {version}); torch is not installed here, so nothing was measured now":
        "已存的结果（torch {version}）；这里没有安装 torch，所以这次没有实测",
    "p  m  v  pass bytes  measured peak / pass  simulated peak / pass  passes held  bytes agree":
        "p  m  v    单次字节  实测峰值 / 单次       模拟峰值 / 单次        块计算数     字节一致",
    "yes": "是",
    "NO": "否！",
    "W reads: {rows!s} = {w} of {total} per layer": "W 读取：{rows!s} = {w}（每层共 {total}）",
    "stage {i}: {ledger} if I frees all but W's rows, {kept} if the pass stays until W; "
    "1F1B {one}":
        "第 {i} 级：I 只留下 W 要读的行时为 {ledger}，整次计算留到 W 时为 {kept}；1F1B 为 {one}",
    "DualPipeV, simulated: chunk passes held per stage {} of L/(2p) layers each":
        "DualPipeV（模拟）：各级保存的块计算数 {}，每个 L/(2p) 层",
    "DualPipe, DualPipe README: {} micro-batches of L/p layers; parameters of {} "
    "stages per GPU (its own and the mirror one)":
        "DualPipe（据 DualPipe 的 README）：每卡 {} 个微批次（每个 L/p 层），以及 {} 个流水线级的参数"
        "（本级和镜像级）",
    "split          layers       peak per stage (GiB)         most loaded":
        "切分方式       各级层数     各级峰值（GiB）              负载最重",
    "{:<14} {:<12} {:<28} stage {}, {}": "{:<14} {:<12} {:<28} 第 {} 级，{}",
    "even": "均匀切分",
    "last stage 5": "末级 5 层",
    "last stage 2": "末级 2 层",
    "even split, last stage's peak at '{event}': logits and loss {size}":
        "均匀切分时，末级的峰值出现在“{event}”：logits 和损失 {size}",
    "last stage of 5 layers: the most loaded GPU needs {less} less; stage 0 needs {more} "
    "more for its one extra layer":
        "末级只放 5 层时：负载最重的 GPU 少用 {less}；第 0 级多了一层，多用 {more}",
    "Megatron-LM, default N = p:": "Megatron-LM（默认 N = p）报错：",
    "Megatron-LM with N = 6: stage 0 holds {} chunk passes; PyTorch order: {} ; same operations: {}":
        "Megatron-LM，N = 6：第 0 级保存 {} 个块计算；PyTorch 的顺序：{}；操作完全相同：{}",
    "closed form with groups of 6: {} ; with groups of p = 4 at m = 8: {}":
        "闭式解，每组 6 个：{}；m = 8、每组 p = 4 个时：{}",
    "1. GPipe, 16 micro-batches: {} = {} = {} x the 1F1B peak":
        "1. GPipe，16 个微批次：{} = {} = 1F1B 峰值的 {} 倍",
    "2. p=8, m=4: {} for stages 0, 4, 7; bubble {}": "2. p=8，m=4：第 0、4、7 级分别为 {}；气泡 {}",
    "3. p=8, v=4, m={m}: first stage {size} ; factor {factor} applies: {holds}":
        "3. p=8，v=4，m={m}：首级 {size}；系数 {factor} 适用：{holds}",
    "3. p=8, v=4, m=12, N=12: first stage {} chunk passes, {}":
        "3. p=8，v=4，m=12，N=12：首级 {} 个块计算，{}",
    "4. {name}, m={m}: bubble {bubble}, first stage {size}":
        "4. {name}，m={m}：气泡 {bubble}，首级 {size}",
    # notebook 06
    "1. {name}, p=8, m=16: bubble {bubble}, last stage {last}":
        "1. {name}，p=8，m=16：气泡 {bubble}，末级 {last}",
    "2. DualPipe, p=8: GPU 2 keeps stages 2 and {mirror}; {n} micro-batches x {layers} layers = {size}":
        "2. DualPipe，p=8：GPU 2 保存第 2 级和第 {mirror} 级；{n} 个微批次 x {layers} 层 = {size}",
    "3. ZBV, p=4, m=8, last stage: peak {peak} B = {held} B held until W + {extra} B "
    "= {k} x {after_w} B kept after W":
        "3. ZBV，p=4，m=8，末级：峰值 {peak} B = 保留到 W 的 {held} B + {extra} B"
        " = W 之后保留的 {k} x {after_w} B",
    "4. layers 7 10 10 5: peaks {peaks} GiB; most loaded stage {stage}, {less} less than with 9 9 9 5":
        "4. 各级层数 7 10 10 5：峰值 {peaks} GiB；负载最重的是第 {stage} 级，比 9 9 9 5 时少 {less}",
    # notebook 07
    "all six ledger totals equal Table 2's closed forms (exact bytes)":
        "六行的账本总量都与表 2 的闭式公式相等（逐字节一致）",
    "removed {removed} of {total} = {share:.1%}": "{total} 中去掉了 {removed} = {share:.1%}",
    "as a fraction: {} == 80/114: {}": "写成分数：{}；等于 80/114：{}",
    "s={s}, h={h}: recomputed attention / linear layers = {ratio} = {share:.1%} "
    "(s/(6h) = {expected})":
        "s={s}，h={h}：重计算的注意力与线性层的计算量之比 = {ratio} = {share:.1%}"
        "（s/(6h) = {expected}）",
    "{options}: {change}": "{options}：{change}",
    "before": "之前",
    "after": "之后",
    "saved {saved} of {total} ({share:.2%})": "{total} 中省下 {saved}（{share:.2%}）",
    "same bytes:": "字节数相同：",
    "Megatron-LM default width:": "Megatron-LM 的默认宽度：",
    "paper's layer {paper} -> LLaMA-style {llama} ({change})":
        "论文中的层 {paper} -> LLaMA 风格的层 {llama}，变化 {change}",
    "s={s}: total {total}, of which attention map {map} ({share:.0%}) missed":
        "s={s}：总计 {total}，其中漏算的注意力矩阵项 {map}（{share:.0%}）",
    "right: {right}; with the undivided map: {wrong}": "正确：{right}；注意力矩阵项不除以 t：{wrong}",
    "SwiGLU, f=28672 (right):    {}": "SwiGLU，f=28672（正确）：   {}",
    "counted as GeLU, f=28672:   {} ({})": "按 GeLU 计，f=28672：       {}，差 {}",
    "paper's 24 (GeLU, f = 4h):  {} ({})": "论文的 24（GeLU，f = 4h）： {}，差 {}",
    "SwiGLU, f={f} (default):  {size} ({change})": "SwiGLU，f={f}（默认）：   {size}，差 {change}",
    "2. {part} of {whole}": "2. {whole} 中的 {part}",
    "3. {part} of {whole}": "3. 相对 {whole}：{part}",
    # notebook 08 (and actmem.measure.report)
    "{} {} ranks at t = 2": "变体齐全：{}；t = 2 时共 {} 个 rank",
    "t={t} rank {rank}: every row exact: {exact};": "t={t} rank {rank}：每一行都完全一致：{exact}；",
    "mask dtypes:": "掩码的 dtype：",
    "ledger at t=1: {} bytes; at t=2: {} bytes per rank": "账本：t=1 时 {} 字节；t=2 时每个 rank {} 字节",
    "paper's formula at t=1: {} bytes; at t=2: {} bytes per rank":
        "论文公式：t=1 时 {} 字节；t=2 时每个 rank {} 字节",
    "same function as t = 1 (max error < 1e-5):": "与 t = 1 时计算的是同一个函数（最大误差 < 1e-5）：",
    "rank {rank}: mask equal on both ranks:": "rank {rank}：两个 rank 上的掩码是否相同：",
    "t=2 rank 1 equals rank 0 in every variant:": "每个变体中 t=2 的 rank 1 都与 rank 0 相同：",
    "{variant}: no row differs": "{variant}：没有不一致的行",
    "{variant}: rows that differ: {rows}": "{variant}，不一致的行：{rows}",
    "{row}: ledger {ledger} B, measured {measured} B ({dtype})":
        "{row}，账本 {ledger} B，实测 {measured} B（{dtype}）",
    "nothing saved": "未保存",
    "\n{name!s} extras:\n{table!s}": "\n{name!s} 的额外项：\n{table!s}",
    "elements;": "个元素；",
    "bytes": "字节",
    "1. ledger groups at t={t}:": "1. t={t} 时账本的各组：",
    "2. {} bytes of extras per rank at t=2; {} at t=1": "2. t=2 时每个 rank 的额外项：{} 字节；t=1 时 {}",
    "2. silu(gate) per rank:": "2. 每个 rank 上的 silu(gate) 字节数（按 t 分列）：",
    "row": "行",
    "variant": "变体",
    "ledger t={t} r{rank}": "账本 t={t} r{rank}",
    "measured t={t} r{rank}": "实测 t={t} r{rank}",
    "ledger t={t}": "账本 t={t}",
    "measured t={t}": "实测 t={t}",
    "exact t={t}": "一致 t={t}",
    "extras t={t}": "额外项 t={t}",
    "(no extras)": "（没有额外项）",
    "mean": "均值",
    "reciprocal std (rstd)": "标准差的倒数（rstd）",
    "silu(gate): eager SwiGLU computes silu(gate) * up as two ops and the product keeps both "
    "factors; Megatron's fused bias_swiglu keeps only gate and up and recomputes silu.":
        "silu(gate)：eager 模式的 SwiGLU 把 silu(gate) * up 分成两个算子，乘法保存两个因子；"
        "Megatron 融合的 bias_swiglu 只保存 gate 和 up，反向时重算 silu。",
    "the s x s softmax output": "s x s 的 softmax 输出",
    "the s x s dropout noise (scaled 0 or 1/(1-p)) as its mask":
        "s x s 的 dropout 噪声（缩放后的 0 或 1/(1-p)），用作掩码",
    "the s x s dropout output": "s x s 的 dropout 输出",
    "a copy of Q (scaled)": "Q 的一份副本（已缩放）",
    "a copy of K (scaled)": "K 的一份副本（已缩放）",
    "a copy of V": "V 的一份副本",
    "not in the ledger": "不在账本中",
    # notebook 09
    "one layer, split by t: {} | whole on every rank: {}": "每层按 t 切分的部分：{} | 每个 rank 上完整保存的部分：{}",
    "{L} layers x {layer:,} + embedding {embedding:,} + output layer {output:,} + final norm {norm:,}":
        "{L} 层 x {layer:,} + 嵌入层 {embedding:,} + 输出层 {output:,} + 最终归一化层 {norm:,}",
    "= {total:,} parameters": "= {total:,} 个参数",
    "ZeRO stage {stage}: {size} per GPU": "ZeRO 第 {stage} 阶段：每卡 {size}",
    "Megatron-LM, {label}: {size} per GPU": "Megatron-LM，{label}：每卡 {size}",
    "18 B/param": "每参数 18 B",
    "distributed optimizer": "分布式优化器",
    "{optimizer}: optimizer states {states}, the step's temporaries {temporaries}, peak {peak} ({event})":
        "{optimizer}：优化器状态 {states}，更新步骤的临时张量 {temporaries}，峰值 {peak}（{event}）",
    "LLaMA-2-7B, t=2, p=2: parameters per GPU of each stage:": "LLaMA-2-7B，t=2，p=2：各级每卡的参数量：",
    "GPT-3 vocabulary 50257 padded for t = 1, 8: {} {}": "GPT-3 的词表 50257 在 t = 1、8 时补齐为：{} {}",
    "stage with the most parameters: stage {stage}, {parameters:,}, {size} of model states":
        "参数最多的级：第 {stage} 级，{parameters:,} 个参数，模型状态 {size}",
    "first stage, per micro-batch:": "首级，每个微批次：",
    "last stage, per micro-batch: ": "末级，每个微批次：",
    "token ids": "token ID",
    "final norm input": "最终归一化层的输入",
    "output layer input": "输出层的输入",
    "logits": "logits",
    "cross-entropy targets": "损失函数的目标标签",
    "GPT-2 vocabulary, s=2048, b=2: fp32 logits {}; in 16 bits {}":
        "GPT-2 的词表，s=2048，b=2：fp32 的 logits {}；16 位时 {}",
    "175B, t=8, selective: held {held}, plus {more} (one layer's attention map) during backward":
        "175B，t=8，选择性重计算：保存 {held}，反向时另需 {more}（一层的注意力矩阵）",
    "k={k:>2}: checkpoints {held} + group {group} = {total}": "k={k:>2}：检查点 {held} + 重计算组 {group} = {total}",
    "logits_loss": "logits 和损失",
    "transient": "临时张量",
    "workspace": "算子临时空间",
    "loss={loss!r:<16} stage 1 peak {peak} at '{event}', logits and loss {size}":
        "loss={loss!r:<16} 第 1 级峰值 {peak}，出现在“{event}”；logits 和损失 {size}",
    "gradient_buffer={buffer!r}: GPT-2 large on one GPU peaks at {one} ('{event}'); "
    "LLaMA-2-7B stage 0 at {piped}":
        "gradient_buffer={buffer!r}：GPT-2 large 单卡峰值 {one}（“{event}”）；"
        "LLaMA-2-7B 第 0 级峰值 {piped}",
    "{op!s} {event}: activations {activations}, logits and loss {logits}, total {total}":
        "{op!s} “{event}”：激活 {activations}，logits 和损失 {logits}，总计 {total}",
    "reshard_after_forward={raf}: {size}, {event}": "reshard_after_forward={raf}：{size}，出现在“{event}”",
    "'80GB' read as a size:": "把“80GB”按十进制字节读：",
    "part (MiB per GPU)": "各部分（每卡 MiB）",
    "b={b} FlashAttention={flash!s:<5} loss={loss!s:<14} {bytes}-byte logits: peak {peak} at "
    "'{event}': {verdict}":
        "b={b} flash_attention={flash!s:<5} loss={loss!s:<14} {bytes} 字节 logits：峰值 {peak}，"
        "出现在“{event}”：{verdict}",
    "does not fit": "放不下",
    "run           states actmem   Megatron  activations actmem   Megatron  (MiB, stage 0)":
        "运行        模型状态 actmem   Megatron         激活 actmem   Megatron  （MiB，第 0 级）",
    "1. {held} of layer activations on stage 0; {verdict}": "1. 第 0 级的层激活 {held}；{verdict}",
    "2. b={b}: {verdict} ; fp32 logits {size}": "2. b={b}：{verdict}；fp32 的 logits {size}",
    "3. {verdict} ; group {group} ; model states {states}": "3. {verdict}；重计算组 {group}；模型状态 {states}",
    # Megatron-LM's estimate against actmem's (actmem.run.megatron_estimate.differences)
    "Megatron-LM counts no linear-layer biases": "Megatron-LM 不计线性层的偏置",
    "it divides the token ids by t (every rank keeps those whole)":
        "它把 token ID 也除以 t（其实每个 rank 都完整保存它们）",
    "it counts 1/p of the final norm on the first stage (the last stage holds it)":
        "它在首级上计入了最终归一化层的 1/p（其实最终归一化层在末级上）",
    "without sequence parallelism + selective recomputation its per-layer term sbh(10 + 24/t) "
    "drops the attention map 5as^2b/t":
        "不开序列并行 + 选择性重计算时，它的每层公式 sbh(10 + 24/t) 漏掉了注意力矩阵项 5as^2b/t",
    "sbh(18 + 4f/h) sizes K and V as if every head had its own (no grouped-query attention)":
        "sbh(18 + 4f/h) 按每个头都有自己的 K、V 来计（没有考虑分组查询注意力）",
    "4f/h counts one f-wide input of the second linear and GeLU's input; SwiGLU keeps gate "
    "and up (6sbf bytes in all)":
        "4f/h 计的是第二个线性层的一个宽 f 的输入和 GeLU 的输入；SwiGLU 保存 gate 和 up"
        "（共 6sbf 字节）",
    "it assumes dropout masks (the model has no dropout)": "它计入了 dropout 掩码（而这个模型没有 dropout）",
    "it ignores full recomputation (counts stored layers)": "它没有考虑完全重计算（仍按保存全部层计）",
    "it adds a fixed 5% and counts the logits at 2 bytes (fp32 in Megatron-LM's cross-entropy "
    "and in actmem)":
        "它固定加 5%，并按每元素 2 字节计 logits（Megatron-LM 的损失函数和 actmem 都按 fp32 计）",
    "it adds a fixed 5%": "它固定加 5%",
    "it leaves out the last stage, which holds the output layer": "它不看末级，而输出层在末级上",
    # notebook 11
    "2. {gpu} | 80 x 10^9 bytes: {size} | too little by {short}":
        "2. {gpu} | 80 x 10^9 字节：{size} | 少了 {short}",
    "4. stage {stage}: {parameters:.2f} B parameters, model states {states}, activations held "
    "{held}, peak {peak} ({event})":
        "4. 第 {stage} 级：参数量 {parameters:.2f} B，模型状态 {states}，保存的激活 {held}，"
        "峰值 {peak}（{event}）",
    "   capacity {} | most loaded: stage {} | to spare: {}": "   容量 {} | 负载最重：第 {} 级 | 余量：{}",
    # notebook 12
    "s = {s}, L = {L}, {n:,} parameters; {gpu}: {size}": "s = {s}，L = {L}，{n:,} 个参数；{gpu}：{size}",
    "peak": "峰值",
    "t=8, recompute={recompute!r}: activations held {held}, rebuilt during backward {rebuilt}, "
    "peak {peak} at '{event}'":
        "t=8，recompute={recompute!r}：保存的激活 {held}，反向时重建 {rebuilt}，峰值 {peak}，"
        "出现在“{event}”",
    "t={t}, cp={cp} ({n} GPUs)": "t={t}，cp={cp}（{n} 块 GPU）",
    "{} B/element, {}": "每元素 {} B，{}",
    "(new)": "（新增）",
    "{key!s:16} {was:>24} -> {now}": "{key!s:36} {was:>20} -> {now}",
    "input of the QKV projection (FP8)": "QKV 投影的输入（FP8）",
    "input of the output projection (FP8)": "输出投影的输入（FP8）",
    "input of the MLP's first linear (FP8)": "MLP 第一个线性层的输入（FP8）",
    "input of the MLP's second linear (FP8)": "MLP 第二个线性层的输入（FP8）",
    "FP8 scale inverses of the saved inputs (fp32)": "所存输入的 FP8 缩放因子倒数（fp32）",
    "t=8 (start)": "t=8（起点）",
    "core_attn, mlp": "核心注意力、MLP",
    "core_attn, mlp, layernorm": "核心注意力、MLP、LayerNorm",
    "LoRA, rank 16": "LoRA，秩 16",
    "offload 16 layers": "卸载 16 层",
    "ep=4, moe_act": "ep=4，专家激活",
    "ep=4, moe": "ep=4，专家层",
    "ep=4, full": "ep=4，完全重计算",
    "ep=4, fp8='e4m3'": "ep=4，fp8='e4m3'",
    "offload 16 layers: pinned host memory {}": "卸载 16 层：锁页主机内存 {}",
    "GiB at the peak": "峰值时刻（GiB）",
    "full recomputation": "完全重计算",
    "LLaMA-3-8B, s=131072, t=8 on H100 80GB SXM GPUs: which part each lever moves":
        "LLaMA-3-8B，s=131072，t=8，H100 80GB SXM：每种手段改变了哪一部分",
    "Mixtral 8x7B, t=2, p=2, d=4, m=16 on H100 80GB SXM GPUs: which part each lever moves":
        "Mixtral 8x7B，t=2，p=2，d=4，m=16，H100 80GB SXM：每种手段改变了哪一部分",
    # actmem.views.lever_figures
    "Which part each lever moves": "每种手段改变了哪一部分",
    "What an uneven router costs": "路由不均衡的代价",
    "hot expert": "热门专家",
    "busiest expert's copies over the mean (moe_hot_expert)":
        "最忙的专家收到的副本数与平均值之比（moe_hot_expert）",
    "peak + reserve of the most loaded GPU (GiB)": "负载最重的 GPU 的峰值 + 预留（GiB）",
    "Mixtral 8x7B, t=2, p=2, d=4, m=16 on H100 80GB SXM GPUs: a hot expert":
        "Mixtral 8x7B，t=2、p=2、d=4、m=16，H100 80GB SXM GPU：一个热门专家",
    "ep=4, etp=2 (two experts per GPU)": "ep=4，etp=2（每块 GPU 两个专家）",
    "ep=8, etp=1 (one expert per GPU)": "ep=8，etp=1（每块 GPU 一个专家）",
    "{label}: fits up to moe_hot_expert = {f}": "{label}：moe_hot_expert 不超过 {f} 时放得下",
    "{dispatcher}: {in_flight} in flight at its busiest moment, {kept} kept all step in "
    "Megatron-LM's global buffer, {outside} in DeepEP's buffers outside PyTorch; peak {peak}, "
    "reserve {reserve} (NCCL {nccl})":
        "{dispatcher}：最忙时刻有 {in_flight} 在传输中，Megatron-LM 的全局缓冲区整个训练步保留 "
        "{kept}，PyTorch 之外的 DeepEP 缓冲区占 {outside}；峰值 {peak}，预留 {reserve}（其中 NCCL "
        "{nccl}）",
    "{name}: the router keeps {kept} of the whole layer's {total} ({share:.2%})":
        "{name}：保存 {kept}，占整层 {total} 的 {share:.2%}",
    "the experts' rows: {experts} ({share:.1%})": "专家激活行：{experts}（{share:.1%}）",
    "with its sequence-wise loss, over its {layers} MoE layers: {kept} per micro-batch":
        "{layers} 个 MoE 层合计（含按序列计算的均衡损失）：每个微批次 {kept}",
    "softmax after top-k": "top-k 之后的 softmax",
    "{name}: weights {weights}, gradients {gradients}, optimizer states {optimizer}; layer "
    "activations {layers}, output layer and logits {output}; peak {peak}":
        "{name}：权重 {weights}，梯度 {gradients}，优化器状态 {optimizer}；层激活 {layers}，"
        "输出层与 logits {output}；峰值 {peak}",
    "without multi-token prediction": "不做多 token 预测",
    "one module, D = 1": "一个模块，D = 1",
    "the last stage's peak grows {growth:.2f} times": "末级的峰值变为原来的 {growth:.2f} 倍",
    "the most loaded GPU is stage {stage}'s: {peak}": "负载最重的 GPU 属于第 {stage} 级：{peak}",
    "DeepSeek-V3's sigmoid router": "DeepSeek-V3 的 sigmoid 路由器",
    "with its sequence-wise loss": "再加上按序列计算的均衡损失",
    "4. ep={ep}: load {load}, peak {peak}, fits: {fits}, short by {short}":
        "4. ep={ep}：负载 {load}，峰值 {peak}，放得下：{fits}，差 {short}",
    "most loaded GPU at its peak (GiB)": "负载最重的 GPU 在峰值时刻（GiB）",
    "GPU capacity: {size}": "GPU 容量：{size}",
    "{n:,} parameters; experts {experts:,} ({share:.1%})": "{n:,} 个参数；其中专家 {experts:,}（{share:.1%}）",
    "1. recompute_modules={mods}: peak {peak}, fits: {fits}": "1. recompute_modules={mods}：峰值 {peak}，放得下：{fits}",
    "2. {name}, full recomputation: {parts}": "2. {name}，完全重计算：{parts}",
    "rebuilt": "重建",
    "3. ep={ep}, etp={etp}: weights {weights}, gradients {gradients}, peak {peak}, fits: {fits}":
        "3. ep={ep}，etp={etp}：权重 {weights}，梯度 {gradients}，峰值 {peak}，放得下：{fits}",
    # the command line (actmem.views.cli, train_cli) with --lang zh
    "s={s} b={b} h={h} a={a}: MiB per layer, per micro-batch, per GPU":
        "s={s} b={b} h={h} a={a}：每层、每个微批次、每卡的 MiB",
    "event": "事件",
    "stage {stage}: {events} events, MiB per GPU (* peak: {peak})":
        "第 {stage} 级：{events} 个事件，每卡 MiB（* 峰值：{peak}）",
    # ---- notebook 13: your job as you launch it
    "parallelism": "并行方式",
    "precision": "精度",
    "recomputation": "重计算",
    "framework": "框架选项",
    "is refused": "被拒绝",
    "{t} {same} {size}": "t={t}：与公式一致：{same}，{size}",
    "{holds_for_every_row}": "表中每一行都满足这个式子：{holds_for_every_row}",
    "{name}: {mib} MiB ({gib} GiB)": "{name}：{mib} MiB（{gib} GiB）",
    "{n} arguments on {gpus} GPUs": "启动参数共 {n} 项，{gpus} 块 GPU",
    "Megatron-LM's CI measured {measured}: actmem is {error:+.2%} off":
        "Megatron-LM 的 CI 实测为 {measured}：actmem 的偏差为 {error:+.2%}",
    "{name}: weights {weights}, gradients {gradients}, optimizer states {optimizer}; peak {peak} "
    "at '{event}'": "{name}：权重 {weights}，梯度 {gradients}，优化器状态 {optimizer}；峰值 {peak}，"
                    "出现在“{event}”",
    "4. unit 4,000,000: peak {peak} at '{event}'; gathered in the backward {a} -> {b}, "
    "gradient buckets at its end {c} -> {d}":
        "4. 通信单元 4,000,000：峰值 {peak}，出现在“{event}”；反向中聚合着的层 {a} -> {b}，"
        "反向结束时的梯度桶 {c} -> {d}",
    "{gpu}, each attention output kept twice: peak {peak}, {error:+.2%} off the measured "
    "{measured}": "{gpu}，每层注意力输出存两份：峰值 {peak}，与实测的 {measured} 相差 {error:+.2%}",
    "{gpu}, kept once: peak {peak}, {error:+.2%} off": "{gpu}，只存一份：峰值 {peak}，相差 {error:+.2%}",
    "Megatron-LM's CI run gpt3_7b_tp4_pp1 on H100 80GB GPUs":
        "Megatron-LM 的 CI 运行 gpt3_7b_tp4_pp1（H100 80GB GPU）",
    "Megatron-LM's arguments: {modelled} modelled, {neutral} memory-neutral, {refused} refused":
        "Megatron-LM 的启动参数：{modelled} 项已建模，{neutral} 项与显存无关，{refused} 项被拒绝",
    "LLaMA-3-8B from its config.json: {n:,} parameters, as the preset":
        "由 config.json 得到的 LLaMA-3-8B：{n:,} 个参数，与预设相同",
    "1. fusion on: peak {a}, off: {b} ({c})": "1. 开启融合：峰值 {a}；关闭：{b}（{c}）",
    "2. 16 GPUs: d={d}, m={m}, peak {a}": "2. 16 块 GPU：d={d}，m={m}，峰值 {a}",
    "3. b=1: {first} peak {a}, {second} peak {b}": "3. b=1：{first} 峰值 {a}，{second} 峰值 {b}",
    # the timeline's marks and the stage figure's peak (actmem.views.timeline_marks, fit_figures)
    "backward pass (shaded)": "反向传播（灰底）",
    "loss (forward)": "损失（前向）",
    "{size} transient: {what}": "{size} 临时张量：{what}",
    "the batch's attention mask": "这批数据的注意力掩码",
    "attention scores": "注意力分数",
    "softmax gradients": "softmax 的梯度",
    "the MLP's gradients": "MLP 的梯度",
    "MoE token dispatch": "MoE 的 token 分发",
    "MoE combine gradients": "MoE 合并的梯度",
    "context-parallel key/value exchange": "上下文并行的键/值交换",
    "FSDP2 gathers and gradient buffers": "FSDP2 的聚合参数与梯度缓冲",
    "peak (one moment) plus the reserve": "峰值（同一时刻）加预留",
    "sum {total}\npeak {peak}": "总和 {total}\n峰值 {peak}",
    "sum {total}\npeak + reserve {peak}": "总和 {total}\n峰值 + 预留 {peak}",
    # notebook 10's check on a GPU (actmem.measure.gpu_check)
    "Runs one training step of '{config}' on CUDA, reads torch.cuda.max_memory_allocated() "
    "and max_memory_reserved(), and records a memory snapshot for "
    "https://pytorch.org/memory_viz; {conf} narrows reserved over allocated.":
        "在 CUDA 上训练 '{config}' 一步，读出 torch.cuda.max_memory_allocated() 和 "
        "max_memory_reserved()，并录下显存快照，供 https://pytorch.org/memory_viz 查看；"
        "{conf} 可以缩小 reserved 比 allocated 多出的部分。",
    "Skipped: {why}": "已跳过：{why}",
    "no CUDA GPU here (torch.cuda.is_available() is False), so nothing was measured":
        "这里没有 CUDA GPU（torch.cuda.is_available() 为 False），所以什么也没有测",
    "predicted peak (the timeline): {bytes}": "预测的峰值（时间线）：{bytes}",
    "max_memory_allocated(): {bytes}, {diff:+.2%} against the prediction":
        "max_memory_allocated()：{bytes}，比预测 {diff:+.2%}",
    "max_memory_reserved(): {bytes}, {gap} above allocated":
        "max_memory_reserved()：{bytes}，比 allocated 多 {gap}",
    "snapshot written to {path}: open it on https://pytorch.org/memory_viz":
        "快照已写入 {path}：在 https://pytorch.org/memory_viz 打开它",
    "PyTorch is not installed here, so nothing was measured":
        "这里没有安装 PyTorch，所以什么也没有测",
}

MESSAGES = {
    # English message template -> Chinese: :func:`actmem.views.printed.message` reads the
    # fields back out of a message (an error, a measured explanation) that the code writes in
    # English, and puts them, translated where the catalog has them, into the Chinese one.
    "{name}={value} must divide {a} and {b}; valid {name2}: {valid}":
        "{name}={value} 必须同时整除 {a} 和 {b}；可用的 {name2}：{valid}",
    "{name}={value} must divide {target}; valid {name2}: {valid}":
        "{name}={value} 必须整除 {target}；可用的 {name2}：{valid}",
    "m={m}: Megatron-LM's interleaved schedule with the default microbatch_group_size (N = p) "
    "needs m to be a multiple of p={p}; microbatch_group_size=N with p <= N <= m and m mod N = 0 "
    "or >= p lifts that (e.g. N={n})":
        "m={m} 时，在默认的 microbatch_group_size（N = p）下，Megatron-LM 的交错式调度要求 m 是 "
        "p={p} 的整数倍；改设 microbatch_group_size=N（p <= N <= m，且 m mod N = 0 或 >= p）"
        "即可解除这一限制（例如 N={n}）",
    "LayerNorm {what} per token, kept so backward need not recompute it ({dtype} on CPU; "
    "PyTorch's CUDA kernel keeps fp32). The paper leaves it out: s*b elements, tiny next to "
    "s*b*h.":
        "每个 token 的 LayerNorm {what}：保存下来，反向时就不必重算（CPU 上为 {dtype}；"
        "PyTorch 的 CUDA kernel 保存 fp32）。论文没有计入它：只有 s*b 个元素，与 s*b*h 相比微不足道。",
    "scaled_dot_product_attention with dropout on CPU has no fused kernel: its math fallback "
    "upcasts to float32 and keeps {role} (4 bytes/element).":
        "CPU 上带 dropout 的 scaled_dot_product_attention 没有融合 kernel：它退回 math 后端，"
        "提升为 float32，并保存 {role}（每元素 4 字节）。",
    "--{flag} True": "--{flag}（设为 True）",
    "{who} et al. {year} ({paper}), Table {table} and model card: {count} parameters":
        "{who} 等人 {year}（{paper}），表 {table} 与模型卡：{count} 个参数",
}
"""Messages the code writes in English (errors, measured explanations, a preset's source),
as templates: see :func:`actmem.views.printed.message`."""
