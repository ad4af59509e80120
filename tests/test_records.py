"""The run's records built directly (issue 21): every field is checked by
kind (wrong type, negative bytes, bools and floats where integers are meant,
unknown names), NumPy integers are kept as ``int``, and each record's own
rules hold; and the precisions other than bf16 refuse every feature they do
not model with one message (:func:`actmem.run.moments.precision.check_precision_features`)."""

import dataclasses
import re
from fractions import Fraction

import numpy as np
import pytest

from actmem import MOE_PRESETS, PRESETS, model_states, simulate_schedule, training_memory
from actmem.run.job.gpus import GPU, GPUS
from actmem.run.moments.offload import Offload
from actmem.run.schedule.ops import Op, Timed
from actmem.run.moments.autocast import AutocastCopies
from actmem.run.moments.precision import PLAIN_PYTORCH
from actmem.run.job.record_fields import BY_ANNOTATION
from actmem.run.moments.timeline_events import Event, LayerMoments, Pass

SMALL = PRESETS["llama2-7b"].with_(L=4, s=256)


@pytest.fixture(scope="module")
def examples():
    """One valid record of each kind, the model's own where it makes them."""
    run = training_memory(SMALL, p=2, m=2)
    stage = run.stages[0]
    return {
        "Op": Op("F", 0), "Timed": Timed(Op("B", 1, 1), Fraction(1), Fraction(3)),
        "GPU": GPUS["H100 80GB SXM"], "Event": stage.timeline.events[0],
        "LayerMoments": LayerMoments(kept=6, full=9, to_softmax=0, scores=0, checkpoint=0,
                                     recompute="selective", group=1),
        "Pass": Pass(embedding=5, loads_data=True), "StageTimeline": stage.timeline,
        "PipelineSchedule": simulate_schedule("interleaved", 2, 4, 2),
        "StageMemory": stage, "TrainingMemory": run,
        "ModelStates": model_states(SMALL, p=2), "AutocastCopies": AutocastCopies(weights=8),
        "Offload": Offload(1, 4, ("fc1_input",), ("dropout_mask",), 100, 10),
    }


KINDS = ["Op", "Timed", "GPU", "Event", "LayerMoments", "Pass", "StageTimeline",
         "PipelineSchedule", "StageMemory", "TrainingMemory", "ModelStates",
         "AutocastCopies", "Offload"]
WRONG_OBJECTS = [object(), [1], {"a": 1}, np.array([1, 2])]


def _fields(record, annotation):
    return [f.name for f in dataclasses.fields(record) if f.type == annotation]


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_refuses_a_wrong_object(examples, kind):
    record = examples[kind]
    for field in dataclasses.fields(record):
        for value in WRONG_OBJECTS:
            with pytest.raises((TypeError, ValueError), match=f"{kind}.{field.name}"):
                dataclasses.replace(record, **{field.name: value})


@pytest.mark.parametrize("kind", KINDS)
def test_integer_fields_refuse_negatives_bools_and_floats(examples, kind):
    record = examples[kind]
    names = _fields(record, "int") + _fields(record, "int | None")
    for name in names:
        with pytest.raises(ValueError, match=rf"{kind}.{name} must be .*, got -1"):
            dataclasses.replace(record, **{name: -1})
        for value in (True, np.bool_(False), 2.0, Fraction(2), "2", np.float64(2)):
            with pytest.raises(TypeError, match=f"{kind}.{name} must be"):
                dataclasses.replace(record, **{name: value})


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_integers_are_kept_as_python_ints(examples, kind):
    record = examples[kind]
    for name in _fields(record, "int") + _fields(record, "int | None"):
        value = getattr(record, name)
        if value is None:
            continue
        for scalar in (np.int64(value), np.uint64(value), np.array(value)[()]):
            copy = dataclasses.replace(record, **{name: scalar})
            assert type(getattr(copy, name)) is int and copy == record


@pytest.mark.parametrize("kind", KINDS)
def test_text_and_flag_fields_take_only_their_type(examples, kind):
    record = examples[kind]
    for name in _fields(record, "str"):
        with pytest.raises((TypeError, ValueError), match=f"{kind}.{name}"):
            dataclasses.replace(record, **{name: 3})
    for name in _fields(record, "bool"):
        for value in (1, np.bool_(True), "True", None):
            with pytest.raises(TypeError, match=f"{kind}.{name} must be True or False"):
                dataclasses.replace(record, **{name: value})


def test_every_annotation_has_a_check(examples):
    for record in examples.values():
        for field in dataclasses.fields(record):
            special = field.type not in BY_ANNOTATION
            allowed = ("Op", "Fraction", "tuple[int, int] | None", "tuple[Event, ...]",
                       "tuple[tuple[Op, ...], ...]", "StageTimeline | None",
                       "tuple[StageMemory, ...]", "ReserveParts | None")
            assert not special or field.type in allowed, (
                type(record).__name__, field.name, field.type)


