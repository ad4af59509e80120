"""``actmem train --megatron-args FILE`` and ``--hf-config FILE``: the job as it is launched.

``actmem train`` takes its model one of three ways (:data:`SOURCES`): a preset
(``--preset``), a Megatron-LM launch (``--megatron-args FILE --world-size N``,
read by :meth:`actmem.Job.from_megatron_args`) or a Hugging Face
``config.json`` (``--hf-config FILE``, read by
:meth:`actmem.ModelConfig.from_hf_config`). A launch sets the model and every
option of the job, so the options ``actmem train`` takes by hand are refused
beside it (:data:`LAUNCH_KEEPS` lists those it leaves to the command line); a
``config.json`` gives the model only, and the run's options apply to it as
to a preset.

The launch file holds the arguments ``pretrain_gpt.py`` receives, as a
shell reads them (:func:`read_launch`): split by :func:`shlex.split`, a
backslash at the end of a line continues it, ``#`` starts a comment. YAML's
``MODEL_ARGS`` mapping (Megatron-LM's functional tests) is not read: PyYAML
is not one of actmem's dependencies.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

from ..run.job.job import FIELDS, GROUPS

SOURCES = ("preset", "megatron_args", "hf_config")
"""The ways to give ``actmem train`` its model (argparse dests); one is needed."""
GPU_OPTIONS = GROUPS["gpu"]
"""The job's options that a launch leaves to the GPU it runs on
(``gpu_memory``, ``reserve``, ...: :data:`actmem.run.job.job.GROUPS`)."""
LAUNCH_KEEPS = ("megatron_args", "world_size", "env", *GPU_OPTIONS, "timeline", "json",
                "lang", "help")
"""The options of ``actmem train`` allowed beside ``--megatron-args``: the
launch's own (``--world-size``, ``--env``), the GPU's and the output's. Every
other one describes the model or the job, which the launch sets."""
LAUNCH_ONLY = ("world_size", "env")
"""Options that mean something only with ``--megatron-args``."""
CONTINUATION = re.compile(r"\\\r?\n")
"""A backslash ending a line: the shell joins the next line to it."""


def add_sources(parser: argparse.ArgumentParser, source) -> None:
    """Add ``--megatron-args``, ``--hf-config`` (to the mutually exclusive
    group ``source``, beside ``--preset``), ``--world-size`` and ``--env``."""
    from .train_cli import count
    source.add_argument("--megatron-args", metavar="FILE",
                        help="a text file with the arguments of a Megatron-LM "
                             "pretrain_gpt.py launch, as a shell reads them (one line or "
                             "several joined by a backslash; # starts a comment): the model "
                             "and the job come from it, so the model and job options here "
                             "are refused; needs --world-size")
    source.add_argument("--hf-config", metavar="FILE",
                        help="a Hugging Face config.json (LLaMA, Mistral, Qwen3, Mixtral, "
                             "Qwen3-MoE, DeepSeek-V2/V3, GPT-2): the model; needs --s "
                             "(--b is 1 unless given); the other options apply as with "
                             "--preset")
    parser.add_argument("--world-size", type=count, metavar="N",
                        help="with --megatron-args: the number of GPUs of the launch "
                             "(d = N / (t*p*cp), as Megatron-LM derives it)")
    parser.add_argument("--env", type=env_pair, action="append", metavar="KEY=VALUE",
                        help="with --megatron-args, repeatable: an environment variable of "
                             "the launch that changes memory (CUBLAS_WORKSPACE_CONFIG, "
                             "NVTE_FLASH_ATTN, NVTE_FUSED_ATTN; others that change no byte "
                             "are accepted, unknown ones refused)")


def env_pair(text: str) -> str:
    """argparse type of ``--env``: ``KEY=VALUE`` with a non-empty key."""
    key, sign, _ = text.partition("=")
    if not sign or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. NVTE_FLASH_ATTN=0)")
    return text


def check(parser: argparse.ArgumentParser, argv: list[str], args) -> None:
    """Refuse options that do not go together, by ``parser.error`` (one
    line, exit 2) naming both: no model given, ``--megatron-args`` without
    ``--world-size`` or beside a model or job option, ``--world-size`` or
    ``--env`` without it, ``--hf-config`` without ``--s``. ``argv``: the
    ``train`` subcommand's own arguments, as typed."""
    typed = _typed(parser, argv)
    if all(getattr(args, dest) is None for dest in SOURCES):
        parser.error("the following arguments are required: one of --preset NAME, "
                     "--megatron-args FILE or --hf-config FILE")
    if args.megatron_args is None:
        for dest in LAUNCH_ONLY:
            if dest in typed:
                parser.error(f"argument {typed[dest]}: only with --megatron-args")
    else:
        for dest, flag in typed.items():
            if dest not in LAUNCH_KEEPS:
                parser.error(f"argument {flag}: not allowed with argument --megatron-args "
                             "(the launch's arguments set the model and the job: change "
                             "them in the file)")
        if args.world_size is None:
            parser.error("argument --megatron-args: needs --world-size N, the number of GPUs "
                         "of the launch")
    if args.hf_config is not None and args.s is None:
        parser.error("argument --hf-config: needs --s N, the run's sequence length (a "
                     "config.json describes the model, not the run; --b is 1 unless given)")


