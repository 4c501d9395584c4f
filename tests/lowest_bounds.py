"""Print pyproject.toml's dependency floors as pins, one `name==floor` a line, for `make test-min`.

    python tests/lowest_bounds.py pyproject.toml [--skip NAME ...] > constraints.txt

Each direct dependency with a lower bound (`>=X` or `~=X`) is pinned to X itself, so the test run
checks the bound as declared: uv's `--resolution lowest-direct` alone picks the lowest of each only
as far as its resolver order allows (it gave numpy 2.0.2 and pyarrow 16 for `numpy>=1.24`,
`pyarrow>=15`, once a newest transitive package had asked for more). A floor that cannot be installed
beside the others then fails the install, which is the point: the bound should be raised.
--skip leaves a dependency out (torch: the Makefile installs its own wheel).
"""

from __future__ import annotations

import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pip carries the same parser
    from pip._vendor import tomli as tomllib
try:
    from packaging.requirements import Requirement
except ModuleNotFoundError:
    from pip._vendor.packaging.requirements import Requirement


def floors(pyproject: str, skip: set[str]) -> list[str]:
    with open(pyproject, "rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    pins = []
    for line in dependencies:
        requirement = Requirement(line)
        if requirement.name.lower() in skip:
            continue
        lows = [spec.version for spec in requirement.specifier if spec.operator in (">=", "~=")]
        if lows:
            pins.append(f"{requirement.name}=={max(lows)}")
    return pins


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    skip = {name.lower() for flag, name in zip(argv[1:], argv[2:]) if flag == "--skip"}
    print("\n".join(floors(argv[0], skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
