"""Megatron-LM's --fp16: bf16's activations, a 16-bit gradient buffer and the
optimizer step's fp32 copies of it (actmem.run.model_states.states.sixteen_bit_gradients),
each number derived by hand from the code it follows."""

import pytest

from actmem import MOE_PRESETS, Job, ModelConfig, model_states, training_memory

GPT = ModelConfig(s=512, b=2, h=256, a=4, L=4, vocab_size=1000)
BASE = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
        "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000"]


def _event(stage, label):
    return next(e for e in stage.timeline.events if e.label == label)


def test_fp16_keeps_bf16s_activations_and_half_its_gradient_buffer():
    bf16, fp16 = (training_memory(GPT, precision=p).stages[0] for p in ("bf16", "fp16"))
    params = bf16.gradients // 4   # Megatron-LM's fp32 buffer: 4 bytes per parameter
    for part in ("weights", "optimizer", "layer_activations", "embedding_activations",
                 "output_activations"):
        assert getattr(fp16, part) == getattr(bf16, part), part
    # the buffer in fp16 (2 bytes) and, at the step, main_grad.float(): 4 bytes more
    assert fp16.gradients == 2 * params + 4 * params
    first = _event(fp16, "before the step")
    assert first.total == _event(bf16, "before the step").total - 2 * params
    step = _event(fp16, "optimizer step")
    assert dict(zip(("weights", "gradients", "optimizer"), step.bytes)) == {
        "weights": 2 * params, "gradients": 6 * params, "optimizer": 12 * params}
    # the forward and backward moments hold 2 bytes per parameter less than bf16's
    assert fp16.peak == max(bf16.peak - 2 * params, step.total)


def test_the_distributed_optimizer_copies_its_shard_of_the_gradients():
    d = 4
    bf16, fp16 = (training_memory(GPT, d=d, distributed_optimizer=True, precision=p).stages[0]
                  for p in ("bf16", "fp16"))
    params = bf16.gradients // 4
    assert fp16.gradients == 2 * params + -(-4 * params // d)   # shard_model_grad.float()
    assert fp16.optimizer == bf16.optimizer == -(-12 * params // d)


def test_experts_copy_their_shard_over_the_expert_data_parallel_group():
    model = MOE_PRESETS["mixtral-8x7b"].with_(L=2, s=256, b=1)
    t, d, ep = 1, 8, 4   # e_d = t*d/(ep*etp) = 8/4 = 2
    bf16, fp16 = (training_memory(model, t=t, d=d, ep=ep, distributed_optimizer=True,
                                  precision=p, reserve=0) for p in ("bf16", "fp16"))
    states = model_states(model, t=t, d=d, ep=ep, accounting="megatron",
                          distributed_optimizer=True, stage=0)
    experts, dense = states.expert_parameters, states.parameters - states.expert_parameters
    assert fp16.stages[0].gradients == \
        2 * states.parameters + -(-4 * dense // d) + -(-4 * experts // 2)
    assert bf16.stages[0].gradients == 4 * states.parameters


def test_megatron_lms_flags_choose_the_gradient_buffer():
    def job(*flags):
        return Job.from_megatron_args(BASE + list(flags), world_size=4)
    fp16 = job("--fp16")
    assert (fp16.precision, fp16.accumulate_allreduce_grads_in_fp32) == ("fp16", None)
    in_fp32 = job("--fp16", "--accumulate-allreduce-grads-in-fp32")
    assert in_fp32.accumulate_allreduce_grads_in_fp32 is True
    bf16 = job("--bf16")
    assert bf16.accumulate_allreduce_grads_in_fp32 is None
    assert training_memory(in_fp32).stages[0].gradients == \
        training_memory(bf16).stages[0].gradients   # an fp32 buffer makes no copy
    reduced = job("--bf16", "--grad-reduce-in-bf16")
    assert reduced.accumulate_allreduce_grads_in_fp32 is False
    assert training_memory(reduced).stages[0].gradients == \
        training_memory(fp16).stages[0].gradients


def test_fp16_runs_where_bf16_does_not():
    with pytest.raises(ValueError, match="V100 16GB"):
        training_memory(GPT, gpu_memory="V100 16GB")
    assert training_memory(GPT, precision="fp16", gpu_memory="V100 16GB").fits


@pytest.mark.parametrize("options, named", [
    (dict(precision="fp32"), "precision='fp32'"),
    (dict(accounting="zero"), "accounting='zero'"),
    (dict(precision="fp16", accounting="zero"), "accounting='zero'"),
])
def test_the_gradient_dtype_is_refused_where_it_chooses_nothing(options, named):
    with pytest.raises(ValueError, match=f"accumulate_allreduce_grads_in_fp32=False .*{named}"):
        training_memory(GPT, accumulate_allreduce_grads_in_fp32=False, **options)
    with pytest.raises(TypeError, match="accumulate_allreduce_grads_in_fp32"):
        training_memory(GPT, accumulate_allreduce_grads_in_fp32="no")
