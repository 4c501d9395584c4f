"""``python -m benchmarks run [--quick] [--only ...]``: see benchmarks/run.py and benchmarks/README.md."""

from benchmarks.run import main

if __name__ == "__main__":
    raise SystemExit(main())
