"""Megatron-LM's Muon optimizer (actmem/run/model_states/muon.py), on the
model of Megatron-LM's own Muon tests
(tests/functional_tests/test_cases/moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_muon
and ..._dist_optimizer at d98e8a64): 12 layers, h = 512, 8 heads, s = 1024,
learned positions, GPT-2's vocabulary padded to 50304, tied embeddings, no
biases, 8 GeLU experts of 1024 each (top 2), ep = 8 on 8 GPUs."""

import pytest

import actmem
from actmem import Job, ModelConfig
from actmem.run.model_states.muon import newton_schulz_transient

MODEL = ModelConfig(s=1024, b=4, h=512, a=8, L=12, vocab_size=50257, positions="learned",
                    max_positions=1024, bias=False, num_experts=8, moe_ffn_hidden_size=1024,
                    moe_router_topk=2, activation="gelu", flash_attention=True)
JOB = Job(MODEL, t=1, d=8, ep=8, m=1, optimizer="muon")
# Muon's matrices on one GPU, by hand: the position table, then per layer Q/K/V
# (3h x h), the output projection (h x h) and the router (E x h); then the one
# local expert's fc1 (f_e x h) and fc2 (h x f_e) of each layer.
DENSE_MATRICES = 1024 * 512 + 12 * (1536 * 512 + 512 * 512 + 8 * 512)
EXPERT_MATRICES = 12 * (1024 * 512 + 512 * 1024)


def test_muon_keeps_8_bytes_per_matrix_parameter_and_adams_12_for_the_rest():
    stage = actmem.training_memory(JOB).stages[0]
    parameters = stage.weights // 2
    muon = DENSE_MATRICES + EXPERT_MATRICES
    assert (DENSE_MATRICES, EXPERT_MATRICES) == (13_156_352, 12_582_912)
    assert stage.optimizer == 8 * muon + 12 * (parameters - muon)
    adam = actmem.training_memory(JOB.with_(optimizer="adam")).stages[0]
    assert adam.optimizer - stage.optimizer == 4 * muon
    assert (adam.weights, adam.gradients) == (stage.weights, stage.gradients)


def test_the_step_holds_the_largest_newton_schulz_peak_and_the_previous_result():
    # The step's first matrices: the position table, then Q/K/V (3h x h), split into
    # Q, K and V (h x h each). While V is orthogonalized the position table's fp32
    # result, the three blocks' fp32 copies and Q's and K's results are alive, and
    # V's own peak is max(12F, 4F + 4 * 512^2) = 12F. The same bytes were measured on
    # CPU (a TorchDispatchMode counting live storages) running Megatron-LM's
    # TensorParallelMuon with emerging_optimizers 0.3.0 on these four matrices:
    # 10,485,760 bytes.
    block = 512 * 512
    expected = 4 * 1024 * 512 + 4 * 3 * block + 2 * 4 * block + 12 * block
    assert expected == 10_485_760
    timeline = actmem.training_memory(JOB).stages[0].timeline
    step, before = timeline.events[-1], timeline.events[-2]
    assert step.label == "optimizer step"
    assert step.by_category["transient"] == expected
    assert step.total - before.total == expected


@pytest.mark.parametrize("matrices, q_rows, measured", [
    # measured as above: GQA Q/K/V (32 heads, 8 groups, d = 128, h = 4096) alone, then
    # with the projection, SwiGLU's fc1 and fc2 after it; two layers' dense matrices
    # of the CI model without the split; two layers' experts.
    ([("qkv", 6144, 4096)], 4096, 301_989_888),
    ([("qkv", 6144, 4096), ("matrix", 4096, 4096), ("matrix", 22016, 4096),
      ("matrix", 4096, 11008)], 4096, 1_149_239_296),
    (2 * [("matrix", 1536, 512), ("matrix", 512, 512), ("matrix", 8, 512)], 512, 9_453_568),
    (2 * [("matrix", 1024, 512), ("matrix", 512, 1024)], 512, 8_388_608),
])
def test_the_transient_is_what_the_real_step_allocated(matrices, q_rows, measured):
    assert newton_schulz_transient(matrices, q_rows) == measured


