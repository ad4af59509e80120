"""What an MoE layer's token dispatcher holds in flight, on one GPU.

**The dispatch buffers** (Megatron-LM's default training path,
``megatron/core/transformer/moe/``): ``moe_layer.py``: MoELayer.forward's
``custom_forward`` keeps in local variables, until the layer's output is
made, the permuted tokens (``hidden_states = self.preprocess(...)``:
``moe_utils.py``: permute, ``index_select``) and the all-to-all's output
(``dispatched_input = self.dispatch(...)``: ``token_dispatcher.py``:
MoEAlltoAllTokenDispatcher.token_dispatch); neither is saved for backward
(``index_select`` and ``_AllToAll`` keep indices and sizes only), so the
ledger does not count them. With R = the copies a rank sends
(:func:`actmem.layer.moe_copies.routed_copies`), x = etp, l = E/ep local
experts and 2h bytes per bf16 token copy (probabilities: 2 bytes per copy):

* the all-to-all over ep ranks returns its input when ep = 1
  (``tensor_parallel/mappings.py``: _AllToAll.forward); the all-gather
  over etp (``dispatch_postprocess``) returns R*x copies and the sort by
  local expert (``sort_chunks_by_idxs``, split and cat, only when l > 1)
  a copy of those; the last tensor of that chain is the experts' input, a
  ledger row (``expert_fc1_input``), the all-gather's output a transient
  the sort frees;
* after the experts (``routed_experts_compute``): their output (R*x
  copies, alive until ``combine_preprocess`` returns), its unsort (l > 1),
  the reduce-scatter over etp (R copies, x > 1), then the all-to-all back
  (``token_combine``, R copies, ep > 1) beside its input, and
  ``combine_postprocess``'s unpermute (``moe_utils.py``: unpermute, a
  ``scatter_add_`` into zeros of the rank's s*b/t tokens) beside its input.

Under FP8 (:mod:`actmem.layer.fp8`) the experts save FP8 copies of their
input, and the 16-bit one stays a transient: held by the layer's
``custom_forward`` when it is the permuted tokens or the all-to-all's output,
else by ``routed_experts_compute`` (``moe_layer.py``) until
``combine_preprocess`` returns (the experts' output, its unsort and the
reduce-scatter; with the all-gather dispatcher, unpermute). The experts
pad each local expert's tokens to the recipe's multiple first
(:func:`fp8_padding`): a padded copy of their input, alive to the end of
TEGroupedMLP's forward, where fc2's padded output and its unpadded copy
(the experts' output) sit beside it.

**The flex dispatcher** with DeepEP (:mod:`actmem.layer.moe_flex`) sends
each token once to each rank that holds one of its experts and permutes the
R tokens a rank receives to its experts: :func:`_flex_buffers`; in the
backward, the combine's gradient is a DeepEP dispatch (N/t tokens to R)
and unpermute's a gather (R to R_e). With HybridEP
(:mod:`actmem.layer.moe_hybridep`) the tokens land permuted in the
experts' input, through HybridEP's own buffers: :func:`_hybridep_buffers`;
the combine's gradient is a dispatch (N/t tokens to R_e).

:func:`dispatch_buffers` takes the largest of those moments (beside the
held permuted tokens and probabilities); the layer's rows are all alive
then. In the backward (:func:`dispatch_gradients`) the autograd engine runs
the same chain in reverse from the MoE block's output gradient: unpermute's
backward (a gather, R copies), the all-to-all's (R), the reduce-scatter's
(an all-gather, R*x), the unsort's (R*x), each op's input and output
gradient alive together, before any expert's backward frees a row. The
routed copies are the balanced expectation of :mod:`actmem.layer.moe`, or,
with ``moe_rank_load``, those of a busier rank on the receiving side (the
copies a rank sends, and gets back, stay its own s*b*k/t).

**The all-gather dispatcher** (``token_dispatcher.py``:
MoEAllGatherTokenDispatcher, Megatron-LM's default) gathers, over the etp*ep
ranks of its group, the G = s*b*etp*ep/t tokens into the global memory
buffer (:func:`gathered_tokens_buffer`, a workspace), their dense
probabilities (held until the layer returns) and routing map; it keeps the
local experts' columns of the map (``self.local_map``), permutes without
probabilities and picks them with ``masked_select`` (ledger rows). After
the experts, ``unpermute`` scatters their output into zeros of the G
tokens (both alive), and ``token_combine`` reduce-scatters that (cast to
the router's dtype first when it is fp32 or fp64). The permutation's own
moment (the routing map's argsort, 8 bytes per gathered token and local
expert) comes before the experts' rows exist and holds less. In the
backward the reduce-scatter's gradient is an all-gather (G tokens) beside
unpermute's gather of the copies' gradients (:func:`dispatch_gradients`).
"""

