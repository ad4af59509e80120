"""FP8 with MoE layers (actmem.layer.fp8): the rows, Transformer Engine's
states per local expert, the dispatcher's 16-bit transient, and a job, each
against a hand derivation."""

import pytest

from actmem import MOE_PRESETS, Job, LayerConfig, training_memory
from actmem.layer.fp8_weights import fp8_state_bytes
from actmem.layer.ledger import ledger_rows
from actmem.run.model_states.fp8_states import fp8_stage_bytes
from actmem.run.moments.moe_dispatch import dispatch_buffers

N, H, FE, FS = 4096, 4096, 1024, 2048   # tokens s*b, h, expert and shared widths
MOE = dict(s=N, b=1, h=H, a=32, t=2, sequence_parallel=True, activation="swiglu",
           num_experts=8, moe_ffn_hidden_size=FE, moe_shared_expert_intermediate_size=FS,
           etp=1, ep=4, flash_attention=True)


def per_rank(config):
    return {r.key: r.elements * r.bytes_per_element // r.ranks for r in ledger_rows(config)}


def test_experts_and_shared_experts_save_fp8_inputs_and_one_scale_per_local_expert():
    bf16 = per_rank(LayerConfig(**MOE))
    fp8 = per_rank(LayerConfig(**MOE, fp8="hybrid", fp8_recipe="tensorwise"))
    k, t = 2, 2
    changed = {
        "qkv_input": N * H // t,                       # 1 byte, the local shard under SP
        "expert_fc1_input": N * k * H // t,            # the rank's N*k/t copies of h
        "expert_fc2_input": N * k * FE // t,
        "shared_fc2_input": N * FS // t,
        # qkv, shared fc2, and E/ep = 2 local experts' fc1 and fc2 inputs (the shared
        # fc1 saves the router's 16-bit input: set_save_original_input)
        "fp8_scale_inv": 4 * (1 + 1 + 2 + 2),
    }
    assert {key: b for key, b in fp8.items() if bf16.get(key) != b} == changed
    assert set(bf16) - set(fp8) == set()
    assert fp8["moe_input"] == bf16["moe_input"] == 2 * N * H // t   # the router keeps it


def test_delayed_scaling_adds_the_projection_copy_and_no_expert_tensor():
    tensorwise = per_rank(LayerConfig(**MOE, fp8="e4m3", fp8_recipe="tensorwise"))
    delayed = per_rank(LayerConfig(**MOE, fp8="e4m3"))
    assert delayed["proj_input_fp8"] == N * H // 2
    assert delayed["shared_fc1_input_fp8"] == N * H // 2   # beside moe_input's 16 bits
    assert "shared_fc1_input_fp8" not in tensorwise
    assert delayed["fp8_scale_inv"] - tensorwise["fp8_scale_inv"] == 4 * 2


def test_recomputed_shared_experts_keep_no_fp8_copy():
    rows = per_rank(LayerConfig(**MOE, fp8="hybrid", fp8_recipe="tensorwise",
                                recompute="selective", recompute_modules=("shared_experts",)))
    assert "shared_fc1_input_fp8" not in rows and "shared_fc2_input" not in rows
    assert rows["fp8_scale_inv"] == 4 * (1 + 2 + 2)


def test_te_states_per_local_expert_gemm():
    q = kv = 32 * 128   # 32 heads of 128 (no grouping): Q, K and V each h wide
    weights = [H * (q + 2 * kv) // 2, q * H // 2,          # qkv, proj over t = 2
               2 * FS * H // 2, FS * H // 2,               # shared fc1 (SwiGLU), fc2
               *[2 * FE * H] * 2, *[FE * H] * 2]           # 2 local experts, etp = 1
    hopper = fp8_state_bytes(LayerConfig(**MOE, fp8="hybrid"))
    assert hopper == {"weight_copies": 2 * sum(weights) + 4 * 8, "parameters": 0,
                      "scaling": 20 * (1 + 1) * 8}
    assert hopper["weight_copies"] == 142_606_368
    blackwell = fp8_state_bytes(LayerConfig(**MOE, fp8="hybrid", fp8_recipe="tensorwise"),
                                transpose=False)
    assert blackwell == {"weight_copies": sum(weights) + 4 * 8, "parameters": 0, "scaling": 0}


def test_stages_count_dense_and_moe_layers_apart():
    """DeepSeekMoE 16B: the first layer dense, 27 MoE layers; p = 2 puts the
    dense one and 13 MoE layers on stage 0."""
    model = MOE_PRESETS["deepseek-moe-16b"]
    h, f, fe, fs, a = 2048, 10944, 1408, 2816, 16 * 128
    attention = h * 3 * a + a * h
    dense = 2 * (attention + 3 * f * h) + 4 * 4 + 160
    local = 64 // 8
    moe_gemms = 4 + 2 * local
    moe = 2 * (attention + 3 * fs * h + local * 3 * fe * h) + 4 * moe_gemms + 40 * moe_gemms
    assert fp8_stage_bytes(model, "hybrid", t=1, p=2, ep=8) == [dense + 13 * moe, 14 * moe]


@pytest.mark.parametrize("ep, etp, chain_end", [(8, 1, "all-to-all output"), (1, 1, None),
                                                 (2, 2, None)])
def test_the_experts_16_bit_input_outlives_them_under_fp8(ep, etp, chain_end):
    """The experts' bf16 input is no longer a saved row: the layer holds it
    (the all-to-all's output, E/ep = 1 and etp = 1) or routed_experts_compute
    does until combine_preprocess returns (the sorted tokens). The busiest
    moment is then the end of the experts' forward: Fp8Padding's padded copy
    of their input, fc2's padded output and Fp8Unpadding's copy of it (the
    experts' output), each a copy of the rank's tokens."""
    shape = {**MOE, "moe_shared_expert_intermediate_size": None, "ep": ep, "etp": etp}
    bf16 = dispatch_buffers(LayerConfig(**shape), ep)
    fp8 = dispatch_buffers(LayerConfig(**shape, fp8="hybrid"), ep)
    copies = N * 2 // 2 * etp        # the rank's N*k/t copies, all-gathered over etp
    row = 2 * H * copies
    held = {key: bf16[key] for key in ("permuted tokens", "all-to-all output",
                                       "dispatched probabilities") if key in bf16}
    padding = {"experts' output": row, "padded experts' input": row, "fc2's padded output": row}
    assert fp8 == {**held, **padding, chain_end or "experts' 16-bit input": row}


def test_padding_to_a_multiple_of_16_makes_no_copy():
    """With capacity padding each local expert gets capacity x ep copies:
    ceil(4096 * 2 / 8 * 1.0) = 1024 per sender, a multiple of 16."""
    shape = {**MOE, "moe_shared_expert_intermediate_size": None, "ep": 4,
             "moe_expert_capacity_factor": 1.0, "moe_pad_expert_input_to_capacity": True}
    fp8 = dispatch_buffers(LayerConfig(**shape, fp8="hybrid"), 4)
    assert "padded experts' input" not in fp8 and "experts' 16-bit input" in fp8


def test_the_allgather_dispatcher_pads_too():
    shape = {**MOE, "moe_shared_expert_intermediate_size": None, "ep": 2,
             "moe_token_dispatcher_type": "allgather"}
    fp8 = dispatch_buffers(LayerConfig(**shape, fp8="hybrid"), 2)
    row = 2 * H * N * 2 // 2          # the rank's experts' N*k/t copies (etp = 1)
    gathered = 2 * H * N // 2 * 2     # unpermute's zeros of the G = N/t * ep tokens
    assert fp8["padded experts' input"] == fp8["fc2's padded output"] == row
    assert row * 4 > row * 2 + gathered   # the padding moment beats unpermute's
    assert "unpermuted output" not in fp8


def test_a_mixtral_job_in_fp8_on_an_h100():
    mixtral = MOE_PRESETS["mixtral-8x7b"]
    job = dict(t=2, sequence_parallel=True, p=4, d=4, ep=4, m=8, gpu_memory="H100 80GB SXM")
    bf16 = training_memory(mixtral, **job).stages
    fp8 = training_memory(mixtral, **job, fp8="hybrid").stages
    a, kv, f = 4096, 1024, 14336
    weights = (4096 * (a + 2 * kv) + a * 4096) // 2 + 2 * 3 * f * 4096 // 2   # etp = t = 2
    gemms = 2 + 2 * 2
    per_layer = 2 * weights + 4 * gemms + 40 * gemms
    assert [s.weights - b.weights for s, b in zip(fp8, bf16)] == [8 * per_layer] * 4
    assert all(s.layer_activations < b.layer_activations for s, b in zip(fp8, bf16))


@pytest.mark.parametrize("build, message", [
    (lambda: LayerConfig(**MOE, fp8="hybrid", recompute="selective",
                         recompute_modules=("moe_act",)),
     "GroupedLinear refuses under delayed scaling"),
    (lambda: Job(MOE_PRESETS["mixtral-8x7b"], t=2, sequence_parallel=True, d=4, ep=4,
                 fp8="hybrid", fp8_param_gather=True, accounting="megatron",
                 distributed_optimizer=True),
     "fp8_param_gather=True with num_experts=8"),
    (lambda: LayerConfig(**{**MOE, "ep": 3}), "ep=3 must divide num_experts=8"),
    (lambda: LayerConfig(s=64, b=1, h=64, a=4, ep=2), "ep=2 need num_experts"),
])
def test_what_fp8_with_experts_refuses_is_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_moe_act_recomputation_runs_under_current_scaling():
    rows = per_rank(LayerConfig(**MOE, fp8="hybrid", fp8_recipe="tensorwise",
                                recompute="selective", recompute_modules=("moe_act",)))
    assert "expert_fc2_input" not in rows and rows["fp8_scale_inv"] == 4 * (1 + 1 + 2)


def test_a_launch_with_experts_in_fp8():
    argv = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
            "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
            "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", "1024", "--bf16", "--fp8-format", "hybrid", "--fp8-recipe",
            "tensorwise", "--num-experts", "4", "--expert-model-parallel-size", "2",
            "--moe-grouped-gemm", "--moe-token-dispatcher-type", "alltoall",
            "--disable-bias-linear"]
    job = Job.from_megatron_args(argv, world_size=2)
    assert (job.fp8, job.fp8_recipe, job.ep) == ("hybrid", "tensorwise", 2)
    assert training_memory(job).stages[0].peak > 0


