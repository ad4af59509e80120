"""training_memory under PyTorch's newer schedules (issue 22 item 5): the
loss sits on the V's last chunk (stage 0), and a split backward keeps the
rows its weight-gradient step reads (actmem.run.schedule.split_backward)."""

import pytest

import actmem
from actmem import PRESETS, training_memory
from actmem.run.schedule.split_backward import layer_weight_rows, weight_gradient_bytes

L7 = PRESETS["llama2-7b"]   # 32 layers; t=2, p=4: 8 layers per stage
RUN = dict(t=2, p=4, m=8)


def test_the_v_puts_the_loss_on_stage_0():
    for schedule in ("zbv", "dualpipev"):
        r = training_memory(L7, schedule=schedule, v=2, **RUN)
        outputs = [s.output_activations for s in r.stages]
        assert outputs[0] > 0 and outputs[1:] == [0, 0, 0], schedule
        losses = [[e.label for e in s.timeline.events if e.label.startswith("loss")]
                  for s in r.stages]
        assert losses[0] and not any(losses[1:]), schedule
    looped = training_memory(L7, schedule="looped-bfs", v=2, **RUN)
    assert [s.output_activations > 0 for s in looped.stages] == [False] * 3 + [True]


def test_weight_rows_are_the_linear_inputs_of_the_ledger():
    """LLaMA-2-7B at t=2 (s=4096, b=1, h=4096, f=11008): the QKV and fc1
    inputs are whole (2sbh each, no sequence parallelism), the projection and
    fc2 inputs split by t (2sbh/t, 2sbf/t)."""
    s, b, h, f, t = 4096, 1, 4096, 11008, 2
    assert layer_weight_rows(L7, t, False) == 2 * s * b * h * 2 + 2 * s * b * h // t \
        + 2 * s * b * f // t
    layer = actmem.activation_memory(**vars(L7.layer(t)))
    assert layer_weight_rows(L7, t, False) == weight_gradient_bytes(layer)   # bf16 rows


def test_a_split_backward_holds_between_1f1b_and_whole_passes_until_w():
    """PyTorch's interleaved zero bubble at v=1 (interleaved-zb: the paper's
    ZB-1p, not its handcrafted ZB-H1): every stage counts p passes until their
    W (notebook 06), but from I to W a pass keeps only W's rows; so the last
    stage holds more than under 1F1B and less than p whole passes."""
    one = training_memory(L7, schedule="1f1b", **RUN).stages
    zb = training_memory(L7, schedule="interleaved-zb", **RUN).stages
    plan = actmem.simulate_schedule("interleaved-zb", 4, 8)
    whole = [plan.peak_in_flight(i) * one[0].layer_activations // 4 for i in range(4)]
    assert zb[0].layer_activations == one[0].layer_activations == whole[0]
    for i in (1, 2, 3):
        assert one[i].layer_activations < zb[i].layer_activations < whole[i], i


@pytest.mark.parametrize("model, kwargs, message", [
    ("llama2-7b", dict(schedule="zbv", v=2, decoder_last_pipeline_num_layers=2),
     r"^schedule='zbv' puts the first and the last layers on stage 0"),
    ("gpt2-large", dict(schedule="dualpipev", v=3),   # 36 layers: p*v = 12 divides L
     r"^v=3: schedule 'dualpipev' needs exactly v=2"),
    ("llama2-7b", dict(schedule="zbv", v=2, order="megatron"),
     r"^order='megatron': schedule 'zbv' exists only in PyTorch"),
])
def test_bad_combinations_name_the_argument(model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        training_memory(PRESETS[model], **{**RUN, **kwargs})