from __future__ import annotations

from ...layer.config import LayerConfig
from ...layer.fp8_scales import fp8_align
from ...layer.moe import probability_bytes
from ...layer.moe_copies import received_copies, routed_copies
from ...layer.moe_flex import received_tokens
from ..job.model import ModelConfig


def dispatch_buffers(c: LayerConfig, ep: int = 1) -> dict[str, int]:
    """Transient bytes of one MoE layer's token dispatch at its busiest
    forward moment, by buffer (module docstring), on one GPU.

    Args:
        c: an MoE :class:`LayerConfig` (t, etp, E, k, capacity).
        ep: expert-parallel size (divides E).

    Raises:
        ValueError: ``c`` has no experts, ep does not divide E, or a flex
            layer's own ep is not ``ep``.

    >>> from actmem import LayerConfig
    >>> mixtral = LayerConfig(4096, 1, 4096, 32, activation="swiglu", num_experts=8,
    ...                       ffn_hidden_size=14336)   # R = 4096 x 2 copies of 2h bytes
    >>> {name: n // 2**20 for name, n in dispatch_buffers(mixtral, ep=8).items()}   # MiB
    {'permuted tokens': 64, "experts' output": 64, 'all-to-all back': 64}
    """
    E, x = _experts(c, ep), c.expert_t
    if c.moe_token_dispatcher_type == "allgather":
        return _allgather_buffers(c, ep)
    if c.moe_token_dispatcher_type == "flex":
        return _flex_buffers(c, ep)
    (R, got), row, local = _copies(c, ep), 2 * c.h, E // ep
    chain = [("permuted tokens", R)] + [("all-to-all output", got)] * (ep > 1) \
        + [("all-gather output", got * x)] * (x > 1) + [("sorted tokens", got * x)] * (local > 1)
    layer_wide = ("permuted tokens", "all-to-all output")   # MoELayer's custom_forward
    saved = chain[:-1] if not c.fp8 else chain   # FP8: the experts save an FP8 copy
    held = {name: n * row for name, n in saved if name in layer_wide}
    probs = "all-to-all output" if ep > 1 else "permuted tokens"   # dispatch() returns
    if chain[-1][0] != probs:  # held too (the experts' own input otherwise: a ledger row)
        held["dispatched probabilities"] = probability_bytes(c) * got
    after = [("experts' output", got * x)] + [("unsorted output", got * x)] * (local > 1) \
        + [("reduce-scatter output", got)] * (x > 1) + [("all-to-all back", R)] * (ep > 1)
    moments = [after[:n] for n in range(1, len(after) + 1)]
    if ep > 1 and len(after) > 2:   # combine's all-to-all: the experts' output is freed
        moments[-1] = after[-2:]
    if c.fp8 and chain[-1][0] not in layer_wide:   # routed_experts_compute holds it
        inside = len(after) - (ep > 1)
        moments[:inside] = [m + [("experts' 16-bit input", got * x)] for m in moments[:inside]]
    moments[0] += [(name, got * x) for name in fp8_padding(c, got * x, local)]
    # unpermute: its input and the zeros of the rank's s*b/t tokens it scatters into
    moments.append([after[-1], ("unpermuted output", c.s * c.b // c.t)])
    busiest = max(moments, key=lambda m: sum(n for _, n in m))
    return {**held, **{name: n * row for name, n in busiest}}


def dispatch_gradients(c: LayerConfig, ep: int = 1) -> dict[str, int]:
    """Transient bytes at the busiest moment of the MoE block's backward
    before any expert's: the layer output's gradient (and the dropout's),
    ``2sbh`` each (``/t`` under sequence parallelism), and the largest pair
    of consecutive gradients of the combine chain in reverse (module
    docstring); one GPU.

    Raises:
        ValueError: as :func:`dispatch_buffers`.
    """
    E, x = _experts(c, ep), c.expert_t
    (R, got), row, local = _copies(c, ep), 2 * c.h, E // ep
    sbh = c.s * c.b * c.h // (c.t if c.sequence_parallel else 1)
    output = {"layer output gradient": 2 * sbh * (1 + c.dropout)}
    if c.moe_token_dispatcher_type == "allgather":
        gathered, copies = _gathered(c, ep), got * x
        wide = probability_bytes(c) > 2 and x * ep > 1   # its gather in the router's dtype
        return {**output, "combine gradients": max(
            (gathered + copies) * row, 3 * gathered * row if wide else 0)}
    if c.moe_token_dispatcher_type == "flex":   # combine's backward (a dispatch), unpermute's
        _check_flex_layer(c, ep)
        received = [] if c.moe_flex_dispatcher_backend == "hybridep" else [received_tokens(c)]
        chain = [c.s * c.b // c.t, *received, got * x]
    else:
        chain = [R] + [got] * (ep > 1) + [got * x] * (x > 1) + [got * x] * (local > 1)
    pairs = [a + b for a, b in zip(chain, chain[1:])] or chain
    return {**output, "combine gradients": max(pairs) * row}


def _copies(c: LayerConfig, ep: int) -> tuple[int, int]:
    """(copies the rank sends, copies its experts receive): the second is
    :func:`actmem.layer.moe_copies.received_copies` (a busier rank's, with
    ``moe_rank_load``), the first itself when ep = 1 (every copy local)."""
    got = received_copies(c)
    return (got if ep == 1 else routed_copies(c)), got


def _gathered(c: LayerConfig, ep: int) -> int:
    """Tokens the all-gather dispatcher gathers over its etp*ep ranks: the
    rank's s*b/t times etp*ep."""
    return c.s * c.b // c.t * c.expert_t * ep


def _allgather_buffers(c: LayerConfig, ep: int) -> dict[str, int]:
    """:func:`dispatch_buffers` of the all-gather dispatcher (module
    docstring): held through the layer's forward, the gathered
    probabilities (when etp*ep > 1) and the local experts' routing map
    (when ep > 1, a column slice made contiguous); then the busier of
    unpermute (the experts' output and the zeros of the gathered tokens it
    scatters into) and, with an fp32 or fp64 router, token_combine's cast of
    those gathered tokens before the reduce-scatter (the experts' output
    freed)."""
    G, E, row = _gathered(c, ep), c.num_experts, 2 * c.h
    p, copies = probability_bytes(c), received_copies(c) * c.expert_t
    held = {"gathered probabilities": p * G * E * (c.expert_t * ep > 1),
            "local routing map": G * E // ep * (ep > 1)}
    experts = {"experts' output": copies * row, "experts' 16-bit input": copies * row * bool(c.fp8)}
    padding = {**experts, **{name: copies * row for name in fp8_padding(c, copies, E // ep)}}
    unpermute = {**experts, "unpermuted output": G * row}
    cast = {"unpermuted output": G * row, "cast for the reduce-scatter": G * row * p // 2}
    wide = p > 2 and c.expert_t * ep > 1
    busiest = max([padding, unpermute] + [cast] * wide, key=lambda m: sum(m.values()))
    return {name: n for name, n in {**held, **busiest}.items() if n}


def _flex_buffers(c: LayerConfig, ep: int) -> dict[str, int]:
    """:func:`dispatch_buffers` of the flex dispatcher with DeepEP
    (:mod:`actmem.layer.moe_flex`; R received tokens, R_e copies, k' = etp*k,
    L local experts): held through the layer, DeepEP's received tokens
    [R, h] (``custom_forward``'s ``dispatched_input``) and, until the
    combine releases them (``_DeepepManager.combine``), the received
    indices [R, k'] int64 and the multi-hot probabilities [R, L] fp32; then
    the busiest of the experts' output [R_e, h], unpermute's [R, h] beside
    it, and DeepEP's combined tokens [N/t, h] beside unpermute's. Under
    FP8 the experts' 16-bit input [R_e, h] (the permuted tokens) is held by
    ``routed_experts_compute`` until unpermute returns, and without the
    fused permutation the experts pad it (:func:`fp8_padding`)."""
    _check_flex_layer(c, ep)
    if c.moe_flex_dispatcher_backend == "hybridep":
        return _hybridep_buffers(c)
    R, copies, row = received_tokens(c), received_copies(c) * c.expert_t, 2 * c.h
    L, k = c.num_experts // c.ep, c.expert_t * c.moe_router_topk
    held = {"received tokens": R * row, "received indices and probabilities": R * (8 * k + 4 * L)}
    sixteen = {"experts' 16-bit input": copies * row} if c.fp8 else {}
    padding = {name: copies * row for name in fp8_padding(c, copies, L)}
    moments = [{"experts' output": copies * row, **sixteen, **padding},
               {"experts' output": copies * row, "unpermuted output": R * row, **sixteen},
               {"unpermuted output": R * row, "combined output": c.s * c.b // c.t * row}]
    return {**held, **max(moments, key=lambda m: sum(m.values()))}


def _hybridep_buffers(c: LayerConfig) -> dict[str, int]:
    """:func:`dispatch_buffers` with HybridEP (:mod:`actmem.layer.moe_hybridep`;
    R_e copies): the dispatch writes the experts' input [R_e, h] (a ledger
    row, or under FP8 the 16-bit input ``custom_forward`` holds through the
    layer, padded already: no ``Fp8Padding``); then the experts' output
    [R_e, h] and the combine's output [N/t, h] beside it (HybridEP
    unpermutes into its own buffer, ``fused_a2a.py``: HybridEPCombine)."""
    copies, row = received_copies(c) * c.expert_t, 2 * c.h
    held = {"experts' 16-bit input": copies * row} if c.fp8 else {}
    return {**held, "experts' output": copies * row, "combined output": c.s * c.b // c.t * row}


def fp8_padding(c: LayerConfig, copies: int, local: int) -> tuple[str, ...]:
    """The 16-bit copies an FP8 layer's experts make to pad their ``copies``
    tokens (those of the rank's ``local`` experts): Megatron-LM's
    TEGroupedMLP.forward (``moe/experts.py``) runs Transformer Engine's
    ``Fp8Padding``, which copies its input into [rows padded per local expert
    to the recipe's multiple, h] (:func:`actmem.layer.fp8_scales.fp8_align`;
    ``module/fp8_padding.py``) held to the end of the forward, and
    ``Fp8Unpadding``, which copies fc2's padded output back into the
    experts' output beside it; each counted at ``copies`` rows (the pad
    rows, 0 to multiple - 1 per local expert by the routing, are not, nor
    the probabilities' padded copy, 4 bytes a token). No
    copies without FP8, when the flex dispatcher's fused permutation pads
    (TE's ``moe_permute_and_pad_with_probs``, ``Fp8Padding`` then returns its
    input) or HybridEP does (``moe_utils.py``: skip_routed_expert_padding),
    or when padding to capacity gives every local expert a multiple."""
    flex = c.moe_token_dispatcher_type == "flex"
    if not c.fp8 or (flex and (c.moe_permute_fusion
                               or c.moe_flex_dispatcher_backend == "hybridep")):
        return ()
    if c.moe_pad_expert_input_to_capacity and (copies // local) % fp8_align(c) == 0:
        return ()
    return ("padded experts' input", "fc2's padded output")


def _check_flex_layer(c: LayerConfig, ep: int) -> None:
    """A flex layer's rows follow its own local experts: ``c.ep`` must be
    ``ep``.

    Raises:
        ValueError: naming both.
    """
    if c.ep != ep:
        raise ValueError(f"ep={ep} with a flex layer of ep={c.ep}: the flex dispatcher's rows "
                         f"follow the layer's local experts; build the layer with ep={ep}")


def gathered_tokens_buffer(model: ModelConfig, t: int, ep: int, etp: int | None) -> int:
    """Bytes of the gathered tokens the all-gather dispatcher writes into
    Megatron-LM's global memory buffer ``"mpu"`` (``token_dispatcher.py``:
    MoEAllGatherTokenDispatcher.token_dispatch, ``use_global_buffer=True``):
    2h bytes for each of the s*b*etp*ep/t tokens, allocated once and kept
    (``megatron/core/utils.py``: GlobalMemoryBuffer); 0 without experts,
    with the all-to-all dispatcher, or when etp*ep = 1 (nothing gathered)."""
    x = t if etp is None else etp
    if model.num_experts is None or model.moe_token_dispatcher_type != "allgather" \
            or x * ep == 1:
        return 0
    return model.s * model.b // t * x * ep * 2 * model.h


def _experts(c: LayerConfig, ep: int) -> int:
    if not isinstance(c, LayerConfig) or c.num_experts is None:
        raise ValueError(f"c must be an MoE LayerConfig (num_experts set), got {c!r}")
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1 or c.num_experts % ep:
        raise ValueError(f"ep={ep!r} must be a positive int dividing "
                         f"num_experts={c.num_experts}")
    return c.num_experts
