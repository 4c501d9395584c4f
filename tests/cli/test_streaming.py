"""predict and embed at any size: chunked, streamed, resumable, Parquet (bertkit.api.streaming)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, said_when_the_work_started

from bertkit.options import InferenceOptions, PredictOptions

WORDS = "good bad film movie great awful plot acting fine boring the a was very not".split()
ROWS = 1037  # not a multiple of any chunk or batch size used here


def write_rows(path: Path, rows: int = ROWS, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with open(path, "w") as handle:
        for i in range(rows):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
            handle.write(json.dumps({"id": f"r{i}", "text": text}) + "\n")
    return path


def bertkit_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "bertkit", *map(str, args)]


def env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "BERTKIT_DEBUG": ""}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_streamed_predictions_equal_in_memory_and_are_byte_stable(trained, tmp_path, run_cli):
    from bertkit import api

    model, source = trained("cls"), write_rows(tmp_path / "in.jsonl")
    in_memory = api.predict(
        str(model), PredictOptions(input=str(source)), InferenceOptions(batch_size=16, precision="no")
    )
    for name, chunk in (("a.jsonl", 100), ("b.jsonl", 100), ("c.jsonl", 333)):
        code, _, err = run_cli(
            "predict",
            model,
            "--input",
            source,
            "--output",
            tmp_path / name,
            "--chunk-rows",
            chunk,
            "--batch-size",
            16,
            "--precision",
            "no",
        )
        assert code == 0, err
    streamed = read_jsonl(tmp_path / "a.jsonl")
    assert len(streamed) == len(in_memory) == ROWS
    for got, want in zip(streamed, in_memory):
        assert (got["id"], got["text"], got["label"]) == (want["id"], want["text"], want["label"])
        assert got["score"] == pytest.approx(want["score"], abs=1e-5)  # batches are composed differently
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert [r["id"] for r in read_jsonl(tmp_path / "c.jsonl")] == [r["id"] for r in in_memory]
    assert "predict: 1,037 rows of 1,037 (100.0%)" in err and "rows/s" in err  # progress with a known size
    assert not list(tmp_path.glob(".*partial*"))  # the parts are gone once the file is whole


def test_parquet_shards_in_parquet_out_keep_ids_texts_and_fields(trained, tmp_path, run_cli):
    import pyarrow as pa
    import pyarrow.parquet as pq

    model, rows = trained("cls"), read_jsonl(write_rows(tmp_path / "in.jsonl"))
    shards = tmp_path / "shards"
    shards.mkdir()
    for index, (start, stop) in enumerate(((0, 400), (400, 401), (401, ROWS))):  # one shard of a single row
        pq.write_table(pa.Table.from_pylist(rows[start:stop]), shards / f"part-{index}.parquet")
    fp32 = ("--precision", "no")  # bf16 scores differ by more than 1e-5 between differently composed batches
    code, _, err = run_cli(
        "predict", model, "--input", shards, "--output", tmp_path / "p.parquet", "--chunk-rows", 250, *fp32
    )
    assert code == 0, err
    code, _, err = run_cli("predict", model, "--input", tmp_path / "in.jsonl", "--output", tmp_path / "p.jsonl", *fp32)
    assert code == 0, err
    table = pq.read_table(tmp_path / "p.parquet")
    assert table.column_names[:3] == ["id", "text", "label"] and "probabilities" in table.column_names
    expected = read_jsonl(tmp_path / "p.jsonl")
    got = table.to_pylist()
    assert [r["id"] for r in got] == [r["id"] for r in expected] and [r["label"] for r in got] == [
        r["label"] for r in expected
    ]
    assert np.allclose([r["score"] for r in got], [r["score"] for r in expected], atol=1e-5)


def test_streamed_embeddings_equal_in_memory_in_every_format(tiny_bert, tmp_path, run_cli):
    import pyarrow.parquet as pq

    source = write_rows(tmp_path / "in.jsonl")
    code, _, err = run_cli("embed", tiny_bert, "--input", source, "--output", tmp_path / "all.npz", "--precision", "no")
    assert code == 0, err
    whole = np.load(tmp_path / "all.npz")
    for name in ("v.npy", "v.parquet", "v.jsonl"):
        code, _, err = run_cli(
            "embed", tiny_bert, "--input", source, "--output", tmp_path / name, "--chunk-rows", 200, "--precision", "no"
        )
        assert code == 0, err
    vectors = np.load(tmp_path / "v.npy")
    assert vectors.shape == whole["vectors"].shape and np.allclose(vectors, whole["vectors"], atol=1e-5)
    table = pq.read_table(tmp_path / "v.parquet")
    assert table.column("id").to_pylist() == list(whole["ids"])
    assert np.allclose(np.array(table.column("vector").to_pylist(), dtype=np.float32), vectors, atol=1e-6)
    lines = read_jsonl(tmp_path / "v.jsonl")
    assert [r["id"] for r in lines] == list(whole["ids"]) and np.allclose(
        [r["vector"] for r in lines], vectors, atol=1e-5
    )


def test_in_memory_embed_reads_parquet_shards_as_the_stream_does(tiny_bert, tmp_path, run_cli):
    """.npz and --per-word are built in memory; they read what the stream reads (Parquet, shards)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = read_jsonl(write_rows(tmp_path / "in.jsonl", rows=57))
    (tmp_path / "shards").mkdir()
    for n, start in enumerate(range(0, 57, 20)):
        pq.write_table(pa.Table.from_pylist(rows[start : start + 20]), tmp_path / "shards" / f"part-{n}.parquet")
    for name, source in (("jsonl.npz", tmp_path / "in.jsonl"), ("shards.npz", tmp_path / "shards" / "*.parquet")):
        code, _, err = run_cli("embed", tiny_bert, "--input", source, "--output", tmp_path / name, "--precision", "no")
        assert code == 0, err
    want, got = np.load(tmp_path / "jsonl.npz"), np.load(tmp_path / "shards.npz")
    assert list(got["ids"]) == [row["id"] for row in rows] == list(want["ids"])
    np.testing.assert_allclose(got["vectors"], want["vectors"], atol=1e-6)
    code, _, err = run_cli(
        "embed",
        tiny_bert,
        "--input",
        tmp_path / "shards",
        "--output",
        tmp_path / "words.npz",
        "--per-word",
        "--precision",
        "no",
    )
    assert code == 0, err
    assert list(np.load(tmp_path / "words.npz")["ids"]) == [row["id"] for row in rows]


