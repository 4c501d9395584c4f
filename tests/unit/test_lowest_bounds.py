"""tests/lowest_bounds.py: what `make test-min` pins, each direct dependency at its declared floor."""

from __future__ import annotations

from importlib.metadata import requires

from conftest import REPO
from lowest_bounds import floors


def test_each_floor_becomes_a_pin_and_skipped_names_are_left_out(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[project]\ndependencies = [\n"
        '  "torch>=2.2", "Transformers>=5.6,<6", "tokenizers>=0.22.1,!=0.23.1,!=0.23.2",\n'
        '  "numpy~=1.24", "unbounded", "pyyaml>=6",\n]\n'
    )
    assert floors(str(pyproject), {"torch"}) == [
        "Transformers==5.6",
        "tokenizers==0.22.1",
        "numpy==1.24",
        "pyyaml==6",
    ]


def test_every_direct_dependency_of_bertkit_has_a_floor_that_test_min_checks():
    dependencies = [r for r in requires("bertkit") if "extra ==" not in r]  # the installed pyproject.toml's
    pins = floors(str(REPO / "pyproject.toml"), {"torch"})
    assert len(pins) == len(dependencies) - 1 and all("==" in pin for pin in pins)
