"""Squared ReLU (Megatron-LM's --squared-relu: torch.pow(F.relu(x), 2)) in dense and
MoE layers: the ledger's rows by hand, the reference layers measured on CPU, the
parameters and Megatron-LM's launch."""

import os

import pytest

from actmem import Job, LayerConfig, ModelConfig, activation_memory, parameter_count
from actmem.layer.dimensions import default_ffn_hidden_size

SMALL = dict(s=32, b=2, h=64, a=4)
MOE = dict(num_experts=4, moe_ffn_hidden_size=96, moe_router_topk=2,
           moe_shared_expert_intermediate_size=64)


def test_the_mlp_keeps_the_relu_output_and_fc2s_input():
    gelu, relu2 = (activation_memory(**SMALL, activation=a) for a in ("gelu", "squared_relu"))
    assert default_ffn_hidden_size(64, "squared_relu") == 4 * 64   # ungated: 4h
    rows = {r.key: r.bytes for r in relu2.rows}
    sbf = 32 * 2 * 4 * 64
    assert rows["relu_output"] == rows["fc2_input"] == 2 * sbf   # R, read by relu and pow
    assert "gelu_input" not in rows
    assert relu2.total == gelu.total   # the same bytes as GeLU, another tensor


def test_a_squared_relu_model_has_gelus_parameters():
    gelu, relu2 = (ModelConfig(**SMALL, L=2, vocab_size=512, activation=a, bias=False, **MOE)
                   for a in ("gelu", "squared_relu"))
    assert parameter_count(relu2) == parameter_count(gelu)   # fc1 h x f, fc2 f x h
    assert parameter_count(relu2).experts == 4 * 2 * 64 * 96


@pytest.mark.parametrize("moe", [False, True])
def test_the_reference_layers_save_what_the_ledger_counts(moe):
    if not os.environ.get("CI"):   # CI has torch: there a missing torch fails
        pytest.importorskip("torch", reason="torch is not installed")
    from actmem.measure.compare import compare
    from actmem.measure.moe import measure_moe
    from actmem.measure.run import measure_layer
    config = LayerConfig(**SMALL, activation="squared_relu", **(MOE if moe else {}))
    c = compare((measure_moe if moe else measure_layer)(config))
    assert all(r.exact for r in c.rows), [r for r in c.rows if not r.exact]
    assert c.measured_rows_total == c.ledger_total == activation_memory(**vars(config)).total
    assert len(c.extras) == 4   # the two LayerNorms' mean and rstd, as every variant


BASE = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
        "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
        "--bf16"]


def test_megatron_lms_flag_needs_the_unfused_bias():
    job = Job.from_megatron_args(BASE + ["--squared-relu", "--no-bias-gelu-fusion"],
                                 world_size=4)
    assert (job.model.activation, job.model.layer(1).f) == ("squared_relu", 1024)
    with pytest.raises(ValueError, match="--squared-relu with --bias-gelu-fusion .*"
                                         "add --no-bias-gelu-fusion"):
        Job.from_megatron_args(BASE + ["--squared-relu"], world_size=4)
    with pytest.raises(ValueError, match="--use-fused-weighted-squared-relu True: refused"):
        Job.from_megatron_args(BASE + ["--squared-relu", "--no-bias-gelu-fusion",
                                       "--use-fused-weighted-squared-relu"], world_size=4)