def _kill_after_parts(command: list[str], output: Path, parts: int) -> None:
    """Start the command, SIGKILL it once ``parts`` chunks are recorded as complete."""
    progress = output.with_name(f".{output.name}.bertkit-partial") / "progress.json"
    process = subprocess.Popen(command, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if len(json.loads(progress.read_text())["parts"]) >= parts:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    assert process.poll() is None, process.stderr.read().decode()  # still running: killed mid-way
    process.send_signal(signal.SIGKILL)
    process.wait()


@pytest.mark.parametrize("command, suffix", [("predict", ".jsonl"), ("embed", ".npy"), ("predict", ".parquet")])
def test_sigkill_at_a_random_chunk_then_resume_gives_the_identical_file(command, suffix, trained, tiny_bert, tmp_path):
    model = trained("cls") if command == "predict" else tiny_bert
    source = write_rows(tmp_path / "in.jsonl", 1200)
    whole, resumed = tmp_path / f"whole{suffix}", tmp_path / f"resumed{suffix}"
    base = [command, model, "--input", source, "--chunk-rows", 60, "--batch-size", 16, "--precision", "no"]
    subprocess.run(bertkit_cmd(*base, "--output", whole), env=env(), check=True, capture_output=True)
    at = random.Random().randint(1, 15)  # of 20 chunks
    _kill_after_parts(bertkit_cmd(*base, "--output", resumed), resumed, at)
    assert not resumed.exists()  # never half a file
    done = subprocess.run(
        bertkit_cmd(*base, "--output", resumed, "--resume"), env=env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "resumed after" in done.stderr, done.stderr
    assert resumed.read_bytes() == whole.read_bytes(), f"killed after {at} chunks"
    assert not list(tmp_path.glob(".*partial*"))


def test_resume_refuses_what_would_not_match(trained, tmp_path, run_cli):
    model, source = trained("cls"), write_rows(tmp_path / "in.jsonl", 300)
    output = tmp_path / "out.jsonl"
    _kill_after_parts(
        bertkit_cmd("predict", model, "--input", source, "--output", output, "--chunk-rows", 20, "--batch-size", 4),
        output,
        2,
    )
    assert_user_error(
        run_cli(
            "predict", model, "--input", source, "--output", output, "--chunk-rows", 50, "--batch-size", 4, "--resume"
        ),
        "chunk_rows",
        "differ",
    )
    write_rows(source, 301)
    assert_user_error(
        run_cli(
            "predict", model, "--input", source, "--output", output, "--chunk-rows", 20, "--batch-size", 4, "--resume"
        ),
        "the input changed",
    )
    assert_user_error(run_cli("predict", model, "--input", "-", "--resume"), "--resume")
    code, _, err = run_cli("predict", model, "--input", source, "--output", output, "--chunk-rows", 20)
    assert code == 0 and "discarded" in err, err  # without --resume: a fresh run, as before
    assert len(read_jsonl(output)) == 301


def test_a_pipe_into_head_gets_its_rows_while_the_input_is_still_coming(trained, tmp_path):
    """stdin from a producer that never ends: only streaming can answer, and the run stops quietly."""
    producer = tmp_path / "producer.py"
    producer.write_text(
        "import itertools, json, os, sys, time\n"
        "try:\n"
        "    for i in itertools.count():\n"
        "        print(json.dumps({'id': i, 'text': 'a good film'}), flush=i % 50 == 0)\n"
        "        time.sleep(0.0005)\n"
        "except BrokenPipeError:\n"
        "    os._exit(0)\n"
    )
    pipeline = (
        f"{sys.executable} {producer} | "
        f"{' '.join(bertkit_cmd('predict', trained('cls'), '--input', '-', '--chunk-rows', 100))} | head -n 5"
    )
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline], env=env(), capture_output=True, text=True, timeout=120
    )
    lines = done.stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [0, 1, 2, 3, 4], done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert time.monotonic() - started < 120


