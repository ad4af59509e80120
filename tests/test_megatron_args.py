"""Job.from_megatron_args (issue 43): a Megatron-LM launch as it is typed.

The public runs of actmem/data/megatron_runs.json are given exactly as
Megatron-LM's CI launches them (their model_config.yaml's MODEL_ARGS and
ENV_VARS at the pinned commit, on one 8-GPU node)."""

import json
from importlib import resources

import pytest

import actmem
from actmem import Job, ModelConfig, training_memory
from actmem.run.job.megatron_args import table

RUNS = json.loads(resources.files("actmem").joinpath("data/megatron_runs.json").read_text())["runs"]
BASE = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
        "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
        "--bf16"]


@pytest.mark.parametrize("name, within", [("gpt3_7b_tp4_pp1_memory_speed", 0.001),
                                          ("gpt3_7b_tp4_pp1_memory_speed_a100", 0.001),
                                          ("gpt3_7b_tp1_pp4_memory_speed", 0.01),
                                          ("gpt3_mcore_te_tp2_zp_z3_resume_fsdp_dtensor", 0.01)])
def test_the_public_runs_as_launched_meet_their_measured_peak(name, within):
    run = RUNS[name]
    launch = run["launch"]
    job = Job.from_megatron_args(launch["argv"], world_size=launch["world_size"],
                                 env=launch["env"], gpu=run["gpu"])
    peak = training_memory(job).stages[-1].peak   # the last rank's, as the golden values
    measured = run["mem_max_allocated_bytes"]
    assert abs(peak - measured) / measured < within
    # the hand translation held in the same file: the same job
    by_hand = Job(ModelConfig(**run["model"]), gpu_memory=run["gpu"], **run["run"])
    assert job.model == by_hand.model.with_(source=job.model.source,
                                            max_positions=job.model.s)   # the same table
    assert job.changed().keys() == by_hand.changed().keys()
    assert job.gradient_accumulation_fusion is by_hand.gradient_accumulation_fusion is False


def test_an_a100_keeps_the_attention_output_twice_as_measured():
    # the same launch, measured on an A100 and on an H100: Transformer Engine runs
    # flash-attn on the A100 (compute capability 8.0), cuDNN on the H100
    def peak(name, **model):
        run = RUNS[name]
        launch = run["launch"]
        job = Job.from_megatron_args(launch["argv"], world_size=launch["world_size"],
                                     env=launch["env"], gpu=run["gpu"])
        return training_memory(job.with_(model=job.model.with_(**model))).stages[-1].peak, \
            run["mem_max_allocated_bytes"]
    a100, measured = peak("gpt3_7b_tp4_pp1_memory_speed_a100")
    without, _ = peak("gpt3_7b_tp4_pp1_memory_speed_a100", flash_output_copy=False)
    assert abs(a100 - measured) / measured < 0.001
    assert (measured - without) / measured > 0.015   # the copy is what the A100 adds


def test_every_argument_of_the_pinned_commit_is_classified_with_why():
    rows = table()
    assert len(rows) == 840 and len({r["flag"] for r in rows}) == 840
    assert {r["class"] for r in rows} == {"modelled", "neutral", "refused"}
    assert all(len(r["why"]) > 8 for r in rows)
    about = json.loads(resources.files("actmem").joinpath(
        "data/megatron_arguments.json").read_text())["about"]
    assert about["commit"].startswith("d98e8a64")


