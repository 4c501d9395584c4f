"""tests/lowest_bounds.py: what `make test-min` pins, each direct dependency at its declared floor."""

from __future__ import annotations

from conftest import REPO
from lowest_bounds import Requirement, floors, tomllib  # its fallbacks for Python 3.10


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
    # read from pyproject.toml itself: an installed copy's metadata may predate the last dependency added
    with open(REPO / "pyproject.toml", "rb") as f:
        dependencies = [Requirement(line) for line in tomllib.load(f)["project"]["dependencies"]]
    pins = floors(str(REPO / "pyproject.toml"), {"torch"})
    pinned = {pin.split("==")[0].lower() for pin in pins}
    assert pinned == {d.name.lower() for d in dependencies} - {"torch"}
    assert all(any(s.operator == ">=" for s in d.specifier) for d in dependencies)
