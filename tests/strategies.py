"""Hypothesis strategies shared by the model's property tests."""

from hypothesis import strategies as st

import actmem


@st.composite
def layers(draw, max_a=64, max_head_dim=64, max_s=8192, s_multiple_of_t=False):
    """Valid (s, b, h, a, t): a divides h, t divides a and h (and s if asked)."""
    a = draw(st.integers(1, max_a))
    h = a * draw(st.integers(1, max_head_dim))
    t = draw(st.sampled_from(actmem.valid_tensor_parallel_sizes(h, a)))
    s = draw(st.integers(1, max_s))
    if s_multiple_of_t:
        s = t * max(1, s // t)
    return s, draw(st.integers(1, 16)), h, a, t
