"""bertkit.ray on a real local Ray cluster (2 CPUs, started here, one per module): 2 actors
predict / embed Ray Datasets and give the rows single-process `predict` / `embed` give, in order;
run() (what `--ray` calls) end to end on Parquet shards; the errors."""

from __future__ import annotations

import json
import random
import sys

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'bertkit[ray]')")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'bertkit[ray]')")

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import assert_user_error

from bertkit import api
from bertkit.errors import BertkitError
from bertkit.options import EmbeddingOptions, PredictOptions

WORDS = "the a movie film plot was very good great bad awful poor it this acting story not".split()
ROWS = 53  # not a multiple of the Ray batch size


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A 2-CPU local cluster on 127.0.0.1, shut down after this module."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="ERROR", log_to_driver=False
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def rows():
    """53 rows with ids; texts from 2 to 90 words, so some are cut at the model's 64 tokens."""
    rng = random.Random(0)
    return [
        {"id": i, "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 90 if i % 4 == 0 else 20)))}
        for i in range(ROWS)
    ]


@pytest.fixture(scope="module")
def files(rows, tmp_path_factory):
    """The rows as 3 Parquet shards (a glob of them) and as one JSONL file."""
    root = tmp_path_factory.mktemp("ray-input")
    (root / "shards").mkdir()
    for n, (start, stop) in enumerate([(0, 20), (20, 40), (40, ROWS)]):
        pq.write_table(pa.Table.from_pylist(rows[start:stop]), root / "shards" / f"part-{n}.parquet")
    (root / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return {"glob": str(root / "shards" / "*.parquet"), "jsonl": str(root / "rows.jsonl"), "root": root}


def dataset(rows):
    """The rows in 4 blocks, so both actors get work."""
    return ray.data.from_items(rows, override_num_blocks=4)


def assert_same_predictions(got: list[dict], want: list[dict]) -> None:
    assert [row["id"] for row in got] == [row["id"] for row in want] == list(range(ROWS))  # same order
    assert any(row.get("truncated") for row in want), "no long text: the test would miss the truncated column"
    for mine, theirs in zip(got, want):
        assert mine["text"] == theirs["text"] and mine["label"] == theirs["label"]
        assert mine["score"] == pytest.approx(theirs["score"], abs=1e-5)
        probabilities = json.loads(mine["probabilities"])  # nested values are JSON strings
        assert probabilities.keys() == theirs["probabilities"].keys()
        for label, p in theirs["probabilities"].items():
            assert probabilities[label] == pytest.approx(p, abs=1e-5)
        assert bool(mine["truncated"]) == bool(theirs.get("truncated"))  # null where predict has no key
        assert set(mine) == {"id", "text", "label", "score", "probabilities", "truncated"}


def test_missing_ray_is_a_one_line_error(monkeypatch):
    import bertkit.ray

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(BertkitError) as caught:
        bertkit.ray.predict_dataset(None, "model")
    assert caught.value.message.startswith("Ray is not installed")
    assert caught.value.hint == "pip install 'bertkit[ray]'"
    assert "\n" not in str(caught.value)


def test_run_starts_its_own_cluster_and_a_bad_row_is_one_error(trained, rows, tmp_path):
    """run() as `--ray` without an address calls it: in a process of its own (before this module's
    cluster exists) it starts a local cluster, stops at the bad row with a BertkitError, leaves no
    output and shuts its cluster down (the process ends)."""
    import subprocess

    bad = [dict(row) for row in rows[:20]]
    bad[13]["text"] = ""
    source = tmp_path / "bad.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in bad))
    script = (
        "import sys\nfrom bertkit.errors import BertkitError\nfrom bertkit.ray import run\n"
        "try:\n    run('predict', sys.argv[1], sys.argv[2], sys.argv[3], actors=1, batch_size=8)\n"
        "except BertkitError as exc:\n    print(f'error: {exc}', file=sys.stderr)\n    sys.exit(2)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(trained("cls")), str(source), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: Ray batch of ") and "empty text" in last and "(hint: " in last, last
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert not (tmp_path / "out").exists()


def test_cli_ray_flag_writes_what_predict_writes(trained, files, tmp_path):
    """`bertkit predict ... --ray --actors 2` in a process of its own (a local cluster it starts and
    stops): Parquet files whose rows, read back in file order, are `bertkit predict`'s."""
    import subprocess

    model, output = trained("cls"), tmp_path / "predictions"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertkit",
            "predict",
            str(model),
            "--input",
            files["glob"],
            "--output",
            str(output),
            "--ray",
            "--actors",
            "2",
            "--batch-size",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{ROWS} predictions written to {output}" in done.stderr and "on 2 Ray actor(s)" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions"]  # its writer's lock gone with it
    assert " INFO " not in done.stderr, done.stderr[-3000:]  # Ray Data's plan and progress: quiet unless asked
    table = pa.concat_tables(pq.read_table(part) for part in sorted(output.iterdir()))
    assert_same_predictions(table.to_pylist(), api.predict(str(model), PredictOptions(input=files["glob"])))


def test_a_ray_output_being_written_by_another_run_is_refused_before_any_cluster(run_cli, trained, files, tmp_path):
    """Two --ray runs on one local --output would write the same part-NNNNNN.parquet names, the later
    replacing the earlier's files one by one (a mix of both runs): the second is refused in one line."""
    import os
    import subprocess

    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        os.symlink(str(first.pid), tmp_path / ".out.bertkit-lock")
        started = ray.is_initialized()
        assert_user_error(
            run_cli("predict", trained("cls"), "--input", files["jsonl"], "--output", tmp_path / "out", "--ray"),
            f"being written by another bertkit run (process {first.pid})",
        )
        assert ray.is_initialized() == started and [p.name for p in tmp_path.iterdir()] == [".out.bertkit-lock"]
    finally:
        first.kill()
        first.wait()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (
            ["predict", "{model}", "--input", "{jsonl}", "--output", "{out}", "--ray", "--resume"],
            "--resume does not apply",
        ),
        (
            ["predict", "{model}", "--input", "{jsonl}", "--output", "{out}", "--ray", "--chunk-rows", "5"],
            "--chunk-rows",
        ),
        (["embed", "{model}", "--input", "{jsonl}", "--output", "{out}", "--ray", "--per-word"], "--per-word"),
        (["predict", "{model}", "--input", "{jsonl}", "--ray-address", "auto"], "--ray-address needs --ray"),
        (["embed", "{model}", "--input", "{jsonl}", "--output", "{out}.npy", "--actors", "4"], "--actors needs --ray"),
        (["predict", "{model}", "--input", "{jsonl}", "--ray"], "--output is required"),
        (["predict", "{model}", "--input", "{jsonl}", "--output", "{out}.jsonl", "--ray"], "directory of Parquet"),
        (["predict", "{model}", "--input", "{jsonl}", "--output", "{out}", "--ray", "--actors", "0"], "--actors must"),
        (["predict", "{model}", "--input", "{jsonl}", "--output", "{out}", "--ray", "--n-best", "2"], "does not apply"),
    ],
)
def test_cli_ray_mistakes_are_one_line_before_any_cluster(run_cli, trained, files, tmp_path, args, fragment):
    values = {"model": trained("cls"), "jsonl": files["jsonl"], "out": tmp_path / "out"}
    started = ray.is_initialized()
    assert_user_error(run_cli(*[arg.format(**values) for arg in args]), fragment)
    assert ray.is_initialized() == started and list(tmp_path.iterdir()) == []  # no cluster started, nothing written


