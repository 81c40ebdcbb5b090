"""The examples in the docstrings run and print what they say."""

import doctest
import importlib

import pytest

MODULES = [
    "windgate",
    "windgate.join",
    "windgate.preference",
    "windgate.pipeline",
    "windgate.tpcxbb",
    "windgate.spark_session",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