def test_sizes_are_derived_as_megatron_lm_derives_them():
    job = Job.from_megatron_args(
        BASE + ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                "--num-layers-per-virtual-pipeline-stage", "1"], world_size=8)
    assert (job.t, job.p, job.d, job.m, job.v, job.schedule) == (2, 2, 2, 4, 2, "interleaved")
    assert (job.model.vocab_size, job.precision, job.model.flash_attention) == (1000, "bf16", True)
    other = Job.from_megatron_args(" ".join(BASE[:-1]) + " --tokenizer-type GPT2BPETokenizer"
                                   " --recompute-granularity full --recompute-method uniform"
                                   " --recompute-num-layers 2 --pipeline-model-parallel-size 2",
                                   world_size=4)
    assert (other.model.vocab_size, other.precision, other.recompute,
            other.recompute_num_layers, other.p, other.d, other.m) == \
        (50257, "fp32", "full", 2, 2, 2, 4)
    local = Job.from_megatron_args(BASE + ["--transformer-impl", "local"], world_size=1)
    unfused = Job.from_megatron_args(BASE, world_size=1,
                                     env={"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "0"})
    assert (local.model.flash_attention, local.transformer_engine,
            unfused.model.flash_attention) == (False, False, False)


def test_moe_launches_read_their_layer_pattern():
    job = Job.from_megatron_args(
        BASE + ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "128",
                "--moe-layer-freq", "([0]*1+[1]*3)", "--moe-token-dispatcher-type", "alltoall",
                "--expert-model-parallel-size", "2", "--swiglu", "--normalization", "RMSNorm",
                "--disable-bias-linear"], world_size=2)
    assert (job.model.num_experts, job.model.moe_layer_freq, job.ep, job.d) == \
        (4, (0, 1, 1, 1), 2, 2)


def test_megatron_lm_s_default_moe_launch_is_read_as_it_runs():
    """Megatron-LM's MoE defaults (the all-gather dispatcher, GeLU experts)
    and its CI's sinkhorn top-1 router with an fp32 router dtype."""
    job = Job.from_megatron_args(
        BASE + ["--num-experts", "8", "--moe-router-topk", "1", "--expert-model-parallel-size",
                "2", "--moe-router-load-balancing-type", "sinkhorn", "--moe-router-dtype",
                "fp32", "--disable-bias-linear", "--moe-grouped-gemm"], world_size=2)
    m = job.model
    assert (m.moe_token_dispatcher_type, m.activation, m.moe_router_load_balancing_type,
            m.moe_router_dtype, m.moe_router_topk, job.ep, job.moe_grouped_gemm) == \
        ("allgather", "gelu", "sinkhorn", "fp32", 1, 2, True)


DEEPSEEK_PROXY = ["--num-experts", "16", "--moe-router-topk", "4", "--moe-ffn-hidden-size", "64",
                  "--expert-model-parallel-size", "2", "--moe-token-dispatcher-type",
                  "alltoall", "--moe-router-load-balancing-type", "seq_aux_loss",
                  "--moe-aux-loss-coeff", "1e-4", "--moe-router-pre-softmax",
                  "--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias",
                  "--moe-router-num-groups", "4", "--moe-router-group-topk", "2",
                  "--moe-router-topk-scaling-factor", "2.0", "--moe-router-dtype", "fp32",
                  "--moe-permute-fusion",
                  "--multi-latent-attention", "--qk-layernorm", "--q-lora-rank", "96",
                  "--kv-lora-rank", "32", "--qk-head-dim", "32", "--qk-pos-emb-head-dim", "16",
                  "--v-head-dim", "32", "--swiglu", "--normalization", "RMSNorm",
                  "--disable-bias-linear", "--position-embedding-type", "rope",
                  "--attention-backend", "flash"]
"""The router and attention of Megatron-LM's DeepSeek-V3 proxy CI runs
(tests/functional_tests/test_cases/moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_*), small."""


def test_a_deepseek_launch_gets_its_router_and_the_latents_norms():
    """--moe-router-pre-softmax is read in the softmax branch only, so the
    sigmoid router takes none; with MLA --qk-layernorm builds the latents'
    norms, which actmem.layer.mla counts, not per-head norms."""
    m = Job.from_megatron_args(BASE + DEEPSEEK_PROXY, world_size=2).model
    assert (m.moe_router_score_function, m.moe_router_pre_softmax,
            m.moe_router_enable_expert_bias, m.moe_router_num_groups,
            m.moe_router_group_topk, m.moe_router_load_balancing_type) == \
        ("sigmoid", False, True, 4, 2, "seq_aux_loss")
    assert (m.multi_latent_attention, m.qk_layernorm, m.q_lora_rank) == (True, False, 96)
    rows = {r.key: r.bytes for r in actmem.ledger_rows(m.layer(t=1))}
    N, E = 512 * 2, 16
    assert (rows["router_scores"], rows["router_score_sums"], rows["router_aux_sums"],
            rows["q_down_output"]) == (4 * N * E, 4 * N, 4 * N, 2 * N * 96)
    assert "router_group_mask" not in rows   # the expert bias picks the experts
    assert rows["permute_row_id_map"] == 4 * N * (2 * E + 1)   # TE's fused permutation


@pytest.mark.parametrize("drop, message", [
    ("--qk-layernorm", r"--multi-latent-attention without --qk-layernorm: actmem counts MLA "
                       r"with the latents' norms"),
    ("--q-lora-rank", r"--multi-latent-attention without --q-lora-rank"),
])
def test_mla_without_the_latents_norms_is_refused_by_name(drop, message):
    launch = BASE + DEEPSEEK_PROXY
    i = launch.index(drop)
    launch = launch[:i] + launch[i + (2 if drop == "--q-lora-rank" else 1):]
    with pytest.raises(ValueError, match=message):
        Job.from_megatron_args(launch, world_size=2)


@pytest.mark.parametrize("extra, env, message", [
    (["--main-grads-dtype", "bf16"], {}, r"--main-grads-dtype bf16: refused: Refused when "
     r"set: bf16 main gradients"),
    (["--optimizer", "sgd"], {}, r"--optimizer sgd: actmem models adam, muon"),
    (["--recompute-granularity", "full", "--recompute-method", "block"], {},
     r"--recompute-method block: actmem models uniform"),
    (["--tensor-model-parallel-sizes", "2"], {}, r"unrecognized arguments: "
     r"--tensor-model-parallel-sizes"),
    (["--tensor-model-parallel-size", "two"], {}, r"--tensor-model-parallel-size: invalid int"),
    (["--num-experts", "4", "--moe-token-dispatcher-type", "flex",
      "--moe-flex-dispatcher-backend", "ncclep"], {},
     r"--moe-flex-dispatcher-backend ncclep: actmem models deepep, hybridep"),
    (["--num-experts", "4", "--moe-router-load-balancing-type", "aux_loss", "sinkhorn"], {},
     r"--moe-router-load-balancing-type aux_loss sinkhorn: several load-balancing types"),
    (["--num-experts", "4", "--moe-permute-fusion", "--moe-token-dispatcher-type", "allgather"],
     {}, r"moe_permute_fusion=True is modelled with moe_token_dispatcher_type='alltoall'"),
    (["--num-experts", "4", "--moe-router-score-function", "sqrtsoftplus"], {},
     r"--moe-router-score-function sqrtsoftplus: actmem models softmax, sigmoid"),
    (["--num-experts", "4", "--moe-router-load-balancing-type", "quantile_balancing"], {},
     r"--moe-router-load-balancing-type quantile_balancing: actmem models aux_loss"),
    (["--hidden-dropout", "0"], {}, r"--hidden-dropout 0.0 with --attention-dropout 0.1"),
    (["--tokenizer-type", "HuggingFaceTokenizer"], {}, r"--tokenizer-type HuggingFaceTokenizer:"
     r" its vocabulary size is in the tokenizer's files"),
    ([], {"MY_FLAG": "1"}, r"environment variable MY_FLAG='1' is not modelled"),
    (["--global-batch-size", "12"], {}, r"--global-batch-size 12 must be a multiple of "
     r"--micro-batch-size 2 times d=4"),
])
def test_what_is_not_modelled_is_refused_by_name(extra, env, message):
    with pytest.raises(ValueError, match=message):
        Job.from_megatron_args(BASE + extra, world_size=4, env=env)


def test_a_world_size_that_does_not_divide_is_named():
    with pytest.raises(ValueError, match=r"world_size=6 must be a multiple of t\*p\*cp=4"):
        Job.from_megatron_args(BASE + ["--tensor-model-parallel-size", "4"], world_size=6)
    with pytest.raises(ValueError, match="--seq-length is needed"):
        Job.from_megatron_args(BASE[:6] + BASE[8:], world_size=1)


def test_what_megatron_lm_itself_ignores_or_defaults_is_read_as_it_does():
    plain = [a for a in BASE if a not in ("--tokenizer-type", "NullTokenizer", "--vocab-size",
                                          "1000")]
    # pretrain_gpt.py's own default tokenizer (its pretrain call's args_defaults)
    assert Job.from_megatron_args(plain, world_size=1).model.vocab_size == 50257
    # a list-valued argument given its default as a list of one
    job = Job.from_megatron_args(BASE + ["--moe-router-load-balancing-type", "aux_loss"],
                                 world_size=1)
    assert job == Job.from_megatron_args(BASE, world_size=1)
    # fp32 softmax flags change nothing where no s x s map is kept, or where the fused
    # masked-softmax kernel runs (16 bits in and out), and are refused where PyTorch's
    # softmax keeps an fp32 map
    fp32 = ["--attention-softmax-in-fp32", "--apply-query-key-layer-scaling"]
    assert Job.from_megatron_args(BASE + fp32, world_size=1) == job
    unfused = ["--attention-backend", "unfused"]
    assert Job.from_megatron_args(BASE + unfused + fp32, world_size=1) == \
        Job.from_megatron_args(BASE + unfused, world_size=1)
    with pytest.raises(ValueError, match="--apply-query-key-layer-scaling True: refused"):
        Job.from_megatron_args(BASE + unfused + fp32 + ["--no-masked-softmax-fusion"],
                               world_size=1)
    # an expert tensor-parallel size of a dense model is unused, as in Megatron-LM
    assert Job.from_megatron_args(BASE + ["--expert-tensor-parallel-size", "4"],
                                  world_size=1) == job
    # the test harness's environment
    assert Job.from_megatron_args(BASE, world_size=1, env={"N_REPEAT": "5",
                                                           "SKIP_PYTEST": "1"}) == job


@pytest.mark.parametrize("impl, s, b, t, runs", [
    ("transformer_engine", 512, 2, 1, True),
    ("transformer_engine", 8192, 2, 1, True),     # TE's kernel: s below 16384
    ("transformer_engine", 16384, 2, 1, False),
    ("transformer_engine", 516, 2, 1, False),     # s not a multiple of 8
    ("local", 4096, 2, 1, True),
    ("local", 8192, 2, 1, False),                 # Megatron-LM's kernel: s up to 4096
    ("local", 512, 1, 4, False),                  # one map per rank: b*a/t not a multiple of 4
    ("local", 64, 1, 1, False),                   # 4 maps, 2 rows of 64 per warp: 8 per block
])
def test_the_fused_softmax_runs_where_its_kernel_takes_the_map(impl, s, b, t, runs):
    from actmem.run.job.megatron_attention import softmax_in_16_bits
    a = {"seq_length": s, "micro_batch_size": b, "num_attention_heads": 4,
         "tensor_model_parallel_size": t, "bf16": True, "fp16": False,
         "masked_softmax_fusion": True, "transformer_impl": impl, "attention_backend": "unfused",
         "use_flash_attn": False}
    assert softmax_in_16_bits(a, {}) is runs


def test_megatron_lms_local_attention_keeps_its_scores_buffer():
    # megatron/core/utils.py GlobalMemoryBuffer: the baddbmm output, b*a/t maps of s x s,
    # allocated once and kept; the scores are written into it, not into a new tensor
    job = Job.from_megatron_args(BASE + ["--transformer-impl", "local"], world_size=1)
    assert job.global_memory_buffer and not job.transformer_engine
    scores = 2 * 4 * 512 * 512 * 2                    # b*a maps of s*s, bf16
    kept, plain = (training_memory(job.with_(global_memory_buffer=kept, reserve=0)).stages[0]
                   for kept in (True, False))
    start = [stage.timeline.events[0].by_category["workspace"] for stage in (kept, plain)]
    assert start[0] - start[1] == scores
    label = "forward of micro-batch 0: attention scores beside the softmax"
    at_scores = [next(e for e in stage.timeline.events if e.label == label)
                 for stage in (kept, plain)]
    assert at_scores[0].total == at_scores[1].total   # the same bytes, held as a workspace
    sequence = Job.from_megatron_args(BASE + ["--transformer-impl", "local", "--attention-backend",
                                              "flash", "--use-flash-attn"], world_size=1)
    assert sequence.model.flash_attention   # no map: the buffer holds no scores


def test_an_ngc_container_before_26_03_gives_blackwell_the_small_cublas_workspace():
    old = Job.from_megatron_args(BASE, world_size=1, gpu="GB200",
                                 env={"NVIDIA_PYTORCH_VERSION": "25.09"})
    assert old.cublas_workspace_config == ":4096:2:16:8"
    for gpu, env in (("GB200", {"NVIDIA_PYTORCH_VERSION": "26.06"}), ("GB200", {}),
                     ("H100 80GB SXM", {"NVIDIA_PYTORCH_VERSION": "25.09"})):
        assert Job.from_megatron_args(BASE, world_size=1, gpu=gpu,
                                      env=env).cublas_workspace_config is None
    with pytest.raises(ValueError, match=r"NVIDIA_PYTORCH_VERSION='25.9.1': NGC's container"):
        Job.from_megatron_args(BASE, world_size=1, gpu="GB200",
                               env={"NVIDIA_PYTORCH_VERSION": "25.9.1"})


def test_the_interleaved_schedules_group_size_is_read_from_the_launch():
    # gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap's shape: p=4, v=4, m=5, N=5
    launch = list(BASE) + ["--pipeline-model-parallel-size", "4",
                           "--num-layers-per-virtual-pipeline-stage", "1"]
    launch[1] = "16"                                          # --num-layers
    launch[launch.index("--global-batch-size") + 1] = "10"   # m = 10 / (b=2 * d=1)
    with pytest.raises(ValueError, match="m=5"):
        Job.from_megatron_args(launch, world_size=4)
    job = Job.from_megatron_args(
        launch + ["--microbatch-group-size-per-virtual-pipeline-stage", "5"], world_size=4)
    assert (job.m, job.v, job.microbatch_group_size_per_vp_stage) == (5, 4, 5)
    plan = actmem.simulate_schedule("interleaved", 4, 5, 4, microbatch_group_size=5)
    stage = training_memory(job).stages[0]
    assert stage.layer_activations == plan.peak_in_flight(0) * training_memory(
        job.with_(m=4, microbatch_group_size_per_vp_stage=None)).stages[0].layer_activations \
        // actmem.simulate_schedule("interleaved", 4, 4, 4).peak_in_flight(0)


def test_distributed_optimizer_instances_shard_over_part_of_the_data_parallel_group():
    # parallel_state.py: intra_partial_data_parallel_size = d*cp // N
    from actmem import model_states
    model = ModelConfig(s=512, b=2, h=256, a=4, L=4, vocab_size=1000)
    one, two = (model_states(model, d=4, accounting="megatron", distributed_optimizer=True,
                             num_distributed_optimizer_instances=n) for n in (1, 2))
    assert (two.weights, two.gradients) == (one.weights, one.gradients)
    assert two.optimizer == -(-12 * one.parameters // 2)
    assert one.optimizer == -(-12 * one.parameters // 4)
    with pytest.raises(ValueError, match="num_distributed_optimizer_instances=2 replicates"):
        model_states(model, d=4, accounting="megatron", num_distributed_optimizer_instances=2)
    with pytest.raises(ValueError,
                       match="num_distributed_optimizer_instances=3 must divide d\\*cp=4"):
        model_states(model, d=4, accounting="megatron", distributed_optimizer=True,
                     num_distributed_optimizer_instances=3)
    job = Job.from_megatron_args(BASE + ["--use-distributed-optimizer",
                                         "--num-distributed-optimizer-instances", "2"],
                                 world_size=4)
    assert job.num_distributed_optimizer_instances == 2
    assert training_memory(job).stages[0].optimizer == two.optimizer
