"""The split backward (I and W) in bytes: which ledger rows W still reads,
what each stage holds after each operation, and the timeline's events."""

from fractions import Fraction

import pytest

import actmem
from actmem.run.schedule.split_backward import weight_gradient_bytes, weight_gradient_rows
from actmem.run.moments.timeline import LayerMoments, Pass, stage_timeline

LAYER = actmem.activation_memory(s=2048, b=1, h=4096, a=32, t=8)
SBH = 2048 * 4096


def test_w_reads_the_linear_inputs_only():
    rows = weight_gradient_rows(LAYER)
    assert [r.key for r in rows] == ["qkv_input", "proj_input", "fc1_input", "fc2_input"]
    assert all("dW = X^T dY" in r.needed_for for r in rows)
    assert Fraction(weight_gradient_bytes(LAYER), SBH) == 2 + Fraction(2, 8) + 2 + 1
    full = actmem.activation_memory(2048, 1, 4096, 32, 8, recompute="full")
    assert weight_gradient_bytes(full) == weight_gradient_bytes(LAYER)  # rebuilt by I
    flash = actmem.activation_memory(2048, 1, 4096, 32, 8, flash_attention=True)
    assert weight_gradient_bytes(flash) == weight_gradient_bytes(LAYER)
    with pytest.raises(TypeError, match="memory must be an ActivationMemory"):
        weight_gradient_bytes(5)


def by_hand(s, i, full, pending):
    """Bytes after each op: forwards hold ``full``, I leaves ``pending`` until W."""
    held, waiting, out = 0, 0, []
    for op in s.ops[i]:
        held += {"F": 1, "W": 0}.get(op.kind, -1)
        waiting += {"I": 1, "W": -1}.get(op.kind, 0)
        out.append(held * full + waiting * pending)
    return out


@pytest.mark.parametrize("schedule, v", [("interleaved-zb", 1), ("interleaved-zb", 2),
                                         ("zbv", 2), ("dualpipev", 2), ("1f1b", 1)])
def test_held_bytes_follow_the_rows(schedule, v):
    s = actmem.simulate_schedule(schedule, 4, 8, v, order="pytorch")
    full, pending = LAYER.total, weight_gradient_bytes(LAYER)
    for i in range(4):
        held = s.held_parts(i, [{"layers": full}] * v, [{"layers": pending}] * v)
        assert [d["layers"] for d in held] == by_hand(s, i, full, pending)
        # the ledger's I/W split holds less than keeping the pass until W
        assert max(d["layers"] for d in held) <= s.peak_in_flight(i) * full
        assert s.peak_parts(i, [{"layers": full}] * v) == {
            "layers": s.peak_in_flight(i) * full}
    with pytest.raises(ValueError, match=r"pending needs a list of one dict per model chunk \(v="):
        s.held_parts(0, [{"layers": full}] * v, [{}] * (v + 1))


def test_zero_bubble_1p_memory_and_bubble():
    # PyTorch's interleaved zero bubble at v=1 (the paper's ZB-1p, as its
    # docstring says; with T_F = T_B = T_W the same bubble as the handcrafted
    # ZB-H1): the bubble falls from (p-1)/m to a third of it; every stage then
    # counts p passes until their W, but after I only W's rows.
    zb = actmem.simulate_schedule("interleaved-zb", 4, 8, 1)
    one = actmem.simulate_schedule("1f1b", 4, 8)
    assert (zb.bubble_fraction(), one.bubble_fraction()) == (Fraction(1, 8), Fraction(3, 8))
    assert [zb.peak_in_flight(i) for i in range(4)] == [4, 4, 4, 4]
    full, pending = LAYER.total, weight_gradient_bytes(LAYER)
    peaks = [max(sum(d.values()) for d in zb.held_parts(i, [{"x": full}], [{"x": pending}]))
             for i in range(4)]
    assert peaks == [4 * full, 3 * full + pending, 2 * full + 2 * pending,
                     full + 3 * pending]


def moments(weight_rows):
    return LayerMoments(kept=100, full=100, to_softmax=0, scores=0, checkpoint=0,
                        recompute="none", group=1, weight_rows=weight_rows)


@pytest.mark.parametrize("weight_rows, after_i", [(30, 2 * 30), (None, 2 * 100)])
def test_timeline_i_leaves_w_rows_and_w_frees_them(weight_rows, after_i):
    plan = actmem.simulate_schedule("interleaved-zb", 2, 2, 1)
    states = {"weights": 0, "gradients": 0, "optimizer": 0}
    line = stage_timeline(plan, 1, states=states, persistent_gradients=True, workspace=0,
                          passes=[Pass()], layers=[2], layer=moments(weight_rows),
                          loss={"forward": 0, "backward": 0, "saved": 0}, mask=0)
    after = {e.op: e.by_category["activations"] for e in line.events if e.moment == "after"}
    assert str(plan.ops[1][1]) == "I0" and after["F0"] == 2 * 100
    assert after["I0"] == after_i
    assert after[str(plan.ops[1][-1])] == 0
    assert "after the weight-gradient step of micro-batch 0" in [e.label for e in line.events]


@pytest.mark.parametrize("schedule, p, m, v", [
    ("gpipe", 3, 5, 1), ("1f1b", 4, 7, 1), ("interleaved", 2, 4, 2), ("looped-bfs", 2, 4, 2),
    ("interleaved-zb", 2, 4, 2), ("zbv", 3, 6, 2), ("dualpipev", 3, 8, 2)])
def test_peak_parts_are_those_of_the_first_largest_moment(schedule, p, m, v):
    """``peak_parts`` sums only a stage's distinct pass counts: its parts
    are those of the first moment of the largest total that ``held_parts``
    gives after each operation, with chunks that keep different bytes."""
    s = actmem.simulate_schedule(schedule, p, m, v)
    parts = [{"layers": 7 + 5 * c, "output": 3 * c} for c in range(v)]
    pending = [{"layers": 2 + c} for c in range(v)]
    after_weight = [{"layers": 1}] * v
    for i in range(p):
        held = s.held_parts(i, parts, pending, after_weight)
        largest = max(sum(d.values()) for d in held)
        first = next(d for d in held if sum(d.values()) == largest)
        assert s.peak_parts(i, parts, pending, after_weight) == first
