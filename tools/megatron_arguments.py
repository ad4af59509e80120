#!/usr/bin/env python3
"""Every command-line argument of Megatron-LM's megatron/training/arguments.py, classified
for actmem's memory model; writes actmem/data/megatron_arguments.json.

    python tools/megatron_arguments.py MEGATRON_CHECKOUT [--commit HASH]
        [--out actmem/data/megatron_arguments.json] [--report REPORT.md]

MEGATRON_CHECKOUT is a work tree of NVIDIA/Megatron-LM (or an unpacked `git archive` of
one; then give --commit, which is otherwise read with `git rev-parse HEAD`). Nothing is
imported from it and nothing is fetched: arguments.py is read with Python's `ast`.

Two ways put an argument on Megatron-LM's parser, and both are read:

* a literal `X.add_argument('--flag', ...)` call in one of the `_add_*_args` functions that
  `add_megatron_arguments` calls (X being a group made with `parser.add_argument_group`,
  a mutually exclusive group of one, or the parser itself);
* `ArgumentGroupFactory(SomeConfig, exclude=[...]).build_group(parser, title)`, which adds
  one argument per dataclass field of SomeConfig (its bases' fields first).  Its rules
  (megatron/training/argument_utils.py) are replayed on the dataclass's source: flag
  `--field-name`; dest the field name; help the field's docstring (the first base's
  docstrings win over the class's own, as `_get_field_docstrings` updates with them last);
  default the field's default; `Optional[X]`/`X | None` read as X, `list[X]` as nargs '+',
  `Literal[...]` as choices, an Enum as its member names; a bool is `store_true` when its
  default is False, otherwise `store_false` named `--no-field` and `--disable-field`; then
  the field's `metadata["argparse_meta"]` overrides any of these.

Each argument then gets a class for a memory model of a training job's GPU memory:
"modelled" (decides bytes, and actmem represents it: "field" names where, and "values",
if present, the only values it represents), "neutral" (changes no tensor on the GPU during
training) or "refused" (changes bytes in a way a model without it would get silently
wrong; "Refused when set" ones are harmless at their default), each with a one-sentence
"why".  The classification is the CLASSES table below, keyed by flag; GROUP_CLASSES
classes every other argument of a group (logging, checkpointing, ...) at once.  An
argument that neither names is an error (the script lists them and exits 2), and so is a
CLASSES entry for a flag the parser no longer has, so a newer Megatron-LM shows what
changed.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import inspect
import itertools
import json
import subprocess
import sys
from pathlib import Path

ARGS_PATH = "megatron/training/arguments.py"
ENTRY = "add_megatron_arguments"
_MISSING = object()


# --------------------------------------------------------------------------- source reading


class Source:
    """The Python modules of a Megatron-LM checkout, parsed on demand."""

    def __init__(self, root: Path):
        self.root = root
        self._trees: dict[Path, ast.Module] = {}

    def tree(self, path: Path) -> ast.Module:
        if path not in self._trees:
            self._trees[path] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        return self._trees[path]

    def module_file(self, dotted: str) -> Path | None:
        base = self.root.joinpath(*dotted.split("."))
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                return cand
        return None

    def dotted(self, path: Path) -> str:
        rel = path.relative_to(self.root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)

    def _absolute(self, path: Path, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        pkg = self.dotted(path).split(".")
        if path.name != "__init__.py":
            pkg = pkg[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        return ".".join(pkg + ([node.module] if node.module else []))

    def resolve(self, path: Path, name: str, _seen=None):
        """What `name` means at module level of `path`: ('class', path, ClassDef),
        ('external', 'module.name') or None."""
        _seen = _seen or set()
        if (path, name) in _seen:
            return None
        _seen.add((path, name))
        tree = self.tree(path)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return ("class", path, node)
        for node in ast.walk(tree):  # imports may sit inside try/if blocks
            if isinstance(node, ast.ImportFrom):
                mod = self._absolute(path, node)
                for alias in node.names:
                    if alias.name == "*" or (alias.asname or alias.name) == name:
                        target = self.module_file(mod)
                        real = name if alias.name == "*" else alias.name
                        if target is None:
                            if alias.name != "*":
                                return ("external", f"{mod}.{real}")
                            continue
                        sub = self.module_file(f"{mod}.{real}")
                        if sub is not None and alias.name != "*":
                            return ("module", sub)
                        hit = self.resolve(target, real, _seen)
                        if hit is not None:
                            return hit
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if (alias.asname or alias.name.split(".")[0]) == name:
                        target = self.module_file(alias.name)
                        return ("module", target) if target else ("external", alias.name)
        if hasattr(builtins, name):
            return ("external", f"builtins.{name}")
        return None

    def resolve_expr(self, path: Path, node: ast.AST):
        """Resolve a Name or dotted Attribute (e.g. `enum.Enum`, `torch.dtype`)."""
        if isinstance(node, ast.Name):
            return self.resolve(path, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve_expr(path, node.value)
            if base is None:
                return None
            if base[0] == "external":
                return ("external", f"{base[1]}.{node.attr}")
            if base[0] == "module":
                return self.resolve(base[1], node.attr)
            if base[0] == "class":
                return ("attribute", base, node.attr)
        return None


def literal(node: ast.AST):
    """(True, value) for a literal (tuples become lists), else (False, source text)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, ast.unparse(node)
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return False, ast.unparse(node)

    def jsonable(v):
        if isinstance(v, (tuple, list)):
            return [jsonable(x) for x in v]
        if isinstance(v, (set, frozenset)):
            return sorted(jsonable(x) for x in v)
        if isinstance(v, dict):
            return {str(k): jsonable(x) for k, x in v.items()}
        if isinstance(v, bytes):
            return v.decode("latin-1")
        return v

    return True, jsonable(value)


# --------------------------------------------------------------------------- dataclass replay


class Dataclass:
    """Replays ArgumentGroupFactory on a dataclass read from source."""

    ENUM_BASES = {"enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag"}

    def __init__(self, src: Source, path: Path, cls: ast.ClassDef):
        self.src, self.path, self.cls = src, path, cls

    def _base_classes(self, path, cls):
        out = []
        for b in cls.bases:
            hit = self.src.resolve_expr(path, b)
            out.append(hit)
        return out

    @staticmethod
    def _is_dataclass(cls: ast.ClassDef) -> bool:
        for d in cls.decorator_list:
            f = d.func if isinstance(d, ast.Call) else d
            if ast.unparse(f).split(".")[-1] == "dataclass":
                return True
        return False

    def fields(self):
        """dataclasses.fields(): bases' fields first, an override keeping its place."""
        order: dict[str, dict] = {}
        self._collect(self.path, self.cls, order)
        return [f for f in order.values() if f["init"]]

    def _collect(self, path, cls, order):
        for hit in reversed(self._base_classes(path, cls)):
            if hit and hit[0] == "class" and self._is_dataclass(hit[2]):
                self._collect(hit[1], hit[2], order)
        for node in cls.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            ann = ast.unparse(node.annotation)
            if ann.split("[")[0].split(".")[-1] in ("ClassVar", "InitVar", "KW_ONLY"):
                continue
            f = {"name": node.target.id, "annotation": node.annotation, "path": path,
                 "owner": cls.name, "line": node.lineno, "init": True,
                 "default": _MISSING, "default_factory": None, "meta": None}
            v = node.value
            if (isinstance(v, ast.Call) and ast.unparse(v.func).split(".")[-1] == "field"):
                for kw in v.keywords:
                    if kw.arg == "default":
                        f["default"] = kw.value
                    elif kw.arg == "default_factory":
                        f["default_factory"] = kw.value
                    elif kw.arg == "init":
                        f["init"] = literal(kw.value)[1] is not False
                    elif kw.arg == "metadata":
                        f["meta"] = kw.value
            elif v is not None:
                f["default"] = v
            order[f["name"]] = f  # an override keeps the base's position, as dataclasses do

    def docstrings(self, path=None, cls=None):
        """_get_field_docstrings: own pairs, then updated with the FIRST base's."""
        path, cls = path or self.path, cls or self.cls
        docs = {}
        for a, b in itertools.pairwise(cls.body):
            if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
                    and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                    and isinstance(b.value.value, str)):
                docs[a.target.id] = " ".join(inspect.cleandoc(b.value.value).split())
        if cls.bases:
            hit = self.src.resolve_expr(path, cls.bases[0])
            if hit and hit[0] == "class":
                docs.update(self.docstrings(hit[1], hit[2]))
        return docs

    # -- type inference (ArgumentGroupFactory._extract_type) --

    def _enum_members(self, path, cls, seen=None):
        """Member names if `cls` is an Enum (directly or through an enum base), else None."""
        seen = seen or set()
        is_enum = False
        for b in cls.bases:
            hit = self.src.resolve_expr(path, b)
            if hit is None:
                continue
            if hit[0] == "external" and hit[1] in self.ENUM_BASES:
                is_enum = True
            elif hit[0] == "class" and (hit[1], hit[2].name) not in seen:
                seen.add((hit[1], hit[2].name))
                if self._enum_members(hit[1], hit[2], seen) is not None:
                    is_enum = True
        if not is_enum:
            return None
        names = []
        for node in cls.body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and not t.id.startswith("_"):
                        names.append(t.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and node.value is not None and not node.target.id.startswith("_"):
                names.append(node.target.id)
        return names

    def _typing_name(self, path, node):
        hit = self.src.resolve_expr(path, node)
        if hit and hit[0] == "external":
            mod, _, name = hit[1].rpartition(".")
            if mod in ("typing", "typing_extensions", "types", "collections.abc"):
                return name
            if mod == "builtins":
                return name
        return None

    def extract_type(self, path, ann):
        """dict of argparse kwargs (as {'kw': (is_literal, value)}), or raises TypeError."""
        if isinstance(ann, ast.Constant) and ann.value is None:
            return {"type": (False, "NoneType")}
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            args = _union_args(ann)
            if len(args) >= 2 and isinstance(args[1], ast.Constant) and args[1].value is None:
                return self.extract_type(path, args[0])
            raise TypeError(f"Unions not supported by argparse: {ast.unparse(ann)}")
        if isinstance(ann, ast.Subscript):
            origin = self._typing_name(path, ann.value)
            sl = ann.slice
            items = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
            if origin == "Optional":
                return self.extract_type(path, items[0])
            if origin == "Union":
                if (len(items) >= 2 and isinstance(items[1], ast.Constant)
                        and items[1].value is None):
                    return self.extract_type(path, items[0])
                raise TypeError(f"Unions not supported by argparse: {ast.unparse(ann)}")
            if origin in ("list", "List"):
                if len(items) == 1:
                    kw = self.extract_type(path, items[0])
                    kw["nargs"] = (True, "+")
                    return kw
                raise TypeError(f"Multi-type lists not supported: {ast.unparse(ann)}")
            if origin == "Literal":
                values = [literal(i)[1] for i in items]
                return {"type": (False, type(values[0]).__name__), "choices": (True, values)}
            raise TypeError(f"Unsupported type: {ast.unparse(ann)}")
        hit = self.src.resolve_expr(path, ann)
        if hit and hit[0] == "class":
            members = self._enum_members(hit[1], hit[2])
            if members is not None:
                return {"type": (False, f"{hit[2].name}[name]"), "choices": (True, members),
                        "_enum": hit[2].name}
        if hit and hit[0] == "external":
            members = _stdlib_enum_members(hit[1])
            if members is not None:
                return {"type": (False, f"{hit[1]}[name]"), "choices": (True, members),
                        "_enum": hit[1]}
        name = self._typing_name(path, ann)
        if name in ("Callable", "Any", "Sequence", "Iterable"):
            raise TypeError(f"Unsupported type: {ast.unparse(ann)}")
        return {"type": (False, name if name else ast.unparse(ann))}

    def arguments(self, exclude: set[str]):
        docs = self.docstrings()
        out = []
        for f in self.fields():
            if f["name"] in exclude:
                continue
            kw = {"dest": (True, f["name"]), "help": (True, docs.get(f["name"], ""))}
            names = ["--" + f["name"].replace("_", "-")]
            if f["default"] is not _MISSING:
                kw["default"] = literal(f["default"])
                default_is_false = kw["default"][0] and kw["default"][1] == False  # noqa: E712
            else:
                fac = f["default_factory"]
                fac_src = ast.unparse(fac) if fac is not None else "MISSING"
                kw["default"] = {"list": (True, []), "dict": (True, {})}.get(
                    fac_src, (False, f"{fac_src}()"))
                if isinstance(fac, ast.Lambda):
                    kw["default"] = literal(fac.body)
                default_is_false = False  # attribute.default is MISSING
            note = None
            try:
                inferred = self.extract_type(f["path"], f["annotation"])
                inferred.pop("_enum", None)
                kw.update(inferred)
                if kw["type"] == (False, "bool"):
                    kw.pop("type")
                    kw["action"] = (True, "store_true" if default_is_false else "store_false")
                    if not default_is_false:
                        names = ["--no-" + f["name"].replace("_", "-"),
                                 "--disable-" + f["name"].replace("_", "-")]
            except TypeError as e:
                if f["meta"] is None:
                    raise SystemExit(f"{f['owner']}.{f['name']}: {e} and no argparse_meta: "
                                     "ArgumentGroupFactory would fail here too")
                note = f"type not inferred ({e}); argparse_meta decides"
            meta = _argparse_meta(f["meta"])
            if meta is not None:
                for k, v in meta.items():
                    if k == "arg_names":
                        names = v[1]
                    else:
                        kw[k] = v
            out.append({
                "option_strings": names, "kw": kw,
                "source": {"kind": "dataclass", "class": f["owner"], "field": f["name"],
                           "annotation": ast.unparse(f["annotation"]),
                           "file": str(f["path"].relative_to(self.src.root)), "line": f["line"],
                           **({"argparse_meta": {k: v[1] for k, v in meta.items()}}
                              if meta else {}),
                           **({"note": note} if note else {})},
            })
        return out


def _stdlib_enum_members(dotted: str):
    """Member names of a standard-library Enum such as `signal.Signals`, else None.
    Only standard-library modules are imported (never the checkout's)."""
    mod, _, name = dotted.rpartition(".")
    if not mod or mod.split(".")[0] not in sys.stdlib_module_names:
        return None
    import enum
    import importlib
    try:
        obj = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError):
        return None
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        return [m.name for m in obj]
    return None


