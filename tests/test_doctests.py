"""The examples in the model's docstrings run and print what they say."""

import doctest

import pytest

from actmem import (config, gpus, memory, model, pipeline_formulas, pipeline_measured,
                    schedules, stage_split, states, training, units, validate)


@pytest.mark.parametrize("module", [config, gpus, memory, model, pipeline_formulas,
                                    pipeline_measured, schedules, stage_split, states,
                                    training, units, validate])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