def test_predict_dataset_equals_single_process_predict(cluster, trained, rows, files):
    from bertkit.ray import predict_dataset

    model = trained("cls")
    want = api.predict(str(model), PredictOptions(input=files["jsonl"]))
    got = predict_dataset(dataset(rows), str(model), actors=2, batch_size=8).take_all()
    assert_same_predictions(got, want)


def test_embed_dataset_equals_single_process_embed(cluster, tiny_bert, rows, files):
    import numpy as np

    from bertkit.ray import embed_dataset

    want = api.embed(str(tiny_bert), EmbeddingOptions(input=files["jsonl"]))
    got = embed_dataset(dataset(rows), str(tiny_bert), actors=2, batch_size=8).take_all()
    assert [row["id"] for row in got] == want.ids == [str(i) for i in range(ROWS)]
    vectors = np.stack([np.asarray(row["vector"], dtype=np.float32) for row in got])
    assert vectors.shape == want.vectors.shape and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, want.vectors, atol=1e-5)


def test_run_end_to_end_on_parquet_shards(cluster, trained, files, tmp_path):
    from bertkit.ray import run

    model = trained("cls")
    output = tmp_path / "predictions"
    summary = run("predict", str(model), files["glob"], str(output), actors=2, batch_size=8)
    assert summary["rows"] == ROWS and summary["actors"] == 2 and summary["rows_per_second"] > 0
    assert summary["output"] == str(output.resolve())
    parts = sorted(output.iterdir())
    assert parts and all(part.name.startswith("part-") and part.suffix == ".parquet" for part in parts)
    table = pa.concat_tables(pq.read_table(part) for part in parts)  # file names sort in row order
    got = table.to_pylist()
    assert_same_predictions(got, api.predict(str(model), PredictOptions(input=files["glob"])))
    assert table.schema.field("truncated").type == pa.bool_() and table.schema.field("id").type == pa.int64()

    with pytest.raises(BertkitError, match="already exists"):  # never appends to an earlier run's files
        run("predict", str(model), files["glob"], str(output), actors=2, batch_size=8)
    url = "file://" + files["glob"]  # a URL: the glob is expanded through pyarrow's filesystems (as for s3://)
    embedded = run("embed", str(model), url, str(output), actors=1, batch_size=16, overwrite=True)
    assert embedded["rows"] == ROWS
    vectors = pa.concat_tables(pq.read_table(part) for part in sorted(output.iterdir()))
    assert vectors.column_names == ["id", "vector"]
    assert vectors.column("id").to_pylist() == [str(i) for i in range(ROWS)]
    assert pa.types.is_fixed_size_list(vectors.schema.field("vector").type)


