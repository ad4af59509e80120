"""Closed forms of the zero-bubble and DualPipe schedules against the
simulation (actmem.run.schedule.pipeline_formulas, actmem.run.schedule.dualpipe)."""

import pytest

import actmem
from actmem.run.schedule.pipeline_formulas import (dualpipe_in_flight, dualpipe_parameter_copies,
                                          zbv_in_flight, zero_bubble_h1_bubble)


def test_zb_h1_bubble_is_a_third_of_1f1b():
    for p in range(1, 9):
        for m in range(p, 4 * p + 1):
            try:
                s = actmem.simulate_schedule("interleaved-zb", p, m)
            except ValueError:
                continue   # PyTorch's rounds rule
            assert s.bubble_fraction() == zero_bubble_h1_bubble(p, m) == \
                actmem.bubble_fraction_formula("1f1b", p, m) / 3
    with pytest.raises(ValueError, match="m=3 < p=4: the closed form holds for m >= p"):
        zero_bubble_h1_bubble(4, 3)


def test_zbv_holds_2p_chunk_passes_on_every_stage():
    for p in range(1, 9):
        for m in range(2 * p, 4 * p + 1):
            s = actmem.simulate_schedule("zbv", p, m, 2)
            assert [s.peak_in_flight(i) for i in range(p)] == [zbv_in_flight(p, m)] * p
    with pytest.raises(ValueError, match="m=7 < 2p=8"):
        zbv_in_flight(4, 7)


def test_dualpipe_closed_form_from_the_readme():
    assert (dualpipe_in_flight(8), dualpipe_parameter_copies()) == (9, 2)
    with pytest.raises(ValueError, match="p=3: DualPipe needs an even number"):
        dualpipe_in_flight(3)