@pytest.mark.parametrize("lines, bad", [(20_000, 15_001), (300, 251), (3, 1)])
def test_a_bad_byte_is_reported_on_its_own_line(lines, bad, tmp_path):
    """The decoder reads ahead in blocks: the line it had reached is not the bad byte's line."""
    from bertkit.data.streams import InputStream
    from bertkit.errors import BertkitError

    rows = [f"sentence number {i} is a fine one".encode() for i in range(1, lines + 1)]
    rows[bad - 1] = b"caf\xe9 au lait"
    path = tmp_path / "in.txt"
    path.write_bytes(b"\n".join(rows) + b"\n")
    with pytest.raises(BertkitError, match=f"is not UTF-8 text \\(bad byte on line {bad}\\) \\(hint"):
        list(InputStream(str(path)).records())


def count_opens(monkeypatch, *paths: Path) -> dict:
    """How many times each of ``paths`` is opened from now on, by any reader (open(), Path.read_text)."""
    import builtins
    import io

    opened = {Path(path).resolve(): 0 for path in paths}
    original = io.open

    def counting(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file).resolve() in opened:
            opened[Path(file).resolve()] += 1
        return original(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(io, "open", counting)  # pathlib opens through io.open
    return opened


def count_meta_reads(monkeypatch) -> list:
    """The model directories whose bertkit.json is read from now on, one entry a read: every bertkit
    module loaded that holds the meta reader gets a counting one (the package's and meta's too, so a
    module imported later takes the counting one)."""
    from bertkit.model_dir import meta

    original, reads = meta.load_meta, []

    def counting(model_dir, *args, **kwargs):
        reads.append(Path(model_dir).resolve())
        return original(model_dir, *args, **kwargs)

    for module in [m for name, m in list(sys.modules.items()) if name.startswith("bertkit")]:
        if getattr(module, "load_meta", None) is original:
            monkeypatch.setattr(module, "load_meta", counting)
    return reads


def test_one_predict_reads_its_input_once_and_bertkit_json_once(trained, tmp_path, run_cli, monkeypatch):
    """No validation pass before the chunks: each chunk is checked as it is read; the model's
    bertkit.json is read by the Predictor and handed to the loading of the weights."""
    model, source = trained("cls"), write_rows(tmp_path / "in.jsonl")
    opened, meta_reads = count_opens(monkeypatch, source), count_meta_reads(monkeypatch)
    code, _, err = run_cli("predict", model, "--input", source, "--output", tmp_path / "p.jsonl", "--chunk-rows", 100)
    assert code == 0, err
    assert opened == {source.resolve(): 1}
    assert meta_reads == [model.resolve()]
    assert len(read_jsonl(tmp_path / "p.jsonl")) == ROWS
    assert (
        "predict: 64 rows of ~" in err and "ETA" in err
    )  # the total estimated from the bytes read (the first, small chunk)
    assert "predict: 1,037 rows of 1,037 (100.0%)" in err  # the last chunk knows the total


def test_one_embed_reads_its_input_once(tiny_bert, tmp_path, run_cli, monkeypatch):
    source = write_rows(tmp_path / "in.jsonl", 300)
    for output in ("v.npy", "v.npz"):  # streamed, and built in memory (the stream collected)
        opened = count_opens(monkeypatch, source)
        code, _, err = run_cli(
            "embed",
            tiny_bert,
            "--input",
            source,
            "--output",
            tmp_path / output,
            "--chunk-rows",
            70,
            "--precision",
            "no",
        )  # fp32: the two are compared below
        assert code == 0, err
        assert opened == {source.resolve(): 1}, output
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), np.load(tmp_path / "v.npz")["vectors"], atol=1e-6)


