#!/usr/bin/env python3
"""Checks that windgate-core's modules import downward only (see docs/architecture.md, "Layers").

Every `crate::` path in crates/windgate-core/src (in `use` lines, `use crate::{a, b}` groups and inline paths
such as `crate::interrupt::check()`; comments and doc comments are ignored) is an edge from the file's module
to the module it names. An edge is forbidden when it goes to a higher layer, or from one operator to another
(operators share only what lives below them). `super::` paths that leave the file's top-level module are
checked the same way. Exit status 1 lists every forbidden edge with its file and line.

    python3 tools/check_layers.py            # check
    python3 tools/check_layers.py --graph    # also print the module import graph (--depth 2 for submodules)
    python3 tools/check_layers.py --src DIR  # check another copy of the sources (the tests use this)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

# The layers, lowest first. A module may import modules of its own layer or of lower layers, never of a
# higher one; the modules of an `OPERATORS` layer may not import each other at all. A top-level module not
# listed here is an error, so that a new module is placed deliberately.
LAYERS: list[tuple[str, list[str]]] = [
    # Errors, time and windows, the loom switch, Ctrl-C, Arrow column helpers, the strategy-table macro, exact
    # float summation.
    ("foundation", ["error", "sync", "interrupt", "time", "arrow_io", "registry", "exact_sum", "snapshot", "prefetch"]),
    # Mechanisms every layer above may share: the group-key dictionary and row codec, thread plumbing.
    ("shared", ["keys", "threads", "kept_threads"]),
    # Watermarks, late rows, admission, reorder buffers, hybrid queues, ScaleGate.
    ("order", ["order"]),
    # Worker threads, the pane farm, schedulers, the pipeline executor.
    ("runtime", ["runtime"]),
    # The window and stream parameters every windowed operator takes.
    ("operator options", ["window_options"]),
    # The operators: none imports another's internals.
    ("operators", ["aggregate", "join", "preference", "columnar"]),
    # Applications built on the operators.
    ("applications", ["tpcxbb"]),
]
OPERATORS = "operators"

# Edges allowed for now, each with the reason and who removes it; keys are (from, to) modules at depth 2.
ALLOWED: dict[tuple[str, str], str] = {}

# Modules only the listed modules (and the sealed module itself) may import: the research baselines are
# reached through the strategy registry alone, so production code cannot come to depend on them.
SEALED: dict[str, set[str]] = {"aggregate::baselines": {"aggregate::strategy"}}

LAYER_OF: dict[str, int] = {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}
KEYWORDS = {"self", "super", "crate"}


def module_of(path: Path, src: Path) -> list[str]:
    """`aggregate/state.rs` -> ["aggregate", "state"]; `aggregate/mod.rs` -> ["aggregate"]; `lib.rs` -> []."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return parts