@pytest.mark.parametrize("kind, changes, words", [
    ("Op", dict(kind="X"), "Op.kind must be one of 'F', 'B', 'I', 'W', got 'X'"),
    ("Op", dict(kind="f"), "Op.kind must be one of"),
    ("Event", dict(moment="before"), "Event.moment must be one of 'during', 'after'"),
    ("Event", dict(bytes=(0,) * 6), "Event.bytes must have 7 items, got 6"),
    ("Event", dict(bytes=(0, 0, 0, -5, 0, 0, 0)), "Event.bytes[3] must be an integer >= 0"),
    ("Event", dict(bytes=(0, 0, 0, 0.5, 0, 0, 0)), "Event.bytes[3] must be an integer >= 0"),
    ("LayerMoments", dict(recompute="Selective"), "LayerMoments.recompute must be one of"),
    ("LayerMoments", dict(group=0), "LayerMoments.group must be a positive integer"),
    ("GPU", dict(memory=0), "GPU.memory must be a positive integer"),
    ("GPU", dict(compute_capability=(9,)), "GPU.compute_capability must be a pair"),
    ("GPU", dict(compute_capability=(9, -1)), "GPU.compute_capability[1] must be"),
    ("Timed", dict(end=Fraction(1, 2)), "Timed.end must be >= start=1, got 1/2"),
    ("Timed", dict(start=Fraction(-1)), "Timed.start must be >= 0"),
    ("Timed", dict(op="F0"), "Timed.op must be an Op"),
    ("StageTimeline", dict(events=()), "StageTimeline.events must hold at least one Event"),
    ("PipelineSchedule", dict(schedule="zbh1"), "PipelineSchedule.schedule must be one of"),
    ("PipelineSchedule", dict(order="mine"), "PipelineSchedule.order must be one of"),
    ("PipelineSchedule", dict(p=3), "PipelineSchedule.ops must hold one tuple per stage (p=3)"),
    ("PipelineSchedule", dict(ops=((Op("F", 0),), ("F0",))), "PipelineSchedule.ops[1][0]"),
    ("PipelineSchedule", dict(microbatch_group_size=0), "microbatch_group_size must be a pos"),
    ("TrainingMemory", dict(stages=()), "TrainingMemory.stages must hold at least one"),
    ("TrainingMemory", dict(gpu_memory=0), "TrainingMemory.gpu_memory must be a positive"),
    ("StageMemory", dict(timeline="peak"), "StageMemory.timeline must be a StageTimeline"),
    ("StageMemory", dict(reserve_parts=5), "StageMemory.reserve_parts must be a ReserveParts"),
    ("ModelStates", dict(expert_parameters=10**12), "ModelStates.expert_parameters must be <="),
    ("ModelStates", dict(frozen_parameters=10**12), "ModelStates.frozen_parameters must be <="),
    ("Offload", dict(layers=4), "Offload.layers must be < L=4, got 4"),
    ("Offload", dict(L=0), "Offload.L must be a positive integer"),
    ("Offload", dict(offloaded_rows=("a", 1)), "Offload.offloaded_rows[1] must be a str"),
])
def test_each_record_keeps_its_own_rules(examples, kind, changes, words):
    with pytest.raises((TypeError, ValueError), match=re.escape(words)):
        dataclasses.replace(examples[kind], **changes)


def test_a_record_with_the_same_values_is_the_same_record(examples):
    event = examples["Event"]
    assert Event(event.label, event.op, event.moment, tuple(map(np.int64, event.bytes))) == event
    assert hash(GPU(**dataclasses.asdict(examples["GPU"]))) == hash(examples["GPU"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.label = "changed"


LLAMA = PRESETS["llama2-7b"]
FEATURES = {  # PLAIN_PYTORCH's features, each used by one run
    "num_experts": (MOE_PRESETS["mixtral-8x7b"], {}),
    "kv_channels": (LLAMA.with_(kv_channels=256), {}),
    "qk_layernorm": (LLAMA.with_(qk_layernorm=True), {}),
    "multi_latent_attention": (MOE_PRESETS["deepseek-v2-lite"].with_(
        num_experts=None, moe_router_topk=2, moe_ffn_hidden_size=None,
        moe_shared_expert_intermediate_size=None, moe_layer_freq=1, moe_router_pre_softmax=False,
        L=4), {}),
    "lora_rank": (LLAMA.with_(lora_rank=8, lora_targets=("linear_qkv",)), {}),
    "fp8": (LLAMA, dict(fp8="hybrid")),
    "recompute_modules": (LLAMA, dict(recompute="selective", recompute_modules=["mlp"])),
    "cp": (LLAMA.with_(flash_attention=True), dict(cp=2)),
    "cpu_offloading_num_layers": (LLAMA, dict(cpu_offloading_num_layers=2)),
    "logits_bytes": (LLAMA, dict(logits_bytes=2, loss="torch")),
}


def test_the_rule_names_every_feature():
    assert set(FEATURES) == set(PLAIN_PYTORCH)


@pytest.mark.parametrize("precision", ["fp32", "autocast"])
@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_other_precisions_refuse_each_feature_with_one_message(precision, feature):
    model, options = FEATURES[feature]
    plain = PLAIN_PYTORCH[feature][0]
    with pytest.raises(ValueError, match=rf"^precision='{precision}' does not model {feature}="
                                         rf".*: use {feature}={plain!r}, or precision='bf16'$"):
        training_memory(model, precision=precision, **options)