def _union_args(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_args(node.left) + _union_args(node.right)
    return [node]


def _argparse_meta(node):
    if node is None or not isinstance(node, ast.Dict):
        return None
    for k, v in zip(node.keys, node.values):
        if isinstance(k, ast.Constant) and k.value == "argparse_meta":
            if not isinstance(v, ast.Dict):
                raise SystemExit(f"argparse_meta is not a dict literal: {ast.unparse(v)}")
            return {literal(kk)[1]: literal(vv) for kk, vv in zip(v.keys, v.values)}
    return None


# --------------------------------------------------------------------------- arguments.py walk


class Walker:
    """Follows add_megatron_arguments through the `_add_*` functions, statement by statement."""

    def __init__(self, src: Source):
        self.src = src
        self.path = src.root / ARGS_PATH
        self.tree = src.tree(self.path)
        self.funcs = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef)}
        self.args: list[dict] = []
        self.called: list[str] = []

    def run(self):
        self.function(self.funcs[ENTRY], set())
        return self.args

    def function(self, fn: ast.FunctionDef, stack: set):
        if fn.name in stack:
            return
        if fn.name != ENTRY:
            self.called.append(fn.name)
        params = [a.arg for a in fn.args.args]
        env = {p: ("parser", "options") for p in params[:1]}  # the parser: argparse's 'options'
        self.block(fn.body, env, fn, [], stack | {fn.name})

    def block(self, body, env, fn, conds, stack):
        for stmt in body:
            if isinstance(stmt, ast.If):
                self.block(stmt.body, env, fn, conds + [ast.unparse(stmt.test)], stack)
                self.block(stmt.orelse, env, fn, conds + [f"not ({ast.unparse(stmt.test)})"], stack)
            elif isinstance(stmt, (ast.For, ast.While)):
                if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                       and n.func.attr == "add_argument" for n in ast.walk(stmt)):
                    raise SystemExit(f"{fn.name}:{stmt.lineno}: add_argument in a loop; "
                                     "teach this script to unroll it")
            elif isinstance(stmt, ast.Try):
                self.block(stmt.body, env, fn, conds, stack)
                for h in stmt.handlers:
                    self.block(h.body, env, fn, conds, stack)
                self.block(stmt.orelse + stmt.finalbody, env, fn, conds, stack)
            elif isinstance(stmt, ast.With):
                self.block(stmt.body, env, fn, conds, stack)
            elif isinstance(stmt, (ast.Assign, ast.Expr, ast.Return, ast.AnnAssign)):
                value = stmt.value
                if value is None:
                    continue
                result = self.expr(value, env, fn, conds, stack)
                if result is None and literal(value)[0]:
                    result = ("literal", literal(value)[1])  # e.g. an exclude list
                if isinstance(stmt, ast.Assign):
                    for t in stmt.targets:
                        if isinstance(t, ast.Name):
                            if result is not None:
                                env[t.id] = result
                            else:
                                env.pop(t.id, None)

    def expr(self, node, env, fn, conds, stack):
        """Evaluates the calls that matter; returns what a name bound to `node` stands for."""
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if not isinstance(node, ast.Call):
            return None
        f = node.func
        # a local helper: _add_x_args(parser) -> follow it; its return value is the parser
        if isinstance(f, ast.Name) and f.id in self.funcs:
            self.function(self.funcs[f.id], stack)
            return ("parser", "options")
        if isinstance(f, ast.Name) and f.id == "ArgumentGroupFactory":
            return ("factory", node)
        if not isinstance(f, ast.Attribute):
            return None
        recv = self.expr(f.value, env, fn, conds, stack)
        if f.attr == "build_group" and recv and recv[0] == "factory":
            return self.factory(recv[1], node, fn, conds, env)
        if recv is None:
            return None
        if f.attr == "add_argument_group":
            title = _kw(node, "title", 0)
            return ("group", literal(title)[1] if title is not None else None)
        if f.attr == "add_mutually_exclusive_group":
            return ("group", recv[1])  # its actions land in the enclosing container
        if f.attr == "add_argument":
            self.add(node, recv[1], fn, conds)
            return None
        return None

    def factory(self, fac_call, build_call, fn, conds, env):
        cls_node = fac_call.args[0] if fac_call.args else _kw(fac_call, "src_cfg_class")
        exclude_node = _kw(fac_call, "exclude", 1)
        exclude = set()
        if isinstance(exclude_node, ast.Name) and env.get(exclude_node.id, ("",))[0] == "literal":
            exclude = set(env[exclude_node.id][1])
        elif exclude_node is not None:
            ok, value = literal(exclude_node)
            if not ok:
                raise SystemExit(f"{fn.name}: exclude= is not a literal list: {value}")
            exclude = set(value)
        title_node = _kw(build_call, "title", 1)
        title = literal(title_node)[1] if title_node is not None else None
        hit = self._class(cls_node, fn)
        if not hit:
            raise SystemExit(f"{fn.name}: cannot find dataclass {ast.unparse(cls_node)}")
        for a in Dataclass(self.src, hit[1], hit[2]).arguments(exclude):
            a["group"] = title
            a["source"]["function"] = fn.name
            a["source"]["factory_line"] = build_call.lineno
            if conds:
                a["source"]["condition"] = " and ".join(conds)
            self.args.append(a)
        return ("group", title)

    def _class(self, node, fn):
        # names imported inside the function body, then at module level
        for sub in ast.walk(fn):
            if isinstance(sub, ast.ImportFrom):
                for alias in sub.names:
                    if isinstance(node, ast.Name) and (alias.asname or alias.name) == node.id:
                        target = self.src.module_file(self.src._absolute(self.path, sub))
                        if target:
                            return self.src.resolve(target, alias.name)
        return self.src.resolve_expr(self.path, node)

    def add(self, call, group, fn, conds):
        names = []
        for a in call.args:
            ok, v = literal(a)
            if not ok:
                raise SystemExit(f"{fn.name}:{call.lineno}: option string not literal: {v}")
            names.append(v)
        kw = {k.arg: literal(k.value) for k in call.keywords if k.arg is not None}
        if any(k.arg is None for k in call.keywords):
            raise SystemExit(f"{fn.name}:{call.lineno}: **kwargs in add_argument")
        src = {"kind": "add_argument", "function": fn.name, "file": ARGS_PATH,
               "line": call.lineno}
        if conds:
            src["condition"] = " and ".join(conds)
        self.args.append({"option_strings": names, "kw": kw, "group": group, "source": src})


def _kw(call, name, pos=None):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if pos is not None and len(call.args) > pos:
        return call.args[pos]
    return None


# --------------------------------------------------------------------------- records


FLAG_ACTIONS = ("store_true", "store_false", "store_const", "append_const", "count",
                "argparse.BooleanOptionalAction", "BooleanOptionalAction")
"""Actions that take no value: argparse gives them nargs=0."""


def record(a):
    """One JSON row, with argparse's own rules for dest, action and the implicit default."""
    names, kw = a["option_strings"], a["kw"]
    longs = [n for n in names if n.startswith("--")]
    positional = not names[0].startswith("-")
    if "dest" in kw:
        dest = kw["dest"][1]
    elif positional:
        dest = names[0]
    else:
        dest = (longs or names)[0].lstrip("-").replace("-", "_")
    action = kw["action"][1] if "action" in kw else "store"
    if action in ("argparse.BooleanOptionalAction", "BooleanOptionalAction"):
        # argparse adds a '--no-' form of each long option itself
        names = [x for n in names for x in ([n, "--no-" + n[2:]] if n.startswith("--") else [n])]
    if "default" in kw:
        default_lit, default = kw["default"]
        explicit = True
    else:
        default_lit, explicit = True, False
        default = {"store_true": False, "store_false": True}.get(action)
    row = {
        "flag": (longs or names)[0],
        "option_strings": names,
        "dest": dest,
        "action": action,
        "type": kw["type"][1] if "type" in kw else None,
        "nargs": kw["nargs"][1] if "nargs" in kw else (0 if action in FLAG_ACTIONS else None),
        "default": default,
        "default_is_literal": default_lit,
        "default_explicit": explicit,
        "choices": kw["choices"][1] if "choices" in kw else None,
        "group": a["group"],
        "help": kw["help"][1] if "help" in kw else None,
    }
    if "choices" in kw and not kw["choices"][0]:
        row["choices_is_literal"] = False
    if "help" in kw and not kw["help"][0]:
        row["help_is_literal"] = False
    for extra in ("required", "const", "metavar"):
        if extra in kw:
            row[extra] = kw[extra][1]
    row["source"] = a["source"]
    return row


def classify(row):
    """{"class", "why"[, "field", "values"]} for a row, or None when nothing names it."""
    c = CLASSES.get(row["flag"])
    if c is None:
        c = GROUP_CLASSES.get(row["group"])
    if c is None:
        return None
    if c[0] == "modelled":
        out = {"class": c[0], "field": c[1], "why": c[2]}
        if len(c) > 3:
            out.update(c[3])
        return out
    return {"class": c[0], "why": c[1], **(c[2] if len(c) > 2 else {})}


