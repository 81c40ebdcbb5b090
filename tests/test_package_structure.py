"""The Python package's structure: modules share private helpers only through the private helper modules
(``_ui``, ``_specs``, ``_cli_io``, ...), and each operator's keyword options are declared once
(``windgate._options``) and match every public signature, the extension's stub and the README."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "windgate"
README = ROOT / "README.md"


def _modules() -> list[Path]:
    return sorted(PACKAGE.glob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _sibling(node: ast.ImportFrom) -> str | None:
    """The sibling module a ``from . import`` / ``from .x import`` / ``from windgate.x import`` names
    (``""`` for the package itself), or ``None`` for anything else."""
    if node.level == 1:
        return node.module or ""
    if node.level == 0 and node.module and (node.module == "windgate" or node.module.startswith("windgate.")):
        return node.module.removeprefix("windgate").removeprefix(".")
    return None


def private_imports(path: Path) -> list[str]:
    """Every place where ``path`` reaches a private name of a public sibling module: ``from .cli import
    _step``, or ``from . import cli`` then ``cli._step``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found, modules = [], {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        sibling = _sibling(node)
        if sibling is None:
            continue
        for alias in node.names:
            if sibling == "":  # from . import x: x is a module (or a name of the package)
                if not _private(alias.name):
                    modules[alias.asname or alias.name] = alias.name
            elif not _private(sibling.split(".")[0]) and _private(alias.name):
                found.append(f"{path.name}:{node.lineno}: from .{sibling} import {alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _private(node.attr)
        ):
            found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_a_private_name_of_a_public_sibling():
    found = [hit for path in _modules() for hit in private_imports(path)]
    assert not found, "private names of public modules used by siblings:\n" + "\n".join(found)


def test_the_checker_sees_both_forms(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from .cli import _step, main\nfrom . import cli, _ui\nfrom windgate.join import _x\n"
        "cli._console()\n_ui.console()\n"
    )
    assert [hit.split(": ", 1)[1] for hit in private_imports(bad)] == [
        "from .cli import _step",
        "from .join import _x",
        "cli._console",
    ]


def import_graph() -> dict[str, set[str]]:
    """Module -> the sibling modules it imports (at the top or inside a function); ``__init__`` for the
    package itself."""
    names = {path.stem for path in _modules()} | {"_native"}  # the compiled extension
    graph: dict[str, set[str]] = {}
    for path in _modules():
        edges = graph.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name.split(".")[1] for a in node.names if a.name.startswith("windgate.")}
                edges |= {"__init__" for a in node.names if a.name == "windgate"}
            elif isinstance(node, ast.ImportFrom) and (sibling := _sibling(node)) is not None:
                if sibling:
                    edges.add(sibling.split(".")[0])
                else:
                    edges |= {a.name if a.name in names else "__init__" for a in node.names}
        edges.discard(path.stem)
    return graph


def test_no_import_cycles_between_modules():
    """Layers import one way: a module never reaches itself through its imports."""
    graph = import_graph()

    def cycle_from(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    return [*trail, start]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
        return None

    cycles = [" -> ".join(c) for m in sorted(graph) if (c := cycle_from(m))]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


# ------------------------------------------------------------------------------ the option declarations


def _options():
    return importlib.import_module("windgate._options")


def _resolve(entry_point: str):
    module, _, name = entry_point.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _entry_points():
    return [
        (operator, entry)
        for operator, options in _options().OPERATORS.items()
        for entry in options.entry_points
    ]


def _keywords(obj) -> list[tuple[str, object]]:
    """``(name, default)`` of a function's or class's keyword-only parameters, in order."""
    params = inspect.signature(obj).parameters.values()
    return [(p.name, p.default) for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]


@pytest.mark.parametrize(("operator", "entry_point"), _entry_points())
def test_signature_matches_the_declaration(operator, entry_point):
    declared = _options().OPERATORS[operator].signature(entry_point)
    assert _keywords(_resolve(entry_point)) == declared


def test_every_public_operator_is_declared():
    import windgate
    import windgate.spark

    declared = {entry for _, entry in _entry_points()}
    helpers = {"Pipeline", "col", "band", "eq", "Band", "Eq", "WindowsAndLate", "__version__"}
    operators = {
        f"windgate.{name}" for name in windgate.__all__ if name not in helpers and not name.endswith("Error")
    }
    spark = {
        f"windgate.spark.{n}" for n in windgate.spark.__all__ if n not in ("run_pipeline", "local_session")
    }
    assert operators | spark == declared


def _stub() -> dict[str, list[str]]:
    """Keyword-only parameter names of each function and class ``__init__`` in ``_native.pyi``."""
    tree = ast.parse((PACKAGE / "_native.pyi").read_text())
    out = {}
    for node in tree.body:
        fn = node
        if isinstance(node, ast.ClassDef):
            fn = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if isinstance(fn, ast.FunctionDef):
            out[node.name] = [a.arg for a in fn.args.kwonlyargs]
    return out


def _native_cases():
    return [
        (operator, native, entries, extra)
        for operator, options in _options().OPERATORS.items()
        for native, (entries, extra) in options.natives.items()
    ]


@pytest.mark.parametrize(("operator", "native", "entries", "extra"), _native_cases())
def test_stub_matches_the_declaration(operator, native, entries, extra):
    """The extension's stub takes exactly the keywords the wrappers forward to it."""
    options = _options()
    forwarded = set(extra)
    for op in options.OPERATORS.values():
        for entry in entries:
            if entry in op.entry_points:
                forwarded |= {n for n in op.entry_points[entry] if op.options[n].convert is not None}
    assert set(_stub()[native]) == forwarded


def _readme_signatures() -> list[tuple[str, str]]:
    """``(entry point, parameter list)`` of every ``### `windgate.x(...)``` heading of the README that
    spells its parameters out."""
    found = []
    for line in README.read_text().splitlines():
        m = re.match(r"### `(windgate(?:\.\w+)+)\((.*)\)(?: -> [\w.]+)?`", line)
        if m and "..." not in m.group(2):
            found.append((m.group(1), m.group(2)))
    return found


@pytest.mark.parametrize(("entry_point", "params"), _readme_signatures())
def test_readme_signatures_match_the_code(entry_point, params):
    """Every parameter the README lists exists, in the code's order, with the code's default (the README
    may leave newer keywords out)."""
    listed = ast.parse(f"def f({params}): pass").body[0].args
    readme = [(a.arg, inspect.Parameter.empty) for a in listed.args]
    defaults = [ast.literal_eval(d) if d is not None else inspect.Parameter.empty for d in listed.kw_defaults]
    readme += [(a.arg, d) for a, d in zip(listed.kwonlyargs, defaults, strict=True)]
    real = {p.name: p.default for p in inspect.signature(_resolve(entry_point)).parameters.values()}
    for name, default in readme:
        assert name in real, f"{entry_point}: the README lists {name}, which the code does not take"
        assert real[name] == default, (
            f"{entry_point}: {name}={real[name]!r} in the code, {default!r} in README"
        )
    order = [n for n in real if n in dict(readme)]
    assert [n for n, _ in readme] == order, f"{entry_point}: the README lists the keywords in another order"


def test_readme_has_signatures():
    assert len(_readme_signatures()) >= 4