def test_mistakes_fail_before_any_actor(cluster, trained, files, tmp_path):
    from bertkit.ray import predict_dataset, run

    model = str(trained("cls"))
    with pytest.raises(BertkitError, match="--actors"):
        predict_dataset(dataset([{"text": "x"}]), model, actors=0)
    with pytest.raises(BertkitError, match="does not apply"):  # Predictor's own check, on the driver
        predict_dataset(dataset([{"text": "x"}]), model, options=PredictOptions(task_options={"n_best": 3}))
    with pytest.raises(BertkitError, match="directory of Parquet"):
        run("predict", model, files["jsonl"], str(tmp_path / "out.jsonl"))
    with pytest.raises(BertkitError, match="no file matches"):
        run("predict", model, str(tmp_path / "*.parquet"), str(tmp_path / "out"))


def test_a_bad_row_in_an_actor_is_a_bertkit_error(cluster, trained, rows):
    """Last in this module: Ray 2.60 keeps a failed actor pool's actors (and their CPUs) until the
    driver exits, and a 2-CPU cluster then has no CPU left for another pool."""
    from bertkit.ray import predict_dataset

    bad = [dict(row) for row in rows[:10]]
    bad[7]["text"] = ""
    with pytest.raises(BertkitError, match="empty text") as caught:  # Ray's exception is a BertkitError
        predict_dataset(dataset(bad), str(trained("cls")), actors=1, batch_size=8).take_all()
    assert caught.value.hint == "remove or fill those rows"