MEASURED = dict(s=32, b=2, h=64, a=4, num_experts=4, moe_ffn_hidden_size=96, moe_router_topk=2)
"""A small layer on one rank (every routed copy local: the expert rows exact)."""


@pytest.fixture(scope="module", params=["swiglu_shared_delayed", "gelu_tensorwise",
                                        "allgather_flash", "permute_fusion"])
def measured_moe_fp8(request):
    import os
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="torch is not installed")
    from actmem.measure.compare import compare
    from actmem.measure.moe_fp8 import measure_moe_fp8
    extra = {"swiglu_shared_delayed": dict(activation="swiglu", fp8="hybrid",
                                           moe_shared_expert_intermediate_size=64),
             "gelu_tensorwise": dict(activation="gelu", fp8="e4m3", fp8_recipe="tensorwise",
                                     moe_shared_expert_intermediate_size=64),
             "allgather_flash": dict(activation="swiglu", fp8="hybrid", flash_attention=True,
                                     dropout=False, moe_token_dispatcher_type="allgather"),
             "permute_fusion": dict(activation="swiglu", fp8="hybrid",
                                    moe_permute_fusion=True),
             }[request.param]
    return compare(measure_moe_fp8(LayerConfig(**MEASURED, **extra)))


def test_measured_moe_fp8_rows_to_the_byte(measured_moe_fp8):
    """Measured: the reference MoE layer with FP8 linears (the experts
    quantizing each expert's tokens apart) saves exactly the ledger's rows."""
    c = measured_moe_fp8
    assert [(r.key, r.measured_bytes) for r in c.rows] == [(r.key, r.ledger_bytes)
                                                         for r in c.rows]
    dtypes = {r.key: r.measured_dtype for r in c.rows}
    assert dtypes["expert_fc1_input"] == "float8_e4m3fn" and dtypes["moe_input"] == "bfloat16"
    assert all(e.storage.saved_by[0].startswith(("NativeLayerNorm", "MulBackward0"))
               for e in c.extras)
