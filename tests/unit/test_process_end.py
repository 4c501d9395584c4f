"""A rank of several processes leaves without the interpreter's teardown (which can abort it after
its output is written, bertkit.process_end), yet with the exit code, output, atexit handlers and
thread joins an ordinary exit gives."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bertkit.cli import process_end
from bertkit.cli.app import main as cli_main

REPO = Path(__file__).resolve().parents[2]

# A process that does what a finished command leaves behind: unflushed output on a pipe, a
# non-daemon thread still working, an executor never shut down, an atexit handler, and an object
# whose finaliser runs only in the interpreter's teardown.
LEAVER = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from bertkit.cli import process_end

    class InTeardown:
        def __del__(self):
            print("teardown ran", flush=True)

    KEPT = InTeardown()
    sys.stdout.write("unflushed output\\n")
    atexit.register(lambda: print("atexit ran"))
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread finished"))).start()
    ThreadPoolExecutor(max_workers=1).submit(lambda: (time.sleep(0.2), print("executor finished")))
    if sys.argv[1] == "skip":
        process_end.leave(eval(sys.argv[2]))
    sys.exit(eval(sys.argv[2]))
    """
)


def run_leaver(mode: str, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", LEAVER, mode, code], cwd=REPO, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(("code", "status"), [("None", 0), ("0", 0), ("2", 2), ("130", 130), ("'bad'", 1)])
def test_leave_exits_as_sys_exit_does_without_the_teardown(code, status):
    ordinary, skipped = run_leaver("exit", code), run_leaver("skip", code)
    assert ordinary.returncode == skipped.returncode == status
    for done in (ordinary, skipped):
        assert "unflushed output" in done.stdout
        assert {"atexit ran", "thread finished", "executor finished"} <= set(done.stdout.splitlines())
    assert "teardown ran" in ordinary.stdout  # the check can see a teardown ...
    assert "teardown ran" not in skipped.stdout  # ... and leave skipped it
    assert ordinary.stderr == skipped.stderr == ("bad\n" if status == 1 else "")


@pytest.fixture
def left(monkeypatch):
    """The CLI's entry point run in-process, with leave() recording the code it was given."""
    codes = []

    def record(code):
        codes.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(process_end, "leave", record)
    return codes


@pytest.mark.parametrize(("argv", "code"), [(["--version"], 0), (["--no-such-option"], 2), (["eval"], 2)])
def test_the_cli_leaves_through_process_end_only_as_a_rank(left, monkeypatch, argv, code):
    monkeypatch.setattr(sys, "argv", ["bertkit", *argv])
    with pytest.raises(SystemExit) as ordinary:
        cli_main()
    assert ordinary.value.code == code and left == []
    monkeypatch.setattr(process_end, "in_process_group", lambda: True)
    with pytest.raises(SystemExit) as as_rank:
        cli_main()
    assert as_rank.value.code == code and left == [code]


def test_a_process_without_a_process_group_is_no_rank():
    assert not process_end.in_process_group()