def commit_of(root: Path, given: str | None) -> str:
    if given:
        try:  # expand an abbreviation where the checkout is a git work tree
            return subprocess.run(["git", "-C", str(root), "rev-parse", given], check=True,
                                  capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return given
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("not a git work tree: give --commit")


def build(root: Path, commit: str, command: str):
    src = Source(root)
    walker = Walker(src)
    rows = [record(a) for a in walker.run()]
    flags = [r["flag"] for r in rows]
    dup = sorted({f for f in flags if flags.count(f) > 1})
    if dup:
        raise SystemExit(f"the same flag twice: {dup}")
    uncalled = sorted(n for n in walker.funcs if n.startswith("_add_") and n not in walker.called)
    missing = []
    for r in rows:
        c = classify(r)
        if c is None:
            missing.append(r["flag"])
            continue
        r.update(c)
    if missing:
        print("unclassified (add them to CLASSES):", *missing, sep="\n  ", file=sys.stderr)
        raise SystemExit(2)
    stale = sorted(set(CLASSES) - set(flags))
    if stale:
        print("CLASSES names flags that are not on the parser:", *stale, sep="\n  ",
              file=sys.stderr)
        raise SystemExit(2)
    # key order: the brief's fields first, then the class, then where it comes from
    order = ["flag", "option_strings", "dest", "action", "type", "nargs", "default",
             "default_is_literal", "default_explicit", "choices", "choices_is_literal",
             "required", "const", "metavar", "group", "help", "help_is_literal",
             "class", "field", "values", "why", "neutral_when", "source"]
    rows = [{k: r[k] for k in order if k in r} for r in sorted(rows, key=lambda r: r["flag"])]
    counts = {k: sum(r["class"] == k for r in rows) for k in ("modelled", "neutral", "refused")}
    about = {
        "what": "Every command-line argument of Megatron-LM's megatron/training/arguments.py "
                "(its add_argument calls and the ArgumentGroupFactory groups it builds from "
                "dataclasses), classified for actmem's memory model: modelled, neutral or "
                "refused, each with why.",
        "repository": "NVIDIA/Megatron-LM",
        "commit": commit,
        "file": ARGS_PATH,
        "entry": ENTRY,
        "arguments": len(rows),
        "from_add_argument": sum(r["source"]["kind"] == "add_argument" for r in rows),
        "from_dataclasses": sum(r["source"]["kind"] == "dataclass" for r in rows),
        "conditional": sorted(r["flag"] for r in rows if "condition" in r["source"]),
        "counts": counts,
        "uncalled_add_functions": uncalled,
        "generated_by": command,
        "sorted_by": "flag",
        "classes": {
            "modelled": "decides bytes on the GPU and actmem represents it; 'field' names "
                        "actmem's quantity (a Job or ModelConfig field), 'why' says how when "
                        "it is derived; 'values', where present, lists the only values actmem "
                        "represents, the others being refused",
            "neutral": "changes no tensor on the GPU during training",
            "refused": "changes bytes in a way a model without it would get silently wrong; "
                       "a run that sets it away from its default is outside what actmem predicts",
        },
    }
    return {"about": about, "arguments": rows}


def report(data) -> str:
    a, rows = data["about"], data["arguments"]
    lines = ["# Megatron-LM arguments for actmem", "",
             f"Commit {a['commit']}, `{a['file']}`: {a['arguments']} arguments "
             f"({a['from_add_argument']} from add_argument calls, {a['from_dataclasses']} "
             f"from ArgumentGroupFactory dataclass groups).", "",
             f"Generated by `{a['generated_by']}`.", "", "## Counts per class", "",
             "| class | arguments |", "| --- | ---: |"]
    lines += [f"| {k} | {v} |" for k, v in a["counts"].items()]
    lines += ["", "## Modelled flags and their actmem field", "", "| flag | field | why |",
              "| --- | --- | --- |"]
    lines += [f"| `{r['flag']}` | {r['field']} | {r['why']} |" for r in rows
              if r["class"] == "modelled"]
    lines += ["", "## Refused flags", "", "| flag | why |", "| --- | --- |"]
    lines += [f"| `{r['flag']}` | {r['why']} |" for r in rows if r["class"] == "refused"]
    lines += ["", "## Unsure", ""]
    lines += [f"- `{flag}`: {why}" for flag, why in sorted(UNSURE.items())]
    if a["conditional"]:
        lines += ["", "## Added only under a condition", ""]
        lines += [f"- `{r['flag']}`: `{r['source']['condition']}`" for r in rows
                  if "condition" in r["source"]]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkout", type=Path, help="a Megatron-LM checkout (work tree)")
    p.add_argument("--commit", help="the checkout's commit, if it is not a git work tree")
    p.add_argument("--out", type=Path,
                   default=Path(__file__).resolve().parent.parent / "actmem" / "data"
                   / "megatron_arguments.json")
    p.add_argument("--report", type=Path, help="also write a Markdown summary here")
    ns = p.parse_args(argv)
    root = ns.checkout.resolve()
    if not (root / ARGS_PATH).is_file():
        raise SystemExit(f"{root / ARGS_PATH} not found")
    commit = commit_of(root, ns.commit)
    command = (f"python tools/megatron_arguments.py MEGATRON_LM --commit {commit}, "
               "MEGATRON_LM being a checkout (or an unpacked `git archive`) of "
               "NVIDIA/Megatron-LM at that commit")
    data = build(root, commit, command)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if ns.report:
        ns.report.parent.mkdir(parents=True, exist_ok=True)
        ns.report.write_text(report(data), encoding="utf-8")
    print(f"{ns.out}: {data['about']['arguments']} arguments, {data['about']['counts']}")


# --------------------------------------------------------------------------- classification

N, M, R = "neutral", "modelled", "refused"


def only(what: str) -> tuple[str, str]:
    """An option that does something only beside a refused one."""
    return (N, f"Only read together with {what}, which is refused; on its own it changes "
               "no tensor.")


def when_set(why: str, default: str = "its default is memory-neutral") -> tuple[str, str]:
    """Refused when given; harmless at its default."""
    return (R, f"Refused when set: {why}; {default}.")


def refused_with_a_map(why: str) -> tuple[str, str, dict]:
    """Refused when given while the unfused attention's softmax runs in
    PyTorch (it then saves an fp32 copy of the map); memory-neutral where no
    s x s map is kept or the fused masked-softmax kernel runs, which reads
    and writes 16 bits (``neutral_when``, read by actmem/run/job/megatron_args.py)."""
    return (R, f"Refused when set: {why}; its default, and any value under FlashAttention, "
               f"fused attention or the fused masked-softmax kernel, is memory-neutral.",
            {"neutral_when": "softmax_in_16_bits"})


LOGGING = "Logging and monitoring: it decides what is reported, not any tensor the step keeps."
GROUP_CLASSES: dict[str, tuple[str, str]] = {
    "logging": (N, LOGGING),
    "one logger": (N, LOGGING),
    "opentelemetry": (N, LOGGING),
    "straggler": (N, "Straggler detection times the ranks; it keeps no tensor of the step."),
    "workload inspector": (N, "An on-demand profiling server; it keeps no tensor of the step."),
    "profiling": (N, "Profiling and memory-history recording: host-side records, no tensor of "
                     "the step."),
    "ft_package": (N, "Fault-tolerance timeouts: they decide when a hung job is restarted, not "
                      "what the GPU holds."),
    "In-process restart": (N, "In-process restart after a failure: timeouts and restart policy, "
                              "not the tensors of a step."),
    "rerun engine": (N, "The rerun state machine re-runs a step to validate a result; each run "
                        "keeps what one step keeps."),
    "fault injector": (N, "Injects faults for resilience tests; no tensor of the step."),
    "msc": (N, "Multi-Storage Client for reading data and checkpoints: storage, not GPU memory."),
    "autoresume": (N, "Cluster autoresume polling: exit conditions, not GPU memory."),
    "RNG and initialization": (N, "Seeds and initial values: they change the numbers in the "
                                  "tensors, not their shapes or number."),
    "learning rate and weight decay": (N, "The learning-rate and weight-decay schedule: scalar "
                                          "values, not tensors."),
    "regularization": (N, "Optimizer hyper-parameters and gradient clipping: values, not the "
                          "tensors kept (the clipping norm is a transient scalar)."),
    "checkpointing": (N, "Checkpoint saving and loading: paths, formats and intervals; saving "
                         "runs between steps and keeps no tensor of the training step."),
    "validation": (N, "Evaluation schedule and datasets: when evaluation runs, not what the "
                      "training step keeps."),
    "inference": (N, "Read by the inference and RL-rollout engines, not by pretrain_gpt.py's "
                     "training step."),
    "rl": (N, "Read only by the RL loop (--perform-rl-step, refused); pretrain_gpt.py's "
              "training step ignores it."),
    "data and dataloader": (N, "Data paths, splits, dataset building and sample contents: "
                               "which tokens a sample holds, not its s tokens' tensors."),
    "tokenizer": (N, "How text is tokenized (flags, special ids, merges), not the vocabulary "
                     "size (the options that fix it are classed modelled)."),
    "vision": (R, "Refused when set: vision models (pretrain_vision_*.py) are not a GPT "
                  "training job actmem models; pretrain_gpt.py ignores it, so its default is "
                  "memory-neutral."),
    "biencoder": (R, "Refused when set: ICT/REALM biencoder models are not a GPT training job "
                     "actmem models; pretrain_gpt.py ignores it, so its default is "
                     "memory-neutral."),
}
"""The class of every argument of a group that has no entry of its own in CLASSES."""

_GTP = "GTP weight sharding (--tensor-parallel-num-weight-shards)"
_NCCLEP = "--moe-flex-dispatcher-backend ncclep"
_HYBRID = "Mamba/hybrid layers (--hybrid-layer-pattern, --is-hybrid-model)"
_CG = "--cuda-graph-impl"
_OFFLOAD = "--fine-grained-activation-offloading"
_TPO = (N, "Chooses which GEMMs overlap their communication through Transformer Engine's "
          "Userbuffers, and how (method, splits, bootstrap): the Userbuffers live outside "
          "PyTorch's allocator, and the Userbuffers GEMMs' workspaces are the ones "
          "--tp-comm-overlap counts.")
_DSA = "--experimental-attention-variant dsa"
_GDN = "--experimental-attention-variant gdn/gdn2"
_PAGED = "--moe-paged-stash"
_MHC = "--enable-mhc-connections"
_FP4 = "--fp4-format"
_PAO = "--use-precision-aware-optimizer"
_CPUOPT = "--optimizer-cpu-offload"

CLASSES: dict[str, tuple] = {
    # ---- model shape
    "--num-layers": (M, "L", "Transformer layers of the model."),
    "--encoder-num-layers": (M, "L", "Megatron-LM copies it to num_layers when --num-layers is "
                                     "absent (validate_args), so it is L."),
    "--decoder-num-layers": when_set("T5's decoder layers; an encoder-decoder model is not a GPT "
                                     "job actmem models"),
    "--hidden-size": (M, "h", "The hidden size h."),
    "--ffn-hidden-size": (M, "ffn_hidden_size", "The MLP width (None: 4h, or Megatron-LM's SwiGLU "
                                                "default, as actmem's None)."),
    "--num-attention-heads": (M, "a", "Attention heads a."),
    "--group-query-attention": (M, "kv_heads", "Without it Megatron-LM passes num_query_groups="
                                               "None, so kv_heads = a; with it kv_heads is "
                                               "--num-query-groups."),
    "--num-query-groups": (M, "kv_heads", "Key/value heads under --group-query-attention "
                                          "(ignored without it)."),
    "--kv-channels": (M, "kv_channels", "Each head's width d (None: h/a)."),
    "--max-position-embeddings": (M, "max_positions", "Rows of the learned position table "
                                                      "(positions='learned'); rotary positions "
                                                      "keep no table."),
    "--position-embedding-type": (M, "positions", "learned_absolute is positions='learned' and "
                                                  "rope is 'rotary'; yarn, mrope, relative (an "
                                                  "a x s x s bias) and none are refused.",
                                  {"values": ["learned_absolute", "rope"]}),
    "--use-rotary-position-embeddings": (M, "positions", "Deprecated alias: validate_args sets "
                                                         "position_embedding_type='rope', "
                                                         "positions='rotary'."),
    "--no-position-embedding": (N, "Deprecated; validate_args accepts it only with rope, where "
                                   "there is no table to drop."),
    "--make-vocab-size-divisible-by": (M, "make_vocab_size_divisible_by",
                                       "The vocabulary is padded to a multiple of this times t."),
    "--untie-embeddings-and-output-weights": (M, "tied_embeddings", "Untied: the output layer "
                                                                    "has its own V x h weight "
                                                                    "(tied_embeddings=False)."),
    "--normalization": (M, "norm", "LayerNorm is norm='layernorm', RMSNorm 'rmsnorm'.",
                        {"values": ["LayerNorm", "RMSNorm"]}),
    "--swiglu": (M, "activation", "activation='swiglu' (gated SiLU, fused bias-SwiGLU); "
                                  "without it 'gelu'."),
    "--openai-gelu": when_set("OpenAI's tanh GeLU runs outside the fused bias-GeLU kernel, so "
                              "autograd keeps its intermediates"),
    "--squared-relu": (M, "activation", "activation='squared_relu' (torch.pow(F.relu(x), 2), "
                                        "unfused: it needs --no-bias-gelu-fusion)."),
    "--quick-geglu": when_set("a gated quick-GeLU activation actmem's layer does not have"),
    "--disable-bias-linear": (M, "bias", "No biases on the linear layers (bias=False)."),
    "--add-qkv-bias": when_set("biases on Q, K and V alone, which actmem's bias=True/False "
                               "cannot say (as Qwen2 is refused in actmem.run.job.hf_config)"),
    "--hidden-dropout": (M, "dropout", "dropout=True when the dropouts are > 0 (each keeps a "
                                       "1-byte mask), False when both are 0; one without the "
                                       "other is not expressible."),
    "--attention-dropout": (M, "dropout", "dropout=True when the dropouts are > 0 (the attention "
                                          "dropout keeps its mask), False when both are 0; one "
                                          "without the other is not expressible."),
    "--qk-layernorm": (M, "qk_layernorm", "Norms on queries and keys, which keep their inputs; "
                                          "with --multi-latent-attention the latents' norms "
                                          "(actmem.layer.mla), which MLA needs here."),
    "--qk-l2-norm": when_set("Llama-4 L2 norms on queries and keys keep tensors actmem's "
                             "qk_layernorm rows do not describe"),
    "--window-size": (N, "With FlashAttention or fused attention a window changes which scores "
                         "are computed, not the tensors saved for backward (as "
                         "actmem.run.job.hf_config's sliding_window)."),
    "--window-attn-skip-freq": (N, "Which layers use the window: with FlashAttention or fused "
                                   "attention no layer keeps more either way."),
    "--yarn-original-max-position-embeddings": (N, "A YaRN frequency-correction value."),
    "--yarn-beta-fast": (N, "A YaRN frequency-correction value."),
    "--yarn-beta-slow": (N, "A YaRN frequency-correction value."),
    "--yarn-correction-range-round-to-int": (N, "Rounding of YaRN's correction range: values."),
    "--no-yarn-correction-range-round-to-int": (N, "Rounding of YaRN's correction range: "
                                                   "values."),
    "--relative-attention-num-buckets": only("--position-embedding-type relative"),
    "--relative-attention-max-distance": only("--position-embedding-type relative"),
    "--rotary-base": (N, "The rotary frequencies' base: values."),
    "--rotary-percent": (N, "How much of each head rotates; the fused RoPE keeps the same "
                            "tensors."),
    "--rotary-seq-len-interpolation-factor": (N, "Rotary position interpolation: values."),
    "--use-rope-scaling": (N, "Llama-3 frequency scaling: values of the rotary table."),
    "--rope-scaling-factor": (N, "Llama-3 frequency scaling: values of the rotary table."),
    "--no-rope-freq": (N, "Which layers skip RoPE; the fused RoPE keeps nothing of its own."),
    "--rope-type": (N, "rope or yarn frequencies (for MLA): values of the rotary table."),
    "--onnx-safe": (N, "ONNX-export workarounds; not used in training."),
    "--bert-no-binary-head": when_set("BERT's binary head; BERT is not a GPT job actmem "
                                      "models"),
    "--multi-latent-attention": (M, "multi_latent_attention", "Multi-latent attention in every "
                                                              "layer (actmem.layer.mla), with "
                                                              "--qk-layernorm and --q-lora-rank; "
                                                              "without either it is refused."),
    "--q-lora-rank": (M, "q_lora_rank", "MLA's query compression rank (None: no compression)."),
    "--kv-lora-rank": (M, "kv_lora_rank", "MLA's key/value compression rank."),
    "--qk-head-dim": (M, "qk_head_dim", "MLA's per-head query/key width without rotary part."),
    "--qk-pos-emb-head-dim": (M, "qk_pos_emb_head_dim", "MLA's per-head rotary width."),
    "--v-head-dim": (M, "v_head_dim", "MLA's per-head value width."),
    "--rotary-scaling-factor": (N, "YaRN scaling of the rotary frequencies: values."),
    "--mscale": (N, "YaRN attention-scale value."),
    "--mscale-all-dim": (N, "YaRN attention-scale value."),
    "--cache-mla-latents": (N, "Inference: caches MLA latents for flash decoding."),
    "--mla-down-proj-fusion": when_set("fuses MLA's q/kv down-projections and the input norm "
                                       "into one module, whose saved tensors actmem.layer.mla "
                                       "has not been checked against"),
    # ---- sequence and batch
    "--seq-length": (M, "s", "The sequence length s."),
    "--encoder-seq-length": (M, "s", "Megatron-LM copies it to seq_length when --seq-length is "
                                     "absent (validate_args), so it is s."),
    "--decoder-seq-length": when_set("T5's decoder length; an encoder-decoder model is not a "
                                     "GPT job actmem models"),
    "--micro-batch-size": (M, "b", "The micro-batch size b."),
    "--global-batch-size": (M, "m", "Derived: m = global batch / (micro batch x data-parallel "
                                    "size) micro-batches per step (default: one)."),
    "--batch-size": (N, "Removed: validate_args rejects it (use --micro-batch-size)."),
    "--rampup-batch-size": (N, "Ramps the number of micro-batches up to the global batch's; "
                               "fewer micro-batches never keep more, so the full batch's step "
                               "is the peak actmem computes."),
    "--step-batch-size-schedule": (N, "A step-wise global batch schedule: fewer micro-batches "
                                      "never keep more, so the largest batch's step is the "
                                      "peak actmem computes for its m."),
    "--decrease-batch-size-if-needed": (N, "Can only lower the global batch (so m); the step "
                                           "keeps the same or less."),
    # ---- parallelism
    "--tensor-model-parallel-size": (M, "t", "Tensor-parallel size t."),
    "--tensor-parallel-num-weight-shards": when_set(
        "GTP shards each weight further than t and re-gathers it around each GEMM, bytes "
        "actmem does not model", "its default (None) is t shards, no GTP"),
    "--pipeline-model-parallel-size": (M, "p", "Pipeline-parallel size p."),
    "--context-parallel-size": (M, "cp", "Context-parallel size cp."),
    "--cp-comm-type": (M, "cp_comm_type", "One type for all layers (p2p, a2a, allgather, "
                                          "a2a+p2p); a list of different types per layer is "
                                          "refused.",
                       {"values": ["p2p", "a2a", "allgather", "a2a+p2p"]}),
    "--hierarchical-context-parallel-sizes": (M, "hierarchical_context_parallel_sizes",
                                              "The a2a and p2p group sizes of a2a+p2p."),
    "--hybrid-context-parallel": when_set("balances packed variable-length samples across CP "
                                          "ranks, so a rank's tokens are not s/cp"),
    "--max-seqlen-per-dp-cp-rank": only("--hybrid-context-parallel"),
    "--expert-model-parallel-size": (M, "ep", "Expert-parallel size ep."),
    "--expert-tensor-parallel-size": (M, "etp", "Expert tensor-parallel size (None: t)."),
    "--expert-tensor-parallel-num-weight-shards": when_set(
        "expert GTP shards expert weights beyond etp and re-gathers them, bytes actmem does "
        "not model", "its default (None) is etp shards, no GTP"),
    "--sequence-parallel": (M, "sequence_parallel", "Sequence parallelism splits the norm and "
                                                    "dropout rows over t."),
    "--model-parallel-size": (N, "Removed: validate_args rejects it (use "
                                 "--tensor-model-parallel-size)."),
    "--num-layers-per-virtual-pipeline-stage": (M, "v", "Derived: v = L / (p x n) model chunks "
                                                        "per GPU, schedule='interleaved'."),
    "--num-virtual-stages-per-pipeline-rank": (M, "v", "Model chunks per GPU, "
                                                       "schedule='interleaved'."),
    "--decoder-first-pipeline-num-layers": (M, "decoder_first_pipeline_num_layers",
                                            "Layers of the first pipeline stage."),
    "--decoder-last-pipeline-num-layers": (M, "decoder_last_pipeline_num_layers",
                                           "Layers of the last pipeline stage."),
    "--account-for-embedding-in-pipeline-split": (M, "account_for_embedding_in_pipeline_split",
                                                  "The embedding counts as a layer when the "
                                                  "layers are split."),
    "--account-for-loss-in-pipeline-split": (M, "account_for_loss_in_pipeline_split",
                                             "The loss counts as a layer when the layers are "
                                             "split."),
    "--pipeline-model-parallel-layout": (M, "stage_layers", "Each virtual stage's decoder "
                                         "layers, per pipeline rank and chunk (and v), with the "
                                         "embedding first and the loss, and any MTP modules, "
                                         "last (actmem.run.job.megatron_layout)."),
    "--microbatch-group-size-per-virtual-pipeline-stage": (
        M, "microbatch_group_size_per_vp_stage", "The interleaved schedule's group of "
        "micro-batches per chunk (default p), which decides its order and so how many "
        "micro-batches are in flight (actmem.simulate_schedule)."),
    "--no-overlap-p2p-communication": (N, "Whether pipeline sends/receives overlap compute: it "
                                          "changes when the s*b*h messages move, not which "
                                          "tensors exist."),
    "--overlap-p2p-communication-warmup-flush": (N, "Overlaps pipeline messages in warm-up and "
                                                    "flush: changes when, not how much."),
    "--use-ring-exchange-p2p": (N, "Another kernel for the same pipeline messages."),
    "--pipeline-model-parallel-comm-backend": (N, "NCCL or UCC for the same pipeline "
                                                  "messages."),
    "--use-tp-pp-dp-mapping": (N, "The order ranks are grouped in, not what each holds."),
    # ---- precision
    "--bf16": (M, "precision", "precision='bf16' (bf16 parameters and activations, fp32 "
                               "gradients and main weights); neither --bf16 nor --fp16 is "
                               "'fp32'."),
    "--fp16": (M, "precision", "precision='fp16': activations as bf16's, a 16-bit gradient "
                               "buffer and the optimizer step's fp32 copies of it "
                               "(actmem.run.moments.precision); loss scaling keeps scalars."),
    "--accumulate-allreduce-grads-in-fp32": (M, "accumulate_allreduce_grads_in_fp32",
                                             "The gradient buffer's dtype: fp32 (4 bytes) or, "
                                             "off under --fp16, 16 bits with fp32 copies at "
                                             "the optimizer step; --bf16 turns it on by itself."),
    "--grad-reduce-in-bf16": (M, "accumulate_allreduce_grads_in_fp32",
                              "With --bf16 it turns accumulate_allreduce_grads_in_fp32 off: a "
                              "bf16 gradient buffer (2 bytes) and the optimizer step's fp32 "
                              "copies of it."),
    "--loss-scale": (N, "fp16 loss scaling: a scalar."),
    "--initial-loss-scale": (N, "fp16 loss scaling: a scalar."),
    "--min-loss-scale": (N, "fp16 loss scaling: a scalar."),
    "--loss-scale-window": (N, "fp16 loss scaling: a scalar."),
    "--hysteresis": (N, "fp16 loss scaling: a scalar."),
    "--attention-softmax-in-fp32": refused_with_a_map(
        "where the unfused attention's softmax runs in PyTorch it saves an fp32 map"),
    "--apply-query-key-layer-scaling": refused_with_a_map(
        "it turns on attention_softmax_in_fp32, so a softmax run in PyTorch keeps an fp32 map"),
    "--fp16-lm-cross-entropy": (N, "GPTModel stores it (gpt_model.py: "
                                   "self.fp16_lm_cross_entropy) and nothing on the GPT path "
                                   "reads it: the loss keeps fp32 logits either way."),
    "--output-logit-dtype": when_set("the output GEMM writes logits in this dtype, so the loss's "
                                     "fp32 copy is made or not made as actmem does not assume",
                                     "its default (the input's dtype) is modelled"),
    "--fp32-residual-connection": when_set("the residual stream is kept in fp32"),
    "--fp8-format": (M, "fp8", "Transformer Engine FP8 linears (e4m3 or hybrid): 1-byte saved "
                               "inputs and FP8 weight copies, in dense and MoE layers (the "
                               "experts' grouped GEMMs per local expert; actmem.layer.fp8).",
                     {"values": ["e4m3", "hybrid"]}),
    "--fp8-recipe": (M, "fp8_recipe", "Delayed scaling (the default) keeps scales and amax "
                                      "histories per TE module; tensorwise (current scaling) "
                                      "keeps none, and its output projection saves its 16-bit "
                                      "input (actmem.layer.fp8); blockwise keeps that too, an "
                                      "fp32 scale per 1x128 block of a saved input and both "
                                      "copies of each weight with their 128x128 blocks' scales "
                                      "(actmem.layer.fp8_scales); mxfp8 too, with an E8M0 "
                                      "byte per 32 elements of each copy (Blackwell only); "
                                      "custom is refused.",
                     {"values": ["delayed", "tensorwise", "blockwise", "mxfp8"]}),
    "--fp8-quantizer-factory": only("--fp8-recipe custom"),
    "--fp8-margin": (N, "A value in FP8 scale computation."),
    "--fp8-interval": (N, "Ignored by Transformer Engine since 1.8."),
    "--fp8-amax-history-len": when_set("each FP8 module keeps an amax history of this many rows "
                                       "(actmem.layer.fp8 counts one)",
                                       "its default (1) is modelled"),
    "--fp8-amax-compute-algo": (N, "How the scale is picked from the history: values."),
    "--no-fp8-wgrad": when_set("the weight-gradient GEMMs run in higher precision, so TE keeps "
                               "16-bit copies of the inputs beside the 1-byte ones"),
    "--fp8-output-proj": only("--fp8-recipe mxfp8"),
    "--first-last-layers-bf16": when_set("some layers run in bf16 while actmem's fp8 applies to "
                                         "every layer"),
    "--num-layers-at-start-in-bf16": only("--first-last-layers-bf16"),
    "--num-layers-at-end-in-bf16": only("--first-last-layers-bf16"),
    "--fp8-param-gather": (M, "fp8_param_gather", "The linear layers' parameters are FP8 "
                                                  "tensors (1 byte, and Hopper's transpose), "
                                                  "with no cached FP8 copy "
                                                  "(actmem.layer.fp8_weights: fp8_state_bytes); dense "
                                                  "models only (refused with experts)."),
    "--fp4-param-gather": when_set("FP4 parameters replace the bf16 ones"),
    "--fp4-format": when_set("FP4 (NVFP4) linears, which actmem does not model"),
    "--fp4-recipe": only(_FP4),
    "--fp4-quantizer-factory": only(_FP4),
    "--te-precision-config-file": when_set("per-module precision overrides of Transformer "
                                           "Engine"),
    "--kitchen-config-file": when_set("Kitchen quantization of the linear layers"),
    "--kitchen-recipe-number": when_set("a Kitchen quantization recipe for the linear layers"),
    "--use-kitchen-attention": when_set("Kitchen's attention instead of Transformer Engine's"),
    "--kitchen-attention-backend": only("--use-kitchen-attention"),
    "--reuse-grad-buf-for-mxfp8-param-ag": only("--fp8-recipe mxfp8 with --fp8-param-gather"),
    "--mamba-training-ssm-states-dtype": only(_HYBRID),
    "--disable-bf16-reduced-precision-matmul": (N, "A cuBLAS accumulation setting: numerics "
                                                   "only."),
    # ---- recomputation and offloading
    "--recompute-granularity": (M, "recompute", "'full' or 'selective' (none when absent).",
                                {"values": ["full", "selective"]}),
    "--recompute-method": (M, "recompute", "With full recomputation, 'uniform' is actmem's "
                                           "groups of recompute_num_layers; 'block' (the first "
                                           "layers of each stage only) is refused.",
                           {"values": ["uniform"]}),
    "--recompute-num-layers": (M, "recompute_num_layers", "Layers per checkpointed group "
                                                          "(uniform)."),
    "--recompute-modules": (M, "recompute_modules", "The selectively recomputed modules; "
                                                    "gdn_norm_out, gdp_in_proj, gdp_qkv and mhc "
                                                    "are refused.",
                            {"values": ["core_attn", "layernorm", "mlp", "moe_act", "moe",
                                        "shared_experts", "mla_up_proj"]}),
    "--recompute-activations": (M, "recompute", "Deprecated: validate_args sets "
                                                "recompute_granularity='selective'."),
    "--checkpoint-activations": (N, "Removed: validate_args exits when it is given."),
    "--moe-layer-recompute": (M, "recompute_modules", "Deprecated: TransformerConfig turns it "
                                                      "into selective recomputation with 'moe' "
                                                      "in recompute_modules."),
    "--distribute-saved-activations": when_set("the checkpointed inputs are split over the "
                                               "tensor-parallel ranks"),
    "--cpu-offloading-num-layers": (M, "cpu_offloading_num_layers",
                                    "The first n layers' saved tensors go to pinned host memory "
                                    "(actmem.run.moments.offload)."),
    "--cpu-offloading-retain-pinned-cpu-buffers": (N, "Keeps the pinned host buffers between "
                                                      "iterations: host memory."),
    "--fine-grained-activation-offloading": when_set("module-level activation offloading, "
                                                     "which actmem does not model"),
    "--offload-modules": only(_OFFLOAD),
    "--min-offloaded-tensor-size": only(_OFFLOAD),
    "--delay-offload-until-cuda-graph": only(_OFFLOAD),
    "--delta-offload-bytes-across-pp-ranks": only(_OFFLOAD),
    "--activation-offload-fraction": only(_OFFLOAD),
    "--fine-grained-offloading-max-inflight-offloads": only(_OFFLOAD),
    "--mlp-chunks-for-training": when_set("the MLP runs in chunks along the sequence, which "
                                          "changes its working set", "its default (1) is "
                                                                     "memory-neutral"),
    "--mlp-chunks-for-prefill": (N, "Inference prefill only."),
    # ---- attention and Transformer Engine
    "--transformer-impl": (M, "transformer_engine", "transformer_engine is "
                                                    "transformer_engine=True (its workspace "
                                                    "allocated), local is False; "
                                                    "inference_optimized is refused.",
                           {"values": ["transformer_engine", "local"]}),
    "--attention-backend": (M, "flash_attention", "Derived: flash, fused and auto keep no s x s "
                                                  "attention map (flash_attention=True); "
                                                  "unfused and local keep it (False). flash, "
                                                  "and auto where Transformer Engine picks "
                                                  "flash-attn, keep the output twice "
                                                  "(flash_output_copy)."),
    "--use-flash-attn": (M, "flash_attention", "FlashAttention: no s x s attention map kept."),
    "--flash-attention-version": (N, "FlashAttention 2, 3 and 4 save the same Q, K, V, output "
                                     "and log-sum-exp."),
    "--softmax-type": when_set("off-by-one and learnable softmax add sink terms and can move "
                               "attention off FlashAttention", "its default (vanilla) is "
                                                               "memory-neutral"),
    "--no-masked-softmax-fusion": when_set("with unfused attention the unfused masked softmax "
                                           "keeps other tensors", "its default, and any value "
                                           "under FlashAttention or fused attention, is "
                                           "memory-neutral"),
    "--no-bias-gelu-fusion": (N, "Unfused, GeLU saves the biased fc1 output, the same size as "
                                 "the fused kernel's saved input; no extra tensor."),
    "--no-bias-swiglu-fusion": when_set("unfused SwiGLU also keeps SiLU's output for the "
                                        "multiplication, beyond the fused kernel's input"),
    "--no-bias-dropout-fusion": (N, "Unfused bias-dropout-add keeps the same 1-byte dropout "
                                    "mask as the fused one."),
    "--no-rope-fusion": (M, "apply_rope_fusion", "The unfused rotary embedding keeps cos and "
                                                "sin in every layer (actmem.layer.rope); "
                                                "without rotary positions Megatron-LM turns "
                                                "the fusion off itself."),
    "--no-persist-layer-norm": (N, "Another LayerNorm kernel with the same saved tensors."),
    "--fused-residual-rmsnorm": when_set("fuses the residual add into TE's RMSNorm backward, "
                                         "whose saved tensors actmem has not checked"),
    "--use-transformer-engine-op-fuser": when_set("TE's operation fuser saves other tensors "
                                                  "than the modules actmem's ledger follows"),
    "--use-te-activation-func": when_set("TE's activation modules replace Megatron-LM's fused "
                                         "ones, whose saved tensors the ledger follows"),
    "--disable-jit-fuser": (N, "Turns off TorchScript fusion of Megatron-LM's fused kernels, "
                               "which are custom autograd functions saving the same tensors."),
    "--tp-comm-overlap": (M, "tp_comm_overlap", "Transformer Engine's Userbuffers GEMMs keep "
                                                "three more cuBLASLt workspaces in PyTorch's "
                                                "allocator; the Userbuffers themselves are "
                                                "cudaMalloc'ed outside it "
                                                "(actmem.run.moments.framework: workspace_bytes)."),
    "--tp-comm-overlap-cfg": _TPO,
    "--no-tp-comm-bulk-wgrad": _TPO,
    "--no-tp-comm-bulk-dgrad": _TPO,
    "--no-tp-comm-overlap-ag": _TPO,
    "--no-tp-comm-overlap-rs": _TPO,
    "--tp-comm-overlap-rs-dgrad": _TPO,
    "--no-tp-comm-split-ag": _TPO,
    "--no-tp-comm-split-rs": _TPO,
    "--tp-comm-bootstrap-backend": _TPO,
    "--deterministic-mode": (M, "cublas_workspace_config", "Derived: sets "
                             "CUBLAS_WORKSPACE_CONFIG=:4096:8 and NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 "
                             "where the launch does not (megatron/training/determinism.py), so "
                             "PyTorch's cuBLAS workspaces are 32 MiB and, on compute capability "
                             "10.0 and newer, Transformer Engine runs flash-attn "
                             "(flash_output_copy)."),
    "--batch-invariant-mode": when_set("batch-invariant kernels change GEMM workspaces "
                                       "(te_native starves cuBLAS of its workspace) and kernels"),
    "--batch-invariant-backend": only("--batch-invariant-mode"),
    "--apply-residual-connection-post-layernorm": (N, "The residual branch starts after the "
                                                      "norm: the same tensors are saved."),
    "--apply-layernorm-1p": (N, "Zero-centred gamma: the same norm tensors."),
    "--norm-epsilon": (N, "A value in the norms."),
    "--rotary-interleaved": (N, "Which pairs rotate: the same tensors."),
    "--glu-linear-offset": (N, "An offset in the GLU: values."),
    "--activation-func-clamp-value": when_set("the clamp inside the activation keeps what its "
                                              "backward needs"),
    "--attention-output-gate": when_set("a gate on the attention output adds a linear and the "
                                        "tensors its backward needs"),
    "--qk-clip": (N, "Rescales query/key weights after the optimizer step from per-head maximum "
                     "logits, a vector per layer."),
    "--qk-clip-alpha": (N, "A value of qk-clip."),
    "--qk-clip-threshold": (N, "A value of qk-clip."),
    "--experimental-attention-variant": when_set("gated-delta-net or DeepSeek sparse attention "
                                                 "layers, which actmem does not model"),
    "--linear-attention-freq": when_set("linear-attention layers, which actmem does not model"),
    "--dsa-indexer-n-heads": only(_DSA),
    "--dsa-indexer-head-dim": only(_DSA),
    "--dsa-indexer-topk": only(_DSA),
    "--dsa-indexer-topk-freq": only(_DSA),
    "--dsa-indexer-skip-topk-offset": only(_DSA),
    "--dsa-indexer-loss-coeff": only(_DSA),
    "--dsa-indexer-use-sparse-loss": only(_DSA),
    "--dsa-kernel-backend": only(_DSA),
    "--dsa-indexer-rope-interleaved": only(_DSA),
    "--no-dsa-indexer-rotate-activation": only(_DSA),
    "--no-dsa-indexer-scoring-relu": only(_DSA),
    "--dsa-indexer-k-norm-epsilon": only(_DSA),
    "--dsa-indexer-k-norm-fp32": only(_DSA),
    "--linear-conv-kernel-dim": only(_GDN),
    "--linear-key-head-dim": only(_GDN),
    "--linear-value-head-dim": only(_GDN),
    "--linear-num-key-heads": only(_GDN),
    "--linear-num-value-heads": only(_GDN),
    "--enable-mhc-connections": when_set("several residual streams per layer (mHC), which "
                                         "actmem does not model"),
    "--mhc-num-residual-streams": only(_MHC),
    "--mhc-sinkhorn-iterations": only(_MHC),
    "--mhc-init-gating-factor": only(_MHC),
    "--mhc-recompute-layer-num": only(_MHC),
    "--no-clone-scatter-output-in-embedding": when_set(
        "without the clone the sequence-parallel slice keeps the whole s*b*h embedding output "
        "alive", "its default (clone) is what actmem models"),
    "--mrope-section": only("--position-embedding-type mrope"),
    # ---- loss
    "--cross-entropy-loss-fusion": (M, "cross_entropy_loss_fusion",
                                    "The vocab-parallel loss compiled by torch.compile: its "
                                    "backward holds an fp32 clone of the softmax "
                                    "(actmem.loss_bytes)."),
    "--cross-entropy-fusion-impl": (M, "cross_entropy_loss_fusion",
                                    "Which fused loss: 'native' is modelled; Megatron-LM itself "
                                    "refuses 'te' with the fusion (arguments.py: disabled for "
                                    "stability).", {"values": ["native"]}),
    "--calculate-per-token-loss": (N, "Normalises the loss by the count of non-padded tokens "
                                      "(a sum and a count), not the logits or gradients."),
    "--use-mup": when_set("MuP multiplies the embedding output and the logits by constants, "
                          "each product a new tensor beside the one it scales"),
    "--mup-output-mult": when_set("a multiplier other than 1 makes a scaled copy of the logits "
                                  "(LanguageModule), s*b*V/t more at the loss", "its default "
                                  "(1.0) is memory-neutral"),
    "--mup-width-mult": only("--use-mup"),
    "--mup-base-hidden-size": only("--use-mup"),
    "--mup-embedding-mult": only("--use-mup"),
    "--mup-base-head-dim": only("--use-mup"),
    "--mup-attn-scale-power": only("--use-mup"),
    # ---- MTP, hybrid, heterogeneous
    "--mtp-num-layers": (M, "mtp_num_layers", "D multi-token prediction modules on the last "
                                              "stage: a layer, norms, eh_proj and a loss each "
                                              "(actmem.run.moments.mtp)."),
    "--mtp-loss-scaling-factor": (N, "A float the D losses are multiplied by before "
                                     "MTPLossAutoScaler keeps them; the scaled loss is counted "
                                     "whatever the factor."),
    "--mtp-use-repeated-layer": when_set("one module's weights run D times: fewer parameters "
                                         "than D modules, which actmem counts"),
    "--mtp-detach-heads": when_set("detached heads make no gradient for the embedding and "
                                   "the output weight from the modules"),
    "--mtp-hsm": when_set("hidden-state mixing keeps the earlier depths' states and a "
                          "stack of them"),
    "--mtp-standalone": (N, "Set by Megatron-LM from --pipeline-model-parallel-layout, not by "
                            "the user; a layout that makes it True is refused there."),
    "--mtp-hybrid-override-pattern": only(_HYBRID),
    "--is-hybrid-model": when_set("Mamba/hybrid layers, which actmem does not model"),
    "--hybrid-layer-pattern": when_set("Mamba, GDN, DSA and MoE layers in a pattern, which "
                                       "actmem does not model"),
    "--hybrid-override-pattern": when_set("deprecated alias of --hybrid-layer-pattern"),
    "--mamba-state-dim": only(_HYBRID),
    "--mamba-head-dim": only(_HYBRID),
    "--mamba-num-groups": only(_HYBRID),
    "--mamba-num-heads": only(_HYBRID),
    "--gdp-num-householder": only(_HYBRID),
    "--disable-mamba-mem-eff-path": only(_HYBRID),
    "--gdp-cutedsl-kernel": only(_HYBRID),
    "--gdp-num-chunk-states-to-recompute": only(_HYBRID),
    "--heterogeneous-layers-config-path": when_set("layers of different shapes from a JSON "
                                                   "config (heterogeneous layer specs)"),
    "--heterogeneous-layers-config-encoded-json": when_set("layers of different shapes from "
                                                           "an encoded JSON config"),
    "--spec": when_set("a user module builds the layers, so their tensors are not the ones "
                       "actmem's ledger follows"),
    "--yaml-cfg": when_set("arguments come from a YAML file instead of these flags"),
    "--enable-experimental": (N, "A switch other flags consult; with --moe-token-dispatcher-"
                                 "type flex and --moe-permute-fusion it turns on a fused "
                                 "multi-hot conversion, refused there (actmem.run.job."
                                 "megatron_fields); elsewhere it changes no tensor actmem "
                                 "counts."),
    # ---- MoE
    "--num-experts": (M, "num_experts", "Routed experts per MoE layer."),
    "--moe-layer-freq": (M, "moe_layer_freq", "Which layers are MoE (an int N or a 0/1 list)."),
    "--moe-router-topk": (M, "moe_router_topk", "Experts per token k."),
    "--moe-ffn-hidden-size": (M, "moe_ffn_hidden_size", "Each routed expert's width."),
    "--moe-shared-expert-intermediate-size": (M, "moe_shared_expert_intermediate_size",
                                              "The shared experts' total width."),
    "--moe-expert-capacity-factor": (M, "moe_expert_capacity_factor",
                                     "Caps tokens per expert (None: dropless)."),
    "--moe-pad-expert-input-to-capacity": (M, "moe_pad_expert_input_to_capacity",
                                           "Every expert's input padded to the capacity."),
    "--moe-aux-loss-coeff": (M, "moe_aux_loss_coeff", "One coefficient > 0 keeps the router's "
                                                      "fp32 softmax over all E; a list of "
                                                      "several is refused."),
    "--moe-token-dispatcher-type": (M, "moe_token_dispatcher_type",
                                    "The all-to-all, all-gather and flex (DeepEP) dispatchers "
                                    "keep different permutation tensors and buffers "
                                    "(actmem.layer.moe, actmem.layer.moe_flex, "
                                    "actmem.run.moments.moe_timeline); memory-neutral for "
                                    "dense models.",
                                    {"values": ["alltoall", "allgather", "flex"]}),
    "--moe-router-load-balancing-type": (M, "moe_router_load_balancing_type",
                                         "aux_loss, seq_aux_loss and global_aux_loss keep the "
                                         "softmax over all E when --moe-aux-loss-coeff > 0; "
                                         "sinkhorn keeps the scores of all E and the routing "
                                         "map; none keeps neither; quantile_balancing and "
                                         "lists of several are refused.",
                                         {"values": ["aux_loss", "seq_aux_loss",
                                                     "global_aux_loss", "sinkhorn", "none"]}),
    "--moe-router-score-function": (M, "moe_router_score_function", "softmax keeps the "
                                    "softmax of the top k (or, with --moe-router-pre-softmax, of "
                                    "all E); sigmoid keeps the fp32 sigmoid of all E, the k chosen "
                                    "scores and their sums (actmem.layer.router); sqrtsoftplus "
                                    "is refused.", {"values": ["softmax", "sigmoid"]}),
    "--moe-router-pre-softmax": (M, "moe_router_pre_softmax", "The softmax over all E experts "
                                 "before top-k keeps 4sbE bytes, not the 4sbk of the softmax "
                                 "after it; ignored by Megatron-LM with the sigmoid."),
    "--moe-router-dtype": (M, "moe_router_dtype", "The routing probabilities' precision, "
                                                  "which the dispatcher and the experts keep "
                                                  "(the router saves its bf16 input either way).",
                           {"values": ["fp32", "fp64"]}),
    "--moe-router-num-groups": (M, "moe_router_num_groups", "The groups of group-limited "
                                "routing, which keeps an N x E bool mask of the experts "
                                "outside the chosen groups (actmem.layer.router)."),
    "--moe-router-group-topk": (M, "moe_router_group_topk", "The groups each token may use "
                                "(group-limited routing, with --moe-router-num-groups)."),
    "--moe-router-topk-scaling-factor": (N, "Multiplies the probabilities by a Python constant, "
                                            "which autograd saves nothing for."),
    "--moe-router-enable-expert-bias": (M, "moe_router_enable_expert_bias", "With the sigmoid, "
                                        "the top k is picked on a biased copy and the scores "
                                        "gathered, so group-limited routing's mask is not kept; "
                                        "the E-element bias buffer is left out."),
    "--moe-router-bias-update-rate": (N, "A value of the expert-bias update."),
    "--moe-router-quantile-balancing-ema": only("--moe-router-load-balancing-type "
                                                "quantile_balancing"),
    "--moe-router-force-load-balancing": (N, "Replaces the router's logits by random ones of "
                                             "the same shape (balanced routing, actmem's "
                                             "expectation)."),
    "--moe-router-force-biased": (N, "Adds a random bias to the logits: the same shapes."),
    "--moe-router-padding-for-quantization": when_set("pads each expert's tokens to a multiple "
                                                      "of 16/32"),
    "--moe-router-padding-for-fp8": when_set("alias of --moe-router-padding-for-quantization: "
                                             "pads each expert's tokens"),
    "--moe-router-fusion": when_set("the fused top-k and aux-loss kernels save other tensors "
                                    "than the ledger's unfused router"),
    "--moe-enable-routing-replay": when_set("records the routing decisions of every layer for "
                                            "replay"),
    "--moe-z-loss-coeff": when_set("the z-loss keeps the router logits for its logsumexp's "
                                   "backward"),
    "--moe-input-jitter-eps": when_set("input jitter multiplies by a noise tensor that autograd "
                                       "keeps"),
    "--moe-shared-expert-gate": when_set("a gate on the shared experts adds a linear and its "
                                         "saved tensors"),
    "--moe-shared-expert-overlap": when_set("overlapping the shared experts with the dispatch "
                                            "makes their tensors alive beside the dispatch "
                                            "buffers, a timing actmem's MoE timeline does not "
                                            "follow"),
    "--use-grouped-gemm-for-shared-expert": when_set("TE's grouped SwiGLU path for the shared "
                                                     "experts saves other tensors"),
    "--moe-shared-expert-glu-interleave-size": (N, "The layout of the same GLU activations."),
    "--use-grouped-gemm-for-dense-mlp": when_set("the dense MLP on TE's grouped-GEMM fused path "
                                                 "saves other tensors"),
    "--moe-grouped-gemm": (M, "moe_grouped_gemm", "TEGroupedMLP saves the same bytes as "
                                                  "SequentialMLP (actmem.layer.moe), but "
                                                  "Transformer Engine's grouped GEMM keeps four "
                                                  "more cuBLASLt workspaces."),
    "--moe-use-grouped-tensor": when_set("TE's GroupedTensor path pads expert segments"),
    "--moe-single-grouped-weight": (N, "Stores the same expert weights as one grouped "
                                       "parameter."),
    "--moe-single-grouped-bias": (N, "Stores the same expert biases as one grouped parameter."),
    "--moe-enable-deepep": (N, "Deprecated: Megatron-LM requires --moe-token-dispatcher-type "
                               "flex with it and sets the deepep backend, flex's default "
                               "(transformer_config.py)."),
    "--moe-flex-dispatcher-backend": (M, "moe_flex_dispatcher_backend",
                                      "DeepEP (the default) and HybridEP keep different "
                                      "handles and buffers (actmem.layer.moe_flex, "
                                      "actmem.layer.moe_hybridep), each within one 8-GPU "
                                      "node; NCCL-EP keeps others and is refused.",
                                      {"values": ["deepep", "hybridep"]}),
    "--moe-permute-fusion-into-hybridep": when_set(
        "HybridEP's fused permutation keeps a [N*W, L] int32 map and a chunk layout in its "
        "handle instead of the row map actmem counts (actmem.layer.moe_hybridep)"),
    "--moe-hybridep-pad-uneven-dispatch-inputs": when_set(
        "pads each rank's tokens to the group's largest, a multiple of 64, which sizes "
        "HybridEP's buffers and the manager's maps"),
    "--moe-flex-dispatcher-num-sms": when_set("DeepEP's channels (half its SMs) size its buffer "
                                              "and handle; actmem counts Megatron-LM's 20 SMs",
                                              "its default (20 for DeepEP) is modelled"),
    "--moe-deepep-num-sms": when_set("deprecated alias of --moe-flex-dispatcher-num-sms: "
                                     "DeepEP's channels size its buffer and handle",
                                     "its default (20 for DeepEP) is modelled"),
    "--moe-hybridep-num-sms": when_set("deprecated alias of --moe-flex-dispatcher-num-sms "
                                       "(transformer_config.py): DeepEP's channels size its "
                                       "buffer and handle", "its default is modelled"),
    "--moe-hybridep-num-blocks-permute": (N, "Thread blocks of HybridEP's permute kernel: a "
                                             "launch setting, no buffer is sized by it "
                                             "(csrc/hybrid_ep/extension/permute.cu)."),
    "--moe-hybridep-num-blocks-unpermute": (N, "Thread blocks of HybridEP's unpermute kernel: "
                                               "a launch setting, no buffer is sized by it "
                                               "(csrc/hybrid_ep/extension/permute.cu)."),
    "--moe-hybridep-num-sms-preprocessing": when_set(
        "sizes HybridEP's metadata scratch, SMs x (W + L) x 8 bytes; actmem counts "
        "Megatron-LM's 108", "its default (108) is modelled"),
    "--moe-ncclep-zero-copy": only(_NCCLEP),
    "--moe-dispatch-fwd-dtype": only(_NCCLEP),
    "--moe-combine-bwd-dtype": only(_NCCLEP),
    "--moe-per-layer-logging": (N, LOGGING),
    "--moe-pad-experts-for-cuda-graph-inference": (N, "Inference decode only."),
    "--moe-token-drop-policy": (N, "Which tokens drop at the capacity, not how many."),
    "--moe-permute-fusion": (M, "moe_permute_fusion", "Transformer Engine's fused permutation "
                                                      "keeps int32 row maps, not the unfused "
                                                      "int64 indices (actmem.layer.moe: "
                                                      "fused_dispatch_rows); alltoall only."),
    "--moe-apply-probs-on-input": when_set("the probabilities multiply the experts' input, not "
                                           "inside the weighted SwiGLU the ledger follows"),
    "--moe-latent-size": when_set("latent projections around the experts add tensors"),
    "--moe-mlp-glu-interleave-size": (N, "The layout of the same GLU activations."),
    "--moe-expert-rank-capacity-factor": when_set("a per-rank token budget drops or pads "
                                                  "tokens per expert-parallel rank"),
    "--moe-paged-stash": when_set("routed-expert activations go to a paged stash (GPU and "
                                  "host buffers)"),
    "--moe-paged-stash-page-size": only(_PAGED),
    "--moe-paged-stash-buffer-size-factor-cuda": only(_PAGED),
    "--moe-paged-stash-buffer-size-factor-cpu": only(_PAGED),
    "--moe-use-upcycling": when_set("upcycling builds the dense model beside the MoE one to "
                                    "convert it"),
    "--moe-upcycling-granularity": only("--moe-use-upcycling"),
    "--overlap-moe-expert-parallel-comm": when_set("overlaps two micro-batches' expert "
                                                   "all-to-alls, so their activations are alive "
                                                   "together"),
    "--ep-overlap-early-attn-memory-release": only("--overlap-moe-expert-parallel-comm"),
    "--delay-wgrad-compute": when_set("weight gradients wait, so their inputs and output "
                                      "gradients stay alive longer"),
    "--overlap-dispatch-backward-with-experts-wgrad": when_set("expert weight gradients are "
                                                               "computed later on another "
                                                               "stream, keeping their inputs"),
    "--high-priority-a2a-comm-stream": (N, "A stream priority: changes when, not how much."),
    "--gtp-remat-opt-in-modules": only(_GTP),
    "--gtp-remat-reduce-scatter-with-fp32-accumulation": only(_GTP),
    "--gtp-remat-nccl-ub": only(_GTP),
    "--gtp-expert-remat-nccl-ub": only(_GTP),
    "--use-fused-weighted-squared-relu": when_set("the experts' fused weighted squared-ReLU "
                                                  "kernel keeps other tensors than the unfused "
                                                  "path actmem models"),
    # ---- CUDA graphs
    "--cuda-graph-impl": when_set("CUDA graphs keep static input/output buffers and a private "
                                  "memory pool", "its default (none) is memory-neutral"),
    "--enable-cuda-graph": when_set("deprecated alias of --cuda-graph-impl local"),
    "--external-cuda-graph": when_set("deprecated alias of --cuda-graph-impl "
                                      "transformer_engine"),
    "--cuda-graph-warmup-steps": only(_CG),
    "--cuda-graph-modules": only(_CG),
    "--cuda-graph-scope": only(_CG),
    "--inference-cuda-graph-scope": (N, "Inference CUDA graphs only."),
    "--optimizer-cuda-graph": when_set("a CUDA graph of the optimizer step keeps static "
                                       "buffers"),
    # ---- inference-only options in the transformer configuration
    "--flash-decode": (N, "Inference decoding only."),
    "--symmetric-ar-type": (N, "Symmetric-memory all-reduce for inference layers."),
    "--nccl-all-reduce-for-prefill": (N, "Inference prefill only."),
    "--inference-fuse-tp-communication": (N, "Inference only."),
    "--inference-disable-triton-nvls-kernels": (N, "Inference only."),
    "--inference-grouped-gemm-backend": (N, "Inference only."),
    "--inference-moe-disable-fused-quant-kernels": (N, "Inference only."),
    "--inference-moe-token-dispatcher-type": (N, "Inference only."),
    "--config-logger-dir": (N, "Dumps configurations to files."),
    # ---- initialization
    "--no-initialization": (N, "Skips weight initialization: values, not tensors."),
    "--use-cpu-initialization": (N, "Weights are initialised on the host and copied: the GPU "
                                    "ends with the same tensors."),
    "--init-method-std": (N, "An initialization value."),
    "--embedding-init-method-std": (N, "An initialization value."),
    "--init-model-with-meta-device": (N, "Builds the model on the meta device before "
                                         "Megatron-FSDP shards it: changes the set-up before "
                                         "the first step, not the step."),
    # ---- data parallelism, optimizer and gradient buffers
    "--use-distributed-optimizer": (M, "distributed_optimizer", "Main weights and Adam moments "
                                                                "sharded over d (6 + 12/d "
                                                                "bytes)."),
    "--num-distributed-optimizer-instances": (
        M, "num_distributed_optimizer_instances", "N copies of the distributed optimizer, "
        "each sharding the states over d*cp/N ranks (the experts' over their data-parallel "
        "size / N): parallel_state.py's intra-partial data-parallel groups."),
    "--overlap-grad-reduce": (M, "ddp_bucket_size", "Overlaps the gradient reduction with "
                                 "backward; DDP's buffer is the same (split into buckets, which "
                                 "only pad it); under --use-megatron-fsdp it sets the bucket "
                                 "size that cuts the parameters outside the layers "
                                 "(resolve_ddp_bucket_size)."),
    "--overlap-param-gather": (N, "Overlaps the distributed optimizer's parameter all-gather "
                                  "with forward, into the same buffer: changes when, not how "
                                  "much."),
    "--overlap-param-gather-with-optimizer-step": (N, "Starts the first bucket's all-gather in "
                                                      "the optimizer step: changes when."),
    "--no-align-grad-reduce": (N, "Whether stages launch their reductions together: changes "
                                  "when."),
    "--no-align-param-gather": (N, "Whether stages launch their all-gathers together: changes "
                                   "when."),
    "--ddp-num-buckets": (N, "How the gradient buffer is cut into buckets; only the padding "
                             "changes (refused under --use-megatron-fsdp, where it would cut "
                             "the parameters outside the layers)."),
    "--ddp-bucket-size": (M, "ddp_bucket_size", "How the gradient buffer is cut into buckets: "
                             "for DDP only the padding changes; under --use-megatron-fsdp it "
                             "cuts the parameters outside the layers (with "
                             "--overlap-grad-reduce)."),
    "--ddp-pad-buckets-for-high-nccl-busbw": (N, "Pads buckets to multiples of 2^16 elements: "
                                                 "at most a few hundred KiB per bucket."),
    "--ddp-reduce-scatter-with-fp32-accumulation": when_set(
        "with 16-bit gradients it adds an unsharded-gradient-sized scratch buffer per "
        "reduce-scatter", "its default is memory-neutral, and validate_args turns it off with "
        "fp32 gradients"),
    "--ddp-param-name-patterns-for-fp32-local-accumulation": when_set(
        "matched parameters accumulate gradients locally in fp32 beside 16-bit buffers"),
    "--ddp-average-in-collective": (N, "Averages inside the collective: values."),
    "--no-gradient-reduce-div-fusion": (N, "Whether the division is fused into the reduction: "
                                           "values."),
    "--use-megatron-fsdp": (M, "use_megatron_fsdp", "Megatron-FSDP, version 1, sharding "
                            "parameters, gradients and states in its buckets, the layers "
                            "gathered ahead and the gradient buckets on the timeline "
                            "(actmem.run.model_states.megatron_fsdp)."),
    "--megatron-fsdp-version": (M, "use_megatron_fsdp", "Version 1 (the default) is modelled; "
                                "version 2 is refused under --use-megatron-fsdp "
                                "(actmem.run.job.megatron_fsdp_args)."),
    "--data-parallel-sharding-strategy": (M, "use_megatron_fsdp", "optim_grads_params (the "
                                          "default) is modelled; the others are refused under "
                                          "--use-megatron-fsdp, which alone reads it."),
    "--outer-dp-sharding-strategy": only("--num-distributed-optimizer-instances > 1 with "
                                         "--use-megatron-fsdp (HSDP)"),
    "--fsdp-double-buffer": when_set("Megatron-FSDP draws its gathered layers and gradient "
                                     "buckets from a fixed pool of two, which actmem does not "
                                     "model"),
    "--suggested-communication-unit-size": (M, "suggested_communication_unit_size",
                                            "Megatron-FSDP's reduction queue, twice its "
                                            "prefetch (elements), taken as given."),
    "--keep-fp8-transpose-cache": only("--use-megatron-fsdp with --fp8-format"),
    "--enable-full-sharding-in-hsdp": when_set("Megatron-FSDP's HSDP, which actmem does not "
                                               "model"),
    "--fsdp-manual-registration": when_set("Megatron-FSDP's buffers registered with NCCL "
                                           "(with --use-nccl-ub), which actmem does not model"),
    "--megatron-fsdp-main-params-dtype": (M, "use_megatron_fsdp", "fp32 (the default) is "
                                          "modelled; the others are refused under "
                                          "--use-megatron-fsdp, which alone reads it."),
    "--megatron-fsdp-main-grads-dtype": (M, "megatron_fsdp_main_grads_dtype", "The main "
                                         "gradients' and the gradient buckets' dtype.",
                                         {"values": ["auto", "fp32", "bf16"]}),
    "--megatron-fsdp-grad-comm-dtype": (M, "megatron_fsdp_main_grads_dtype", "Modelled where "
                                        "it is the main gradients' dtype (auto); another adds "
                                        "communication buffers and is refused under "
                                        "--use-megatron-fsdp."),
    "--megatron-fsdp-enable-fine-grained-param-gather": when_set(
        "Megatron-FSDP gathers each sub-module's parameters on their own, which actmem does "
        "not model"),
    "--megatron-fsdp-max-pool-double-buffer": when_set(
        "Megatron-FSDP draws its buffers from a pool, which actmem does not model"),
    "--fsdp-db-use-persist-buf-on-alloc-fail": only("--fsdp-double-buffer"),
    "--use-torch-fsdp2": (M, "use_torch_fsdp2", "PyTorch FSDP2 on every layer "
                                                "(actmem.run.model_states.fsdp)."),
    "--torch-fsdp2-no-reshard-after-forward": (M, "reshard_after_forward",
                                               "Given: reshard_after_forward=False (ZeRO-2), "
                                               "every layer's gathered parameters kept from "
                                               "forward to backward."),
    "--use-nccl-ub": when_set("the data-parallel buffers come from NCCL's registered memory "
                              "pool, padded and registered, which actmem does not model"),
    "--disable-symmetric-registration": only("--use-nccl-ub"),
    "--create-all-gather-group": (N, "Another NCCL communicator; its buffers are outside "
                                     "PyTorch's allocator (actmem's reserve)."),
    "--no-use-layer-wise-param-layout": only("--optimizer muon with --use-distributed-optimizer"),
    "--use-precision-aware-optimizer": when_set("main parameters, gradients and Adam moments "
                                                "in lower precision, not the 12 + 4 bytes of "
                                                "actmem's 'megatron' accounting"),
    "--main-grads-dtype": when_set("bf16 main gradients are 2 bytes, not the 4 of actmem's "
                                   "'megatron' accounting", "its default (fp32) is modelled"),
    "--main-params-dtype": when_set("fp16 main parameters are 2 bytes, not 4",
                                    "its default (fp32) is modelled"),
    "--exp-avg-dtype": when_set("Adam's first moment in a smaller dtype",
                                "its default (fp32) is modelled"),
    "--exp-avg-sq-dtype": when_set("Adam's second moment in a smaller dtype",
                                   "its default (fp32) is modelled"),
    "--optimizer": (M, "optimizer", "optimizer='adam' (two fp32 moments) or 'muon' (one fp32 "
                                    "momentum per matrix parameter and Newton-Schulz temporaries "
                                    "in its step, actmem/run/model_states/muon.py); sgd, "
                                    "dist_muon (muon with the layer-wise distributed optimizer), "
                                    "lion, soap and adaptive_muon keep other states.",
                    {"values": ["adam", "muon"]}),
    "--muon-nesterov": when_set("Nesterov momentum makes one more fp32 copy of each matrix in "
                                "Muon's step (grad.lerp)"),
    "--muon-no-split-qkv": when_set("Muon orthogonalizes Q/K/V as one matrix, a step transient "
                                    "actmem does not model (it models the split blocks)"),
    "--muon-fp32-matmul-prec": (R, "Refused unless 'medium' (its default: Newton-Schulz in "
                                   "bf16, measured); 'high' and 'low' keep other temporaries."),
    "--muon-use-syrk": when_set("the Triton SYRK kernel needs emerging_optimizers 0.4.0; "
                                "Megatron-LM pins 0.3.0 and refuses it"),
    "--muon-scalar-optimizer": (R, "Refused unless 'adam' (its default: Adam's 12 bytes for the "
                                   "embedding, output layer, norms and biases); lion keeps one "
                                   "moment."),
    "--muon-tp-mode": (N, "Read only by tensor-parallel Muon (t > 1), which actmem refuses with "
                          "--optimizer muon; at t = 1 nothing is split."),
    "--optimizer-cpu-offload": when_set("optimizer states (and main weights) move to the host"),
    "--optimizer-offload-fraction": only(_CPUOPT),
    "--use-torch-optimizer-for-cpu-offload": only(_CPUOPT),
    "--overlap-cpu-optimizer-d2h-h2d": only(_CPUOPT),
    "--no-pin-cpu-grads": only(_CPUOPT),
    "--no-pin-cpu-params": only(_CPUOPT),
    "--dump-param-to-param-group-map": (N, "Writes a parameter-to-group map to a file."),
    "--no-gradient-accumulation-fusion": (M, "gradient_accumulation_fusion",
                                          "Given: weight gradients are tensors passed to "
                                          "AccumulateGrad, not added into the fp32 buffer in the "
                                          "GEMM (gradient_accumulation_fusion=False)."),
    "--defer-embedding-wgrad-compute": (M, "defer_embedding_wgrad_compute",
                                        "The output layer's weight gradients wait for the "
                                        "pipeline flush, keeping their input and the logits' "
                                        "gradient (actmem.run.moments.deferred_wgrad)."),
    "--wgrad-deferral-limit": (M, "wgrad_deferral_limit",
                               "How many micro-batches defer (0: all); read with "
                               "--defer-embedding-wgrad-compute only."),
    # ---- distributed setup that keeps no tensor of the step
    "--distributed-backend": (N, "NCCL or Gloo: the process groups' library, not the tensors."),
    "--distributed-timeout-minutes": (N, "A timeout."),
    "--distributed-timeout-seconds-after-init": (N, "A timeout."),
    "--local-rank": (N, "Set by the launcher: which GPU, not what it holds."),
    "--lazy-mpu-init": (N, "Defers distributed initialization to an external manager (with CPU "
                           "initialization): the step's tensors are the same."),
    "--nccl-communicator-config-path": (N, "NCCL thread-group settings: outside PyTorch's "
                                           "allocator (actmem's reserve)."),
    "--disable-gloo-process-groups": (N, "Gloo groups live on the host."),
    "--use-sharp": (N, "SHARP in-network reduction: changes how, not what, is reduced."),
    "--sharp-enabled-group": (N, "Which group uses SHARP."),
    "--high-priority-stream-groups": (N, "Stream priorities: changes when."),
    "--flight-recorder-dump-path": (N, "NCCL debugging records on the host."),
    "--flight-recorder-trace-buffer-size": (N, "NCCL debugging records on the host."),
    "--no-flight-recorder-dump-on-timeout": (N, "NCCL debugging records on the host."),
    "--flight-recorder-include-stack-trace": (N, "NCCL debugging records on the host."),
    "--no-flight-recorder-include-only-active": (N, "NCCL debugging records on the host."),
    "--no-flight-recorder-extra-dump-on-exec": (N, "NCCL debugging records on the host."),
    "--fake-process-group": (N, "Skips communication (for profiling memory on one GPU); the "
                                "model's tensors are the same."),
    # ---- training loop
    "--empty-unused-memory-level": (N, "Empties PyTorch's cache: reserved memory, not the "
                                       "allocated bytes actmem predicts."),
    "--check-weight-hash-across-dp-replicas-interval": (N, "Hashes the weights at intervals: a "
                                                           "transient check between steps."),
    "--gpu-sniff-test-interval": (N, "Runs GEMM and communication tests between steps, after "
                                     "the step's tensors are freed."),
    "--train-sync-interval": (N, "A CPU-GPU synchronization interval: changes when."),
    "--train-iters": (N, "An exit condition."),
    "--train-samples": (N, "An exit condition."),
    "--exit-interval": (N, "An exit condition."),
    "--exit-duration-in-mins": (N, "An exit condition."),
    "--exit-signal-handler": (N, "An exit condition."),
    "--exit-signal": (N, "An exit condition."),
    "--exit-signal-handler-for-dataloader": (N, "An exit condition."),
    "--exit-signal-handler-for-training": (N, "An exit condition."),
    "--manual-gc": (N, "Python garbage collection timing: host objects."),
    "--manual-gc-interval": (N, "Python garbage collection timing: host objects."),
    "--no-manual-gc-eval": (N, "Python garbage collection timing: host objects."),
    "--iterations-to-skip": (N, "Skips iterations: which steps run, not what a step keeps."),
    "--no-check-for-nan-in-loss-and-grad": (N, "A check of scalars."),
    "--check-for-large-grads": (N, "A check of the gradient norm: a scalar."),
    "--result-rejected-tracker-filename": (N, "A log file."),
    "--dataloader-type": (N, "How samples are drawn (single or cyclic pass), not their shape."),
    "--use-mcore-models": (N, "Deprecated and ignored."),
    "--freeze-all-layers": when_set("training runs forward only under torch.no_grad, keeping no "
                                    "activations and no gradients"),
    "--perform-rl-step": when_set("the RL step runs rollouts with an inference engine and its "
                                  "KV cache beside training"),
    "--sft": when_set("SFT packs sequences with cu_seqlens (THD attention) and sends no b*s*s "
                      "mask, a path actmem has not been checked against"),
    "--sft-tokenizer-prompt-format": only("--sft"),
    # ---- checkpointing options that decide the model
    "--use-checkpoint-args": when_set("the model's shape and parallelism come from the "
                                      "checkpoint, not from the command line actmem reads"),
    "--use-mp-args-from-checkpoint-args": when_set("the parallel sizes come from the "
                                                   "checkpoint, not from the command line"),
    "--no-use-tokenizer-model-from-checkpoint-args": only("--use-checkpoint-args"),
    "--save-params-interval": (N, "Copies parameters to the host at those iterations."),
    "--save-activations-interval": (N, "Copies activations to the host at those iterations "
                                       "(activation_logging.py: .detach().cpu())."),
    "--save-tokens-per-expert-interval": (N, "Copies routing counts to the host at those "
                                             "iterations."),
    "--save-wgrads-interval": (N, "Saves main gradients at those iterations, all-reducing the "
                                  "same buffer in place of the reduce-scatter."),
    "--save-dgrads-interval": (N, "Copies input gradients to the host at those iterations."),
    # ---- evaluation
    "--eval-micro-batch-size": when_set("evaluation's forward passes run at another micro-batch, "
                                        "which a larger value can make the job's peak",
                                        "its default (the training micro-batch, forward only) "
                                        "keeps less than a training step"),
    # ---- data
    "--no-create-attention-mask-in-dataloader": (M, "create_attention_mask_in_dataloader",
                                                 "Given: no b*s*s boolean mask on the GPU "
                                                 "(create_attention_mask_in_dataloader=False)."),
    "--dataloader-inter-document-masking": when_set(
        "documents are packed with cu_seqlens (THD attention) and the mask is dropped; actmem "
        "models the dropped mask but not the packed-sequence path"),
    "--reset-attention-mask": (N, "Changes the mask's values (per-document), not its b*s*s "
                                  "bytes."),
    "--reset-position-ids": (N, "Changes position ids' values."),
    "--eod-mask-loss": (N, "Changes the loss mask's values."),
    "--mock-data": (N, "Synthetic data of the same shapes."),
    "--num-workers": (N, "Data-loader processes on the host."),
    "--sample-rate": (N, "How much of the data is sampled, not the sample's shape."),
    "--mask-prob": when_set("BERT/T5 masking; a BERT or T5 job is not one actmem models"),
    "--short-seq-prob": when_set("BERT/T5 short samples; a BERT or T5 job is not one actmem "
                                 "models"),
    "--vocab-extra-ids": when_set("T5's sentinel tokens enlarge the vocabulary of T5/BERT "
                                  "tokenizers", "its default (0) adds none"),
    # ---- tokenizer and vocabulary
    "--vocab-size": (M, "vocab_size", "The vocabulary before padding (NullTokenizer, or when "
                                      "no tokenizer file gives it)."),
    "--padded-vocab-size": (M, "vocab_size", "Derived: the padded vocabulary itself, used "
                                             "without more padding (vocab_size = it, "
                                             "make_vocab_size_divisible_by = 1)."),
    "--no-pad-vocab-size": (M, "make_vocab_size_divisible_by", "Derived: the tokenizer does "
                                                               "not pad the vocabulary, so the "
                                                               "rows are --padded-vocab-size's "
                                                               "(make_vocab_size_divisible_by "
                                                               "= 1)."),
    "--tokenizer-type": (M, "vocab_size", "Derived: the tokenizer (with its file) fixes the "
                                          "vocabulary size before padding."),
    "--vocab-file": (M, "vocab_size", "Derived: the vocabulary file fixes the vocabulary size "
                                      "before padding."),
    "--tokenizer-model": (M, "vocab_size", "Derived: the tokenizer model fixes the vocabulary "
                                           "size before padding."),
    "--tokenizer-metadata": (M, "vocab_size", "Derived: the metadata picks the tokenizer, which "
                                              "fixes the vocabulary size."),
    "--tokenizer-special-tokens": (M, "vocab_size", "Derived: special tokens can extend the "
                                                    "tokenizer's vocabulary."),
    "--tiktoken-num-special-tokens": (M, "vocab_size", "Derived: TikTokenizer's vocabulary is "
                                                       "its ranks plus these special tokens."),
    # ---- logits distillation
    "--logits-save-dir": when_set("top-k logits are computed and saved each step beside the "
                                  "loss"),
    "--logits-load-dir": when_set("a teacher's top-k logits are loaded and a KD loss computed "
                                  "beside the LM loss"),
    "--logits-save-top-k": only("--logits-save-dir"),
    "--logits-save-top-p": only("--logits-save-dir"),
    "--logits-save-top-p-min-k": only("--logits-save-dir"),
    "--logits-save-dtype": only("--logits-save-dir"),
    "--logits-load-decode-threads": only("--logits-load-dir"),
    "--logits-load-prefetch-factor": only("--logits-load-dir"),
    "--logits-load-msc-prefetch-depth": only("--logits-load-dir"),
    "--logits-load-kd-loss-alpha": only("--logits-load-dir"),
    "--logits-load-ignore-errors": only("--logits-load-dir"),
    # ---- BERT options that sit in the inference group
    "--output-bert-embeddings": when_set("BERT embeddings; BERT is not a GPT job actmem models",
                                         "pretrain_gpt.py ignores it, so its default is "
                                         "memory-neutral"),
    "--bert-embedder-type": when_set("a BERT embedder; BERT is not a GPT job actmem models",
                                     "pretrain_gpt.py ignores it, so its default is "
                                     "memory-neutral"),
}
"""Flag -> (class, why) or ("modelled", field, why[, {"values": [...]}])."""

UNSURE: dict[str, str] = {
    "--no-overlap-p2p-communication": "Neutral: overlapping pipeline sends/receives posts "
        "receive buffers (s*b*h/t) earlier under the interleaved schedule; the extra lifetime "
        "was not measured.",
    "--hidden-dropout": "actmem's dropout is one bool; a run with one dropout 0 and the other "
        "> 0 cannot be expressed (a consumer should refuse it).",
    "--attention-dropout": "As --hidden-dropout.",
    "--moe-token-dispatcher-type": "Modelled with values ['alltoall', 'allgather', 'flex'] "
        "(flex: DeepEP or HybridEP within one node; NCCL-EP is refused by "
        "--moe-flex-dispatcher-backend); dense runs ignore the flag.",
    "--dataloader-inter-document-masking": "Refused when set; it could be modelled as "
        "create_attention_mask_in_dataloader=False if THD attention saves the same bytes "
        "(not measured). Same for --sft.",
    "--eval-micro-batch-size": "Refused when set because evaluation is part of the job's "
        "peak; it keeps only forward tensors, so a value up to the training micro-batch is "
        "probably harmless.",
    "--apply-query-key-layer-scaling": "The brief listed it as modelled; actmem has no field "
        "for it, and it matters only for unfused attention (fp32 softmax), so it is refused "
        "when set.",
    "--attention-softmax-in-fp32": "As --apply-query-key-layer-scaling: matters only with "
        "unfused attention.",
    "--calculate-per-token-loss": "Neutral: the loss returns a sum and a token count; no "
        "tensor of size s*b*V/t changes.",
    "--no-bias-gelu-fusion": "Neutral by reasoning (unfused GeLU saves its biased input, the "
        "same size); not measured.",
    "--no-bias-dropout-fusion": "Neutral by reasoning (the same 1-byte mask); not measured.",
    "--apply-residual-connection-post-layernorm": "Neutral by reasoning (the same tensors are "
        "saved, the residual branch starts later); not measured.",
    "--moe-router-enable-expert-bias": "Neutral: an E-element buffer and a transient N x E "
        "biased score used only for top-k; not measured.",
    "--gpu-sniff-test-interval": "Neutral: its GEMM/all-to-all tests run between steps; their "
        "buffers were not sized.",
    "--use-mup": "Refused when set by reading LanguageModule (logits * mup_output_mult makes a "
        "second logits tensor for a moment); not measured.",
    "--window-size": "Neutral as in actmem.run.job.hf_config (sliding_window) for FlashAttention "
        "and fused attention; with unfused attention the s x s map is kept anyway.",
    "--tokenizer-type": "Tokenizer files (--vocab-file, --tokenizer-model, --tokenizer-metadata) "
        "are classed modelled (vocab_size, derived), not neutral as paths usually are, because "
        "they fix the vocabulary size.",
    "--use-nccl-ub": "Refused when set: NCCL user-buffer registration allocates the "
        "data-parallel buffers from NCCL's pool; whether max_memory_allocated counts them and "
        "how much they pad was not checked.",
    "--flash-attention-version": "Neutral: FlashAttention 2/3/4 all save Q, K, V, output and "
        "log-sum-exp; FA4 not checked.",
    "--no-pad-vocab-size": "Modelled as make_vocab_size_divisible_by = 1; without "
        "--padded-vocab-size, gpt_builders.py reads args.padded_vocab_size, which is then "
        "unset, so the flag is only meaningful beside --padded-vocab-size (from a checkpoint).",
    "--rampup-batch-size": "Neutral: a smaller global batch means fewer micro-batches, never "
        "more in flight; the peak is at the full batch.",
    "vision and biencoder groups": "Refused as the brief asks for vision/ICT/REALM-only "
        "options, although pretrain_gpt.py never reads them.",
    "--inference-* and the inference group": "Neutral for pretrain_gpt.py; an RL run "
        "(--perform-rl-step, refused) does read them.",
}
"""Doubts, for the report."""

if __name__ == "__main__":
    main()