def strip_comments(text: str) -> str:
    """Blanks comments and string literals (keeping line breaks) so only code paths remain."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "r" and re.match(r'r#*"', text[i:]) and not text[i - 1 : i].isalnum()):
            m = re.match(r'r(#*)"', text[i:])
            if m:
                end = '"' + m.group(1)
                j = text.find(end, i + len(m.group(0)))
                j = n if j < 0 else j + len(end)
            else:
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s*([{},:])\s*", r"\1", re.sub(r"\s+", " ", tree.strip()))
    depth, brace = 0, -1
    for i, c in enumerate(tree):
        if c == "{":
            if depth == 0:
                brace = i
            depth += 1
        elif c == "}":
            depth -= 1
    if brace < 0:
        return [tree]
    prefix = tree[:brace]
    inner = tree[brace + 1 : tree.rfind("}")]
    items, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    out = []
    for item in filter(None, items):
        for sub in expand_use_tree(item):
            out.append(prefix + sub)
    return out


def resolve(path: str, here: list[str]) -> list[str] | None:
    """The absolute module path (crate-relative segments) a `crate::`/`super::` path names, or None."""
    segs = [s for s in re.split(r"::", path) if s]
    if segs and segs[-1] == "self":  # `use crate::a::{self, b}` names `crate::a`
        segs.pop()
    if not segs:
        return None
    if segs[0] == "crate":
        return segs[1:]
    if segs[0] == "super":
        base = list(here)
        while segs and segs[0] == "super":
            if not base:
                return None
            base.pop()
            segs = segs[1:]
        return base + segs
    return None


USE_RE = re.compile(r"\buse\s+((?:crate|super)\b[^;]*);", re.S)
INLINE_RE = re.compile(r"(?<![\w:])crate(?:::\w+)+")


def edges_of(path: Path, src: Path) -> list[tuple[list[str], int, str]]:
    """(target module path, line, text) for every `crate::`/`super::` path in one file."""
    here = module_of(path, src)
    # A file `foo/bar.rs` is module foo::bar; its `super` is foo. A `mod.rs` is its directory's module.
    text = strip_comments(path.read_text(encoding="utf-8"))
    found = []
    covered: set[int] = set()
    for m in USE_RE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        covered.update(range(m.start(), m.end()))
        for p in expand_use_tree(m.group(1)):
            target = resolve(p.split(" as ")[0], here)
            if target:
                found.append((target, line, p))
    for m in INLINE_RE.finditer(text):
        if m.start() in covered:
            continue
        line = text.count("\n", 0, m.start()) + 1
        target = resolve(m.group(0), here)
        if target:
            found.append((target, line, m.group(0)))
    return found


def within(path: list[str], module: str) -> bool:
    return "::".join(path) == module or "::".join(path).startswith(module + "::")


def sealed_errors(here: list[str], target: list[str], where: str, text: str) -> list[str]:
    """An import of a sealed module from outside it and its allowed importers."""
    return [
        f"{where}: {'::'.join(here)} imports {text} "
        f"({sealed} is reached only through {', '.join(sorted(ok))})"
        for sealed, ok in SEALED.items()
        if within(target, sealed) and not within(here, sealed) and not any(within(here, m) for m in ok)
    ]


def check(src: Path, depth: int) -> tuple[list[str], dict[str, set[str]]]:
    errors: list[str] = []
    graph: dict[str, set[str]] = defaultdict(set)
    used: set[tuple[str, str]] = set()
    modules = {"::".join(module_of(p, src)) for p in src.rglob("*.rs")}

    def name(path: list[str], depth: int) -> str:
        """The module `path` is in, at most `depth` segments deep (an item names its module)."""
        for d in range(min(depth, len(path)), 0, -1):
            if "::".join(path[:d]) in modules:
                return "::".join(path[:d])
        return path[0]

    for path in sorted(src.rglob("*.rs")):
        here = module_of(path, src)
        rel = Path(src.name) / path.relative_to(src)
        if not here:
            continue  # lib.rs declares and re-exports the modules
        top = here[0]
        if top not in LAYER_OF:
            errors.append(f"{rel}: module '{top}' is in no layer (add it to LAYERS in {Path(__file__).name})")
            continue
        for target, line, text in edges_of(path, src):
            if target:
                errors.extend(sealed_errors(here, target, f"{rel}:{line}", text))
            if not target or target[0] == top:
                continue
            dst = target[0]
            if dst not in LAYER_OF:
                # An item of the crate root (`crate::Result`): the root re-exports foundation items only.
                continue
            graph[name(here, depth)].add(name(target, depth))
            key = (name(here, 2), name(target, 2))
            if key in ALLOWED or (here[0], key[1]) in ALLOWED:
                used.add(key if key in ALLOWED else (here[0], key[1]))
                continue
            lf, lt = LAYER_OF[top], LAYER_OF[dst]
            if lt > lf:
                errors.append(
                    f"{rel}:{line}: {'::'.join(here)} ({LAYERS[lf][0]}) imports {text} "
                    f"({LAYERS[lt][0]}, a higher layer)"
                )
            elif lt == lf and LAYERS[lf][0] == OPERATORS:
                errors.append(
                    f"{rel}:{line}: operator {top} imports {text} (another operator's internals; "
                    "move the shared piece below the operators)"
                )
    for key in ALLOWED.keys() - used:
        print(
            f"note: allowed edge {key[0]} -> {key[1]} no longer occurs: remove it from ALLOWED",
            file=sys.stderr,
        )
    return errors, graph


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=root / "crates" / "windgate-core" / "src")
    ap.add_argument("--graph", action="store_true", help="print the module import graph")
    ap.add_argument("--depth", type=int, default=1, choices=(1, 2), help="module depth of the graph")
    args = ap.parse_args()
    errors, graph = check(args.src.resolve(), args.depth)
    if args.graph:
        for name, mods in LAYERS[::-1]:
            print(f"# {name}")
            for src in sorted(graph):
                if src.split("::")[0] in mods:
                    print(f"{src} -> {', '.join(sorted(graph[src]))}")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(
            f"{len(errors)} forbidden import(s); the layers are declared at the top of {__file__}",
            file=sys.stderr,
        )
        return 1
    if not args.graph:
        print("layers: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
