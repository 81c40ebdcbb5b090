"""The strategy registries: the README table and the CLI choices name exactly each operator's strategies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from windgate import _native

README = Path(__file__).resolve().parent.parent / "README.md"
OPERATORS = ("window_aggregate", "band_join", "preference")
ROW = re.compile(r"^\| `(\w+)` \| `(\w+)` \| (\w+) \| (.+) \|$")


def readme_rows() -> dict[str, list[tuple[str, str, str]]]:
    """The README's "Strategies" table: per operator, (name, role, doc) in table order."""
    section = README.read_text().split("### Strategies\n", 1)[1].split("\n### ", 1)[0]
    rows: dict[str, list[tuple[str, str, str]]] = {}
    for line in section.splitlines():
        m = ROW.match(line)
        if m:
            rows.setdefault(m[1], []).append((m[2], m[3], m[4]))
    return rows


@pytest.mark.parametrize("operator", OPERATORS)
def test_readme_lists_the_registry(operator: str) -> None:
    registry = [(s["name"], s["role"], s["doc"]) for s in _native.strategies(operator)]
    assert readme_rows()[operator] == registry


def test_readme_lists_no_other_operator() -> None:
    assert sorted(readme_rows()) == sorted(OPERATORS)


def test_entries_are_complete() -> None:
    for operator in OPERATORS:
        entries = _native.strategies(operator)
        names = [s["name"] for s in entries]
        assert names[0] == "auto" and len(set(names)) == len(names)
        for s in entries:
            assert set(s) == {"name", "doc", "role", "parallel", "farm_options", "sorted_sources"}
            assert s["role"] in {"production", "reference", "baseline"} and s["doc"]


def test_unknown_operator_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        _native.strategies("nope")


def test_cli_choices_come_from_the_registry() -> None:
    from windgate import cli

    names, _ = cli._strategies(multiway=False)
    registry = _native.strategies("window_aggregate")
    assert names == [s["name"] for s in registry if not s["sorted_sources"]]
    multiway, _ = cli._strategies(multiway=True)
    assert {"mq", "mqlf", "tumlsc", "tumlmc", "wiml", "auto", "pane", "reference"} == set(multiway)