@pytest.mark.parametrize("command", ["predict", "embed"])
def test_a_bad_row_in_a_later_chunk_leaves_no_output_and_no_parts(command, trained, tiny_bert, tmp_path, run_cli):
    """Checked as it is read, the bad row is found after earlier chunks were written as parts (their
    progress lines printed): the run still ends in one error line, with no output file and none of
    its parts left."""
    model = trained("cls") if command == "predict" else tiny_bert
    source = write_rows(tmp_path / "in.jsonl", 500)
    lines = source.read_text().splitlines()
    lines[420] = '{"id": "r420", "text": '  # invalid JSON on line 421, in the fifth chunk of 100
    source.write_text("\n".join(lines) + "\n")
    output = tmp_path / ("out.jsonl" if command == "predict" else "out.npy")
    code, _, err = run_cli(command, model, "--input", source, "--output", output, "--chunk-rows", 100)
    said = said_when_the_work_started()  # the precision, a busy machine: printed when the work began
    errors = [line for line in err.splitlines() if not line.startswith(f"{command}: ") and line not in said]
    assert code == 2 and len(errors) == 1 and errors[0].startswith("error: ") and "Traceback" not in err, err
    assert "in.jsonl:421: invalid JSON" in errors[0] and "--resume" not in errors[0]  # resuming would stop there too
    assert not output.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no staging directory, no temporary file


def test_a_task_reading_a_whole_file_keeps_ids_and_is_left_as_it_was(trained, tmp_path):
    """A .json array is read by the task itself; predict keeps each record's id without replacing
    the task's from_records (a copy reads the file)."""
    from bertkit import api
    from bertkit.api.prediction import Predictor, _read_whole

    source = tmp_path / "in.json"
    source.write_text(json.dumps([{"id": "a", "text": "a good film"}, {"id": 7, "text": "bad"}]))
    predictor = Predictor(str(trained("cls")))
    examples = _read_whole(predictor.adapter, source)
    assert [example["id"] for example in examples] == ["a", 7]
    assert "from_records" not in vars(predictor.adapter)
    assert [row["id"] for row in api.predict(str(trained("cls")), PredictOptions(input=str(source)))] == ["a", 7]


def _unfinished_run(model, source: Path, output: Path, parts: int) -> Path:
    """The partial directory of a predict killed after ``parts`` chunks of 60 rows."""
    base = ["predict", model, "--input", source, "--chunk-rows", 60, "--batch-size", 16, "--precision", "no"]
    _kill_after_parts(bertkit_cmd(*base, "--output", output), output, parts)
    return output.with_name(f".{output.name}.bertkit-partial")