def test_the_states_move_as_megatron_lms_ci_measured():
    # mem-allocated-bytes (the states and what stays between steps), median of the
    # golden values on the last rank, H100: Muon 1.0967e9, Adam with the distributed
    # optimizer 7.8839e8 (golden_values_dev_dgx_h100.json of the two tests).
    measured = 1.0967e9 - 7.8839e8
    muon = actmem.training_memory(JOB).stages[0]
    adam = actmem.training_memory(JOB.with_(optimizer="adam", distributed_optimizer=True))
    modelled = (muon.weights + muon.gradients + muon.optimizer) - (
        adam.stages[0].weights + adam.stages[0].gradients + adam.stages[0].optimizer)
    assert modelled == pytest.approx(measured, rel=0.01)   # 305.9 MB against 308.3 MB


@pytest.mark.parametrize("changes, named", [
    (dict(t=2, ep=4), "t=2"),
    (dict(distributed_optimizer=True), "distributed_optimizer=True"),
    (dict(precision="fp16"), "precision='fp16'"),
    (dict(accounting="zero"), "accounting='zero'"),
])
def test_what_muon_is_not_modelled_with_is_refused_by_name(changes, named):
    with pytest.raises(ValueError, match=f"optimizer='muon' with .*{named}"):
        JOB.with_(**changes)


def test_an_optimizer_actmem_does_not_model_is_refused():
    with pytest.raises(ValueError, match="optimizer must be one of 'adam', 'muon', got 'sgd'"):
        JOB.with_(optimizer="sgd")


LAUNCH = ("--num-layers 12 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
          "--max-position-embeddings 1024 --micro-batch-size 4 --global-batch-size 32 "
          "--disable-bias-linear --bf16 --vocab-size 50257 --tokenizer-type NullTokenizer "
          "--num-experts 8 --moe-ffn-hidden-size 1024 --moe-router-topk 2 "
          "--expert-model-parallel-size 8 --optimizer muon")


def test_a_muon_launch_is_read_as_launched():
    job = Job.from_megatron_args(LAUNCH, world_size=8)
    assert (job.optimizer, job.distributed_optimizer, job.ep) == ("muon", False, 8)


@pytest.mark.parametrize("flag, named", [
    ("--use-distributed-optimizer", "--optimizer muon with --use-distributed-optimizer"),
    ("--muon-nesterov", "--muon-nesterov True: refused"),
    ("--muon-scalar-optimizer lion", "--muon-scalar-optimizer lion: refused"),
    ("--muon-fp32-matmul-prec high", "--muon-fp32-matmul-prec high: refused"),
])
def test_muon_options_actmem_does_not_model_are_refused_by_flag(flag, named):
    with pytest.raises(ValueError, match=named):
        Job.from_megatron_args(f"{LAUNCH} {flag}", world_size=8)


def test_the_command_line_takes_the_optimizer(capsys):
    import json

    from actmem.views.cli import main
    assert main(["train", "--preset", "llama2-7b", "--p", "4", "--d", "8", "--m", "8",
                 "--optimizer", "muon", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    muon = actmem.training_memory(actmem.PRESETS["llama2-7b"], p=4, d=8, m=8, optimizer="muon")
    adam = actmem.training_memory(actmem.PRESETS["llama2-7b"], p=4, d=8, m=8)
    # stage 1 holds 8 layers and no embedding: 8 x 202,375,168 matrix parameters of
    # LLaMA-2-7B (4 x 4096^2 attention + 3 x 4096 x 11008 MLP), 4 bytes fewer each
    assert [s["optimizer"] for s in data["stages"]] == [s.optimizer for s in muon.stages]
    assert adam.stages[1].optimizer - muon.stages[1].optimizer == 4 * 8 * (
        4 * 4096**2 + 3 * 4096 * 11008)
