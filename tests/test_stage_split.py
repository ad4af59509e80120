"""Uneven pipeline stages: Megatron-LM's rules, and what they change per GPU."""

import pytest

from actmem import PRESETS, model_states, split_layers, training_memory

L7 = PRESETS["llama2-7b"]


def test_megatron_first_and_last_stage_options():
    # 126 layers on 16 stages (p does not divide L): 7 + 14 x 8 + 7
    split = split_layers(126, 16, decoder_first_pipeline_num_layers=7,
                         decoder_last_pipeline_num_layers=7)
    assert [n for (n,) in split] == [7] + [8] * 14 + [7]
    assert split_layers(10, 2, decoder_last_pipeline_num_layers=3) == ((7,), (3,))
    with pytest.raises(ValueError, match="share the remaining"):
        split_layers(126, 16, decoder_first_pipeline_num_layers=5)  # 121 on 15


def test_embedding_and_loss_count_as_layers():
    assert split_layers(30, 4, account_for_embedding_in_pipeline_split=True,
                        account_for_loss_in_pipeline_split=True) == ((7,), (8,), (8,), (7,))
    # with chunks, the embedding takes its layer from the first chunk
    assert split_layers(30, 4, 2, account_for_embedding_in_pipeline_split=True,
                        account_for_loss_in_pipeline_split=True)[0] == (3, 4)
    with pytest.raises(ValueError, match=r"other 1 stage\(s\) must share the remaining 0"):
        split_layers(8, 3, decoder_first_pipeline_num_layers=4,
                     decoder_last_pipeline_num_layers=4)   # Megatron-LM: no empty middle
    with pytest.raises(ValueError, match=r"L=32 \+ 1 \(embedding\) = 33"):
        split_layers(32, 4, account_for_embedding_in_pipeline_split=True)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(stage_layers=(1, 2)), ValueError, "sum to L=8"),
    (dict(stage_layers="44"), TypeError, "stage_layers must be a tuple"),
    (dict(stage_layers=(4, 4.0)), TypeError, r"stage_layers\[1\]"),
    (dict(stage_layers=(9, -1)), ValueError, r"stage_layers\[1\] must be an int >= 0"),
    (dict(stage_layers=(4, 4), account_for_loss_in_pipeline_split=True), ValueError,
     "cannot be combined"),
    (dict(decoder_first_pipeline_num_layers=2, account_for_loss_in_pipeline_split=True),
     ValueError, "cannot be combined"),
    (dict(decoder_last_pipeline_num_layers=0), ValueError,
     "decoder_last_pipeline_num_layers=0 must be an int >= 1"),
    (dict(account_for_loss_in_pipeline_split=1), TypeError,
     "account_for_loss_in_pipeline_split must be True or False"),
])
def test_bad_splits_name_the_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        split_layers(8, 2, **kwargs)


def test_uneven_stages_move_parameters_and_activations():
    even = training_memory(L7, p=4, m=8)
    # one layer moved from the last stage (output layer, logits) to the first
    uneven = training_memory(L7, p=4, m=8, stage_layers=(9, 8, 8, 7))
    layer_params = (even.stages[1].weights // 2) // 8
    assert uneven.stages[0].weights - even.stages[0].weights == 2 * layer_params
    assert even.stages[3].weights - uneven.stages[3].weights == 2 * layer_params
    per_pass = even.stages[0].layer_activations // 4 // 8  # stage 0 holds 4 passes of 8
    assert uneven.stages[0].layer_activations == 4 * 9 * per_pass
    assert uneven.stages[3].layer_activations == 1 * 7 * per_pass
    states = model_states(L7, p=4, accounting="megatron", stage_layers=(9, 8, 8, 7))
    assert states.stage == 0  # the most parameters: 9 layers and the embedding
    with pytest.raises(ValueError, match="p=5 must divide L=32 .*; or split unevenly: "
                       "decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers "
                       "or stage_layers"):
        training_memory(L7, p=5)
    assert len(training_memory(L7.with_(L=126), p=16, m=16, decoder_first_pipeline_num_layers=7,
                               decoder_last_pipeline_num_layers=7).stages) == 16