def _damage(work: Path, how: str) -> int:
    """Damage the unfinished run's parts; returns the first row the resumed run must redo."""
    part = work / "part-000002.jsonl"
    if how == "truncated":  # a disk full or a copy cut short: half of the part, a broken last line
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    elif how == "deleted":
        part.unlink()
    elif how == "swapped":  # the same sizes of rows, the wrong rows
        other = work / "part-000001.jsonl"
        held = other.read_bytes()
        other.write_bytes(part.read_bytes())
        part.write_bytes(held)
        return 61
    elif how == "rows-edited":  # the record says fewer rows than the part (and its chunk) holds
        record = json.loads((work / "progress.json").read_text())
        record["parts"][1]["rows"] = 30
        (work / "progress.json").write_text(json.dumps(record))
        return 61
    elif how == "unproven":  # a record with rows but no size and hash (an older bertkit's)
        record = json.loads((work / "progress.json").read_text())
        for entry in record["parts"]:
            entry.pop("sha256"), entry.pop("bytes")
        (work / "progress.json").write_text(json.dumps(record))
        return 1
    return 121


_UNINTERRUPTED: dict = {}


@pytest.mark.parametrize("how", ["truncated", "deleted", "swapped", "rows-edited", "unproven"])
def test_resume_verifies_each_part_and_redoes_a_damaged_one(how, trained, tmp_path):
    """progress.json records each part's rows, bytes and sha256: a part truncated, deleted or
    swapped since is found before the resumed run builds on it, said, and redone with the parts
    after it, so the file is byte for byte the uninterrupted run's (it used to be exit 0 with a
    broken JSON line and rows missing)."""
    model, source = trained("cls"), write_rows(tmp_path / "in.jsonl", 600)
    base = ["predict", model, "--input", source, "--chunk-rows", 60, "--batch-size", 16, "--precision", "no"]
    resumed = tmp_path / "resumed.jsonl"
    if "whole" not in _UNINTERRUPTED:  # the same rows (seeded) and model for every damage: run once
        whole = tmp_path / "whole.jsonl"
        subprocess.run(bertkit_cmd(*base, "--output", whole), env=env(), check=True, capture_output=True)
        _UNINTERRUPTED["whole"] = whole.read_bytes()
    work = _unfinished_run(model, source, resumed, 4)
    record = json.loads((work / "progress.json").read_text())
    assert all({"rows", "bytes", "sha256"} <= set(entry) for entry in record["parts"])
    first = _damage(work, how)
    done = subprocess.run(
        bertkit_cmd(*base, "--output", resumed, "--resume"), env=env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert f"redoing it and what follows, from row {first:,}" in done.stderr, done.stderr
    if first > 1:
        assert f"resumed after {first - 1:,} rows" in done.stderr, done.stderr
    assert resumed.read_bytes() == _UNINTERRUPTED["whole"]
    assert f"{600:,} predictions written" in done.stderr


def test_a_part_record_naming_another_file_is_redone_not_read(trained, tmp_path):
    """progress.json is data on disk: a part naming a file outside the work directory is not read."""
    model, source = trained("cls"), write_rows(tmp_path / "in.jsonl", 300)
    output = tmp_path / "out.jsonl"
    work = _unfinished_run(model, source, output, 2)
    record = json.loads((work / "progress.json").read_text())
    record["parts"][0]["file"] = "../in.jsonl"
    (work / "progress.json").write_text(json.dumps(record))
    base = ["predict", model, "--input", source, "--chunk-rows", 60, "--batch-size", 16, "--precision", "no"]
    done = subprocess.run(bertkit_cmd(*base, "--output", output, "--resume"), env=env(), capture_output=True, text=True)
    assert done.returncode == 0 and "names an unexpected file" in done.stderr, done.stderr
    assert [row["id"] for row in read_jsonl(output)] == [f"r{i}" for i in range(300)]
    assert source.read_text().count("\n") == 300  # the input left as it was


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child, before bertkit starts: SIGINT acts (Python raises KeyboardInterrupt). A test
    suite started in the background by a non-interactive shell (`make test &`) inherits SIGINT
    ignored, as POSIX shells do for background jobs; bertkit then rightly ignores it too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_stdin_run_stopped_after_a_chunk_keeps_no_parts_and_says_no_resume(trained, tmp_path):
    """Standard input cannot be read again (--resume refuses it): a stdin run into a file stopped
    after a chunk leaves no partial directory and does not say `rerun with --resume`."""
    output = tmp_path / "p.jsonl"
    command = bertkit_cmd("predict", trained("cls"), "--input", "-", "--output", output, "--chunk-rows", 100)
    process = subprocess.Popen(
        command,
        env=env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    process.stdin.write("".join(json.dumps({"id": i, "text": "a good film"}) + "\n" for i in range(150)).encode())
    process.stdin.flush()  # the first chunk (64 rows) is done while the input is still open
    progress = output.with_name(f".{output.name}.bertkit-partial") / "progress.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (progress.is_file() and json.loads(progress.read_text())["parts"]):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    # stdin stays open until the process ends, so only the signal can end it: a signal that does not
    # act fails here as a timeout, not as a whole run finished when communicate() closes stdin.
    process.wait(timeout=60)
    _, err = process.communicate(timeout=60)
    assert process.returncode != 0 and b"--resume" not in err, err.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no partial directory


def test_the_first_rows_come_back_after_a_small_first_chunk(trained, tmp_path):
    """Chunks start small and grow to --chunk-rows (64, 128, ... 10,000): `| head -n 5` over 50,000
    rows returns after the first chunk of 64 rows, not after the first 10,000; its rows are the
    first 5 of a full run (the first chunk is the same 64 rows in both)."""
    source = write_rows(tmp_path / "big.jsonl", 50_000)
    model = trained("cls")
    pipeline = f"{' '.join(bertkit_cmd('predict', model, '--input', source))} 2>{tmp_path / 'err.txt'} | head -n 5"
    done = subprocess.run(["bash", "-c", pipeline], env=env(), capture_output=True, text=True, timeout=300)
    progress = [line for line in (tmp_path / "err.txt").read_text().splitlines() if line.startswith("predict: ")]
    assert progress and progress[0].startswith("predict: 64 rows"), progress
    last_rows = int(progress[-1].split()[1].replace(",", ""))
    assert last_rows < 1_000, progress  # stopped at the second or third chunk, 49,000 rows unread
    head = [json.loads(line) for line in done.stdout.splitlines()]
    first = tmp_path / "first.jsonl"
    first.write_text("".join(_first_lines(source, 1_000)))
    full = subprocess.run(bertkit_cmd("predict", model, "--input", first), env=env(), capture_output=True, text=True)
    assert head == [json.loads(line) for line in full.stdout.splitlines()[:5]]
    assert [row["id"] for row in head] == ["r0", "r1", "r2", "r3", "r4"]


def _first_lines(path: Path, count: int) -> list[str]:
    with open(path) as handle:
        return [next(handle) for _ in range(count)]


def test_a_semicolon_csv_streams_with_its_sniffed_separator(trained, tmp_path, run_cli):
    """predict reads a .csv as training does: the separator is sniffed (a quoted ';' stays text),
    and a header that holds another separator is named, not reported as a missing column."""
    model = trained("cls")
    source = tmp_path / "semi.csv"
    source.write_text('id;text\n1;"the film was good; very good"\n2;the plot was bad\n')
    code, out, err = run_cli("predict", model, "--input", source, "--precision", "no")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["id"], r["text"]) for r in rows] == [("1", "the film was good; very good"), ("2", "the plot was bad")]
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("text;label\nthe film;was;good\n")  # no separator fits every row: read as commas
    result = run_cli("predict", model, "--input", wrong, "--output", tmp_path / "o.jsonl")
    assert_user_error(result, "reads as one column with comma separators", "semicolons")
    assert not (tmp_path / "o.jsonl").exists()


def test_a_long_chunk_says_where_it_is_between_its_batches(trained, tmp_path, run_cli, monkeypatch):
    """Off a terminal a chunk that takes minutes must not leave the log silent: with the pace at 0
    the stream says its rows after every batch inside the chunk, not only at its end."""
    monkeypatch.setenv("BERTKIT_PROGRESS_SECONDS", "0")
    source = write_rows(tmp_path / "in.jsonl", rows=64)
    code, _, err = run_cli(
        "predict", trained("cls"), "--input", source, "--output", tmp_path / "o.jsonl", "--chunk-rows", 64,
        "--batch-size", 8, "--precision", "no",
    )  # fmt: skip
    assert code == 0, err
    said = [int(line.split()[1].replace(",", "")) for line in err.splitlines() if line.startswith("predict: ")]
    assert said[-1] == 64 and any(0 < rows < 64 for rows in said[:-1]), err
    assert said == sorted(said)
