"""Command line: ``python -m actmem`` / ``actmem`` prints the worked example's table;
``python -m actmem train --preset NAME ...`` (or ``--megatron-args FILE
--world-size N``, or ``--hf-config FILE --s N``) a GPU's peak training memory
(:mod:`actmem.views.train_cli`, :mod:`actmem.views.job_cli`);
``python -m actmem cheatsheet FILE`` writes the cheat sheet (:mod:`actmem.views.cheatsheet`).

The table: activation memory per layer, per micro-batch, per GPU, in MiB.

Columns fixed, intermediate, attention map and total in MiB for one
configuration and a list of tensor-parallel sizes (Korthikanti et al. 2022,
sec. 4.2.1); ``--json`` prints the same in bytes, ``-L`` adds the whole model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

from . import job_cli, train_cli
from .train_cli import count
from ..language import LANGUAGES, get_language, set_language
from ..layer.config import RECOMPUTE
from ..layer.dimensions import ACTIVATIONS, default_ffn_hidden_size
from ..layer.memory import activation_memory
from ..run.schedule.training import model_activation_memory
from ..units import format_bytes, format_value

COLUMNS = ("fixed", "intermediate", "attention_map", "total")
DESCRIPTION = ("Activation memory one Transformer layer keeps for backward, per "
               "micro-batch, per GPU (Korthikanti et al. 2022): the terms fixed, "
               "intermediate and attention map, for each tensor-parallel size t.")


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line: ``actmem: error: ...``; options are
    never abbreviated (``--seq`` is not ``--sequence-parallel``); an unknown
    option before a command is named as such (not as an invalid command);
    and ``-h 4096`` (help followed by a number) is read as a mistyped hidden
    size: ``-h`` stays help, as in every tool, and the error points to ``--h``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else list(args)
        for flag, after in zip(argv, argv[1:]):
            if flag == "-h" and after.isdigit():
                self.error(f"-h is --help; for the hidden size write --h {after}")
        self._unknown_options(argv)
        return super().parse_args(argv, namespace)

    def _unknown_options(self, argv: list[str]) -> None:
        commands = getattr(self, "commands", {})
        for token in argv:
            if commands and token in commands:
                return
            name = token.split("=")[0] if token.startswith("--") else token[:2]
            if (token.startswith("-") and not token.lstrip("-").isdecimal()
                    and name not in self._option_string_actions):
                self.error(f"unrecognized option {token!r} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser: layer sizes, storage options, -L and --json."""
    parser = _Parser(prog="actmem", description=DESCRIPTION,
                     usage="%(prog)s [options]         the worked example's table\n"
                           "       %(prog)s train --preset NAME [options]   "
                           "peak training memory per GPU (train --help)\n"
                           "       %(prog)s train --megatron-args FILE --world-size N | "
                           "--hf-config FILE --s N [options]")
    size = parser.add_argument_group("layer (paper symbols; default: s=2048 b=1 h=4096 a=32)")
    size.add_argument("-s", "--s", type=count, default=2048, help="sequence length (2048)")
    size.add_argument("-b", "--b", type=count, default=1, help="micro-batch size (1)")
    size.add_argument("--h", type=count, default=4096, help="hidden size (4096)")
    size.add_argument("-a", "--a", type=count, default=32, help="attention heads (32)")
    size.add_argument("-t", "--t", type=count, nargs="+", default=[1, 2, 4, 8],
                      help="tensor-parallel sizes (1 2 4 8)")
    size.add_argument("-L", "--layers", type=count, help="add L*M for L layers")
    opts = parser.add_argument_group("storage options")
    opts.add_argument("--sequence-parallel", action="store_true",
                      help="split the replicated tensors along s (needs t | s)")
    opts.add_argument("--recompute", choices=RECOMPUTE, default="none",
                      help="activation recomputation (none)")
    opts.add_argument("--flash-attention", action="store_true",
                      help="fused attention: no s x s map is stored")
    opts.add_argument("--kv-heads", type=count,
                      help="grouped-query attention: key/value heads g (a)")
    opts.add_argument("--ffn-hidden-size", type=count,
                      help="MLP width f (4h; for swiglu Megatron-LM's int(8h/3/64)*64)")
    opts.add_argument("--activation", choices=ACTIVATIONS, default="gelu",
                      help="MLP activation (gelu)")
    opts.add_argument("--no-dropout", dest="dropout", action="store_false",
                      help="the layer applies no dropout")
    parser.add_argument("--json", action="store_true", help="print bytes as JSON")
    add_language(parser, "the table's")
    sub = parser.add_subparsers(dest="command", metavar="{train,cheatsheet}",
                                parser_class=_Parser)
    parser.commands = sub.choices
    add_language(train_cli.add_parser(sub), "the table's and the verdict's")
    sheet = sub.add_parser("cheatsheet", help="write the two-page cheat sheet",
                           prog="actmem cheatsheet",
                           description="Write the cheat sheet (formulas and common "
                           "mistakes; today's levers; numbers from actmem) as two landscape "
                           "A4 pages (a PNG: one above the other).")
    sheet.add_argument("out", help="the file to write: NAME.pdf or NAME.png")
    add_language(sheet, "the sheet's")
    return parser


