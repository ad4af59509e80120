"""The saved-tensor recorder and the facts about PyTorch it relies on.

Skipped without torch unless CI is set (then torch must be there).
"""

import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import actmem  # noqa: E402
from actmem.measure import Recorder, ReferenceLayer, named  # noqa: E402
from actmem.measure.launch import on_ranks  # noqa: E402


def record(fn, *args, params=()):
    with Recorder(params) as rec:
        out = fn(*args)
    return rec.storages(out)


def test_storage_saved_twice_is_counted_once():
    x = torch.randn(8, 8, requires_grad=True)
    saved = record(lambda x: (x.sin() + x.cos()).sum(), x)
    assert len(saved) == 1 and saved[0].nbytes == 8 * 8 * 4
    assert sorted(saved[0].saved_by) == ["CosBackward0.self", "SinBackward0.self"]


def test_bytes_are_the_whole_storage_of_a_view():
    x = torch.randn(10, 4, requires_grad=True)
    saved = record(lambda x: x[:2].sin(), x)
    assert saved[0].shape == (2, 4) and saved[0].nbytes == 10 * 4 * 4


def test_parameters_are_excluded_and_names_attribute_rows():
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(5, 4, requires_grad=True)
    saved = record(lambda x: lin(named("fc1_input", x)), x, params=lin.parameters())
    assert [(st.key, st.nbytes) for st in saved] == [("fc1_input", 5 * 4 * 4)]


def test_dropout_on_cpu_saves_noise_in_the_input_dtype():
    x = torch.randn(4, 16, dtype=torch.bfloat16, requires_grad=True)
    stock = record(lambda x: F.dropout(x, 0.1, training=True), x)
    assert [(st.dtype, st.nbytes) for st in stock] == [("bfloat16", 4 * 16 * 2)]
    native = record(lambda x: torch.native_dropout(x, 0.1, True)[0], x)
    assert [(st.dtype, st.nbytes) for st in native] == [("bool", 4 * 16)]


def test_layernorm_on_cpu_saves_bfloat16_statistics():
    x = torch.randn(2, 3, 8, dtype=torch.bfloat16, requires_grad=True)
    saved = record(lambda x: F.layer_norm(x, (8,)), x)
    assert [(st.dtype, st.shape, st.nbytes) for st in saved] == [
        ("bfloat16", (2, 3, 8), 96), ("bfloat16", (2, 3, 1), 12),
        ("bfloat16", (2, 3, 1), 12)]


def test_layer_refuses_what_it_does_not_model():
    with pytest.raises(ValueError, match="sequence_parallel"):
        ReferenceLayer(actmem.LayerConfig(8, 1, 16, 2, sequence_parallel=True))
    with pytest.raises(ValueError, match="mask"):
        ReferenceLayer(actmem.LayerConfig(8, 1, 16, 2), mask="float")
    with pytest.raises(ValueError, match="rank"):
        ReferenceLayer(actmem.LayerConfig(8, 1, 16, 2), rank=1)
    with pytest.raises(ValueError, match=r"^t must be a positive integer \(>= 1\), got 0$"):
        on_ranks(print, 0)


@pytest.mark.parametrize("t", [2.0, "2", True, None])
def test_on_ranks_refuses_a_non_integer_t(t):
    with pytest.raises(TypeError, match=r"^t must be a positive integer, got "):
        on_ranks(print, t)


def test_saved_storage_records_torch_element_size():
    x = torch.randn(4, 4, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.rand(4, 4) > 0.5
    saved = record(lambda x: (x * mask).sum(), x)
    assert {(st.dtype, st.itemsize, st.nbytes) for st in saved} == {
        ("bool", 1, 16)}


def test_recorder_only_sees_its_with_block():
    x = torch.randn(3, requires_grad=True)
    with Recorder() as rec:
        pass
    y = x.sin()
    assert rec.saved == {} and y.grad_fn is not None
