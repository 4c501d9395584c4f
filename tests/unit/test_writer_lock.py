"""One run at a time writes an output (bertkit.model_dir.writer_lock): a live writer refuses a second
one, a dead one's lock is taken over, the lock goes when the command ends however it ends, and only
commands that write outputs (and only a launch's main process) take one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bertkit.errors import BertkitError
from bertkit.model_dir.files import check_output_dir
from bertkit.model_dir.writer_lock import lock_file, writes_outputs


@writes_outputs
def command(output, then=lambda: None):
    """A command that checks its output, then works (``then``)."""
    check_output_dir(output, overwrite=False)
    assert os.readlink(lock_file(output.resolve())) == str(os.getpid())
    return then()


@pytest.fixture
def live_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child.pid
    child.kill()
    child.wait()


@pytest.fixture
def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_live_writer_refuses_a_second_run_in_one_line_before_it_looks(tmp_path, live_process):
    output = tmp_path / "model"
    os.symlink(str(live_process), lock_file(output))
    with pytest.raises(BertkitError) as refused:
        command(output)
    assert f"--output {output} is being written by another bertkit run (process {live_process})" in str(refused.value)
    assert str(lock_file(output)) in refused.value.hint
    assert os.readlink(lock_file(output)) == str(live_process)  # the live writer's lock is left alone
    assert not output.exists()


def test_a_dead_writers_lock_is_taken_over_and_every_lock_goes_when_the_command_ends(tmp_path, dead_pid):
    output = tmp_path / "model"
    os.symlink(str(dead_pid), lock_file(output))
    assert command(output, then=lambda: "done") == "done"
    assert not os.path.lexists(lock_file(output))
    with pytest.raises(ZeroDivisionError):  # a command that fails lets go too
        command(output, then=lambda: 1 / 0)
    assert not os.path.lexists(lock_file(output))


def test_a_file_in_the_locks_place_that_is_no_lock_is_taken_over(tmp_path):
    output = tmp_path / "model"
    lock_file(output).write_text("12")  # a plain file (no process id to read): nobody's lock
    command(output)
    assert not os.path.lexists(lock_file(output))


def test_the_holding_process_may_check_again_and_the_outer_command_lets_go(tmp_path):
    output = tmp_path / "model"
    inner_left = []
    command(output, then=lambda: inner_left.append(command(output) or os.path.lexists(lock_file(output))))
    assert inner_left == [True]  # the inner command did not take the lock, so it did not remove it
    assert not os.path.lexists(lock_file(output))


def test_no_lock_outside_a_writing_command_or_off_the_main_process(tmp_path, monkeypatch):
    output = tmp_path / "model"
    check_output_dir(output, overwrite=False)  # tune's own check: several processes share one study
    assert not os.path.lexists(lock_file(output))

    @writes_outputs
    def another_rank():
        check_output_dir(output, overwrite=False)
        return os.path.lexists(lock_file(output))

    monkeypatch.setenv("RANK", "1")
    assert another_rank() is False


def test_folders_made_for_the_lock_go_when_the_run_fails_and_stay_when_it_saves(tmp_path):
    output = tmp_path / "runs" / "deep" / "model"
    with pytest.raises(ZeroDivisionError):
        command(output, then=lambda: 1 / 0)
    assert not (tmp_path / "runs").exists()
    command(output, then=lambda: output.mkdir())  # a save makes the output inside them
    assert sorted(p.name for p in output.parent.iterdir()) == ["model"]