def add_language(parser: argparse.ArgumentParser, whose: str) -> argparse.ArgumentParser:
    """``--lang``: the language of the words printed (numbers and JSON are
    the same in every language)."""
    parser.add_argument("--lang", choices=LANGUAGES, default="en",
                        help=f"{whose} language: English (en, default) or Chinese (zh)")
    return parser


def _options(args) -> dict:
    return {
        "sequence_parallel": args.sequence_parallel, "recompute": args.recompute,
        "flash_attention": args.flash_attention, "kv_heads": args.kv_heads,
        "ffn_hidden_size": args.ffn_hidden_size, "activation": args.activation,
        "dropout": args.dropout,
    }


def compute(args) -> list[dict]:
    """One dict per t: bytes of each column, plus ``model`` when -L is set.
    Warnings (sequence parallelism at t=1) are printed as one ``note:``
    line on stderr."""
    rows = []
    if args.activation == "swiglu" and args.ffn_hidden_size is None:
        print(f"actmem: note: swiglu MLP width f={default_ffn_hidden_size(args.h, 'swiglu')}"
              " (Megatron-LM's default int(8h/3/64)*64); --ffn-hidden-size sets your "
              "model's", file=sys.stderr)
    for t in args.t:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = activation_memory(args.s, args.b, args.h, args.a, t, **_options(args))
        for warning in caught:
            print(f"actmem: note: {warning.message}", file=sys.stderr)
        row = {"t": t, **{c: getattr(result, c) for c in COLUMNS}}
        if args.layers is not None:
            row["model"] = model_activation_memory(result, args.layers)
        rows.append(row)
    return rows


def render_table(args, rows: list[dict]) -> str:
    """The worked example's table in MiB, with the whole-model line(s) when -L is set;
    words in the current language (``--lang``; in Chinese the source article's
    column names)."""
    from ..language import tr
    from .printed import pad

    head = (f"{'t':>4} " + " ".join(pad(tr(name), w, ">") for name, w in zip(
        ("fixed", "intermediate", "attention map", "total"), (10, 13, 14, 10))))
    if get_language() == "zh":  # the source article's own column names (its table, sec. 3)
        head = f"{'t':>4} " + " ".join(pad(name, w, ">") for name, w in zip(
            ("固定项", "中间态", "Attention Map", "合计"), (10, 13, 14, 10)))
    lines = [tr("s={s} b={b} h={h} a={a}: MiB per layer, per micro-batch, per GPU").format(
        s=args.s, b=args.b, h=args.h, a=args.a), head]
    for r in rows:
        cells = " ".join(f"{format_value(r[c]):>{w}}" for c, w in
                         zip(COLUMNS, (10, 13, 14, 10)))
        lines.append(f"{r['t']:>4} {cells}")
    if args.layers is not None:
        lines += [f"L={args.layers}, t={r['t']}: {format_bytes(r['model'], 'MiB')}"
                  f" = {format_bytes(r['model'], 'GiB')}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns 0, or exits 2 with a one-line error."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.command is not None:
        _nothing_before(parser, argv, args.command)
    if args.command == "train":   # the model: a preset, a launch or a config.json
        job_cli.check(parser.commands["train"], argv[argv.index("train") + 1:], args)
    run = {"train": _train, "cheatsheet": _cheatsheet}.get(args.command, _table)
    previous = get_language()
    try:
        if args.command != "cheatsheet":   # the sheet sets its own, while it draws
            set_language(args.lang)
        print(run(args))
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    except OSError as error:  # the cheat sheet's file
        parser.error(f"out={args.out!r} cannot be written: {error.strerror or error}")
    finally:
        set_language(previous)
    return 0


def _nothing_before(parser, argv: list[str], command: str) -> None:
    """The table's options before a command would be dropped silently: refuse them."""
    before = argv[:argv.index(command)]
    if before:
        parser.error(f"{' '.join(before)} before {command!r} belongs to the table, not to "
                     f"{command!r}: write {command}'s options after it "
                     f"(actmem {command} --help)")


def _table(args) -> str:
    rows = compute(args)
    if not args.json:
        return render_table(args, rows)
    config = {k: getattr(args, k) for k in ("s", "b", "h", "a", "layers")}
    return json.dumps({"unit": "bytes", "config": {**config, **_options(args)},
                       "rows": rows}, indent=2)


def _cheatsheet(args) -> str:
    """Write the sheet in ``args.lang`` to ``args.out``, in the format its
    extension names (given to matplotlib, which would otherwise write
    ``.pdf`` as ``.pdf.png``: a name with no stem has no extension)."""
    stem, extension = os.path.splitext(os.path.basename(args.out))
    if not stem or extension.lower() not in (".pdf", ".png"):
        raise ValueError(f"out={args.out!r} must end in .pdf or .png after a name, "
                         "e.g. sheet.pdf")
    from .cheatsheet_levers import write_sheet
    previous = get_language()
    with open(args.out, "wb") as file:  # a path that cannot be written fails before drawing
        set_language(args.lang)
        try:
            write_sheet(file, extension[1:].lower())
        finally:
            set_language(previous)
    return f"wrote {args.out}"


def _train(args) -> str:
    result = train_cli.compute(args)
    return train_cli.as_json(args, result) if args.json else train_cli.render(args, result)


if __name__ == "__main__":
    sys.exit(main())