def _typed(parser: argparse.ArgumentParser, argv: list[str]) -> dict[str, str]:
    """The options typed in ``argv`` (dest -> the flag as typed); abbreviations
    are refused by the parser, so each option is typed whole (``--t=2`` and
    ``-t2`` name ``--t`` too)."""
    actions = parser._option_string_actions
    typed = {}
    for token in argv:
        if token == "--":
            break
        name = token.split("=")[0] if token.startswith("--") else token[:2]
        if name in actions:
            typed.setdefault(actions[name].dest, name)
    return typed


def read_launch(path: str) -> list[str]:
    """The arguments in a launch file, split as a shell splits them
    (:func:`shlex.split`; backslash-newline joins lines, ``#`` starts a
    comment: shlex ends a word at ``#`` too, so no argument may hold one).

    Raises:
        ValueError: the file cannot be read, its quotes do not close, it is
            empty, or it does not start with an option (a launcher's or
            script's name, YAML), each naming the file.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as error:
        raise ValueError(f"--megatron-args {path!r} cannot be read: "
                         f"{getattr(error, 'strerror', None) or error}") from None
    try:
        argv = shlex.split(CONTINUATION.sub("", text), comments=True)
    except ValueError as error:
        raise ValueError(f"--megatron-args {path!r}: {error} (quotes as in a shell)") from None
    if not argv:
        raise ValueError(f"--megatron-args {path!r} holds no arguments")
    if not argv[0].startswith("-"):
        raise ValueError(f"--megatron-args {path!r} starts with {argv[0]!r}, not an option: "
                         "give the arguments pretrain_gpt.py receives, from its first --flag "
                         "(no launcher or script name; YAML's MODEL_ARGS form is not read)")
    return argv


def environment(pairs: list[str] | None) -> dict[str, str]:
    """``--env`` as a dict; a variable given twice with two values is refused.

    Raises:
        ValueError: ``--env KEY=...`` given twice with different values.
    """
    env = {}
    for pair in pairs or ():
        key, _, value = pair.partition("=")
        key = key.strip()
        if env.get(key, value) != value:
            raise ValueError(f"--env {key} given twice: {env[key]!r} and {value!r}")
        env[key] = value
    return env


def launch_job(args):
    """The :class:`actmem.Job` of ``--megatron-args`` (None without it),
    built once (kept as ``args.job``); the options ``actmem train`` shows
    (the run line, ``--json``'s config) are set to the job's.

    Raises:
        ValueError: :func:`read_launch`'s, :func:`environment`'s, or the
            argument :meth:`actmem.Job.from_megatron_args` refuses, after
            ``--megatron-args FILE:``.
    """
    if getattr(args, "megatron_args", None) is None:
        return None
    if getattr(args, "job", None) is None:
        from ..run.job.job import Job
        argv, env = read_launch(args.megatron_args), environment(args.env)
        try:
            job = Job.from_megatron_args(argv, world_size=args.world_size, env=env,
                                         gpu=args.gpu_memory)
        except ValueError as error:
            raise ValueError(f"--megatron-args {args.megatron_args}: {error}") from None
        args.job = job.with_(**{k: getattr(args, k) for k in GPU_OPTIONS
                                if k != "gpu_memory" and hasattr(args, k)})
        _show(args, args.job)
    return args.job


def _show(args, job) -> None:
    """Set the options of ``args`` that are fields of ``job`` to the job's."""
    for dest in vars(args).copy():
        if dest in FIELDS and dest != "model":
            setattr(args, dest, getattr(job, dest))
    args.attention_mask = job.create_attention_mask_in_dataloader


def source_model(args):
    """The model of ``--megatron-args`` or ``--hf-config`` (None for a
    preset): the launch's, or the config's at ``--s`` and ``--b`` (1 unless
    given), with ``--flash-attention`` (on unless ``--no-flash-attention``).

    Raises:
        ValueError: as :func:`launch_job`, or what
            :meth:`actmem.ModelConfig.from_hf_config` refuses, after
            ``--hf-config:``.
    """
    if getattr(args, "megatron_args", None) is not None:
        return launch_job(args).model
    if getattr(args, "hf_config", None) is None:
        return None
    from ..run.job.model import ModelConfig
    flash = True if args.flash_attention is None else args.flash_attention
    try:
        return ModelConfig.from_hf_config(args.hf_config, s=args.s,
                                          b=1 if args.b is None else args.b,
                                          flash_attention=flash)
    except ValueError as error:
        raise ValueError(f"--hf-config: {error}") from None


def name(args) -> str:
    """The model's name on the run line: the preset, or the file's name."""
    path = getattr(args, "megatron_args", None) or getattr(args, "hf_config", None)
    return args.preset if path is None else Path(path).name


def job_json(args) -> dict:
    """``--json``'s record of a launch's job: ``{"job": options that differ
    from their defaults}`` (tuples as lists), or ``{}`` without a launch."""
    job = getattr(args, "job", None)
    if job is None:
        return {}
    return {"job": {k: list(v) if isinstance(v, tuple) else v
                    for k, v in job.changed().items()}}
