"""Where commands write: an output that is (or holds) an input, a destination that is read-only,
under a file or on a full disk, and the flags that say where and how big. Same contract as the
other hostile corpora (tests/hostile.py's run_case): ONE line `error: ... (hint: ...)`, exit 2, no
traceback, nothing written or removed (a full disk keeps no staging directory, no .tmp file).
Written files' modes, a full disk after the work, a read-only model directory evaluated:
tests/cli/test_written_files.py. (A model card the user edited is kept: tests/cli/test_card_edits.py.)"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest
from hostile import CLS_CSV, Case, Context, run_case

TEXTS = "the film was good\nthe plot was bad\n"
CORPUS = "the film was good . the plot was bad .\n\nit was a great film .\njohn lives in paris .\n" * 4


class Mounts:
    """The per-test read_only and small_disk fixtures, for the cases' command-line builders."""

    read_only = None
    small_disk = None


MOUNTS = Mounts()


def read_only_dir(c: Context, name: str = "ro") -> Path:
    path = c.tmp / name
    path.mkdir(parents=True, exist_ok=True)
    return MOUNTS.read_only(path)


def copy_model(c: Context, task: str = "cls", where: Path | None = None) -> Path:
    target = (where or c.tmp) / f"{task}-copy"
    shutil.copytree(c.trained(task), target)
    return target


def read_only_model(c: Context, task: str = "cls") -> Path:
    return MOUNTS.read_only(copy_model(c, task))


def cardless_model(c: Context) -> Path:
    """A bertkit model directory without its card, report and figures (e.g. copied by hand)."""
    model = copy_model(c)
    for name in ("README.md", "report.html"):
        (model / name).unlink()
    shutil.rmtree(model / "figures")
    return model


def full_disk(kib: int, leave_kib: int = 0) -> Path:
    """A tmpfs of ``kib`` filled up to ``leave_kib`` free: a real full disk (ENOSPC everywhere)."""
    disk = MOUNTS.small_disk(kib)
    if leave_kib:
        stats = os.statvfs(disk)
        free = stats.f_bavail * stats.f_frsize
        (disk / "filler.bin").write_bytes(b"\0" * max(0, free - leave_kib * 1024))
    return disk


def model_on_full_disk(c: Context, task: str = "cls", leave_kib: int = 16) -> Path:
    disk = MOUNTS.small_disk(2048)
    model = copy_model(c, task, where=disk)
    stats = os.statvfs(disk)
    (disk / "filler.bin").write_bytes(b"\0" * max(0, stats.f_bavail * stats.f_frsize - leave_kib * 1024))
    return model


def embed(c: Context, output, *extra) -> list:
    return ["embed", c.tiny, "--input", c.file("in.txt", TEXTS), "--output", output, *extra]


def probe(c: Context, output, *extra, model=None) -> list:
    return ["probe", "cls", "--data", c.file("t.csv", CLS_CSV), "--model", model or c.tiny, "--output", output, *extra]


def pretrain(c: Context, output, *extra, model=None) -> list:
    return [
        "pretrain",
        "mlm",
        "--data",
        c.file("corpus.txt", CORPUS),
        "--model",
        model or c.tiny,
        "--output",
        output,
        "--epochs",
        "1",
        *extra,
    ]


def attention(c: Context, output, *extra) -> list:
    return ["inspect", "attention", c.tiny, "--text", "the film was good", "--output", output, *extra]


def mlm_model(c: Context) -> Path:
    """A `pretrain mlm` output (trained once per session, copied per case)."""
    if not hasattr(mlm_model, "path"):
        from bertkit.api.pretraining import pretrain_mlm
        from bertkit.config import TrainConfig
        from bertkit.options import RunOptions

        root = c.trained.root.parent / "outputs-mlm"
        root.mkdir(exist_ok=True)
        (root / "corpus.txt").write_text(CORPUS)
        pretrain_mlm(
            RunOptions(data=str(root / "corpus.txt"), output=str(root / "mlm"), model=str(c.tiny)),
            TrainConfig(epochs=1, batch_size=8, max_length=64),
        )
        mlm_model.path = root / "mlm"
    target = c.tmp / "mlm-copy"
    shutil.copytree(mlm_model.path, target)
    return target


def hub_answers(c: Context, fail_at: str | None) -> None:
    """A reachable Hub whose ``fail_at`` call (whoami, create_repo, create_commit) fails."""
    import huggingface_hub

    from bertkit import hub

    c.monkeypatch.setattr(hub, "hub_reachable", functools.lru_cache(maxsize=1)(lambda: True))

    def refuse(*args, **kwargs):
        raise RuntimeError(f"401 Client Error: {fail_at} refused")

    class Url(str):
        repo_id = "me/model"

    c.monkeypatch.setattr(huggingface_hub.HfApi, "whoami", lambda self, *a, **k: {"name": "me"})
    c.monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda self, *a, **k: Url("https://hf.co/me/model"))
    c.monkeypatch.setattr(huggingface_hub.HfApi, "create_commit", lambda self, *a, **k: "commit")
    if fail_at:
        c.monkeypatch.setattr(huggingface_hub.HfApi, fail_at, refuse)


def figures_file(c: Context) -> Path:
    model = copy_model(c)
    shutil.rmtree(model / "figures")
    (model / "figures").write_text("mine")
    return model


def user_dir(c: Context) -> Path:
    """A directory of the user's own files."""
    return c.file("mine/notes.md", "my notes").parent


CASES = [
    # --- embed ----------------------------------------------------------------------------------------
    Case(
        "embed-output-symlink-to-input",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("in.jsonl", '{"text": "a"}\n'),
            "--output",
            (c.tmp / "link.jsonl").symlink_to(c.tmp / "in.jsonl") or c.tmp / "link.jsonl",
        ],
        ("is the input file",),
    ),
    # a result file written over a file of a model directory would damage that model
    Case(
        "embed-output-over-a-models-history",
        lambda c: embed(c, copy_model(c) / "history.jsonl"),
        ("is a file of the model in", "elsewhere"),
    ),
    Case(
        "predict-output-over-a-models-history",
        lambda c: [
            "predict",
            c.trained("cls"),
            "--input",
            c.file("in.txt", TEXTS),
            "--output",
            copy_model(c) / "history.jsonl",
        ],
        ("is a file of the model in", "elsewhere"),
    ),
    Case("embed-output-read-only-dir", lambda c: embed(c, read_only_dir(c) / "v.npy"), ("cannot write in",)),
    Case("embed-output-jsonl-read-only-dir", lambda c: embed(c, read_only_dir(c) / "v.jsonl"), ("cannot write in",)),
    Case(
        "embed-output-deep-under-file",
        lambda c: embed(c, c.file("x.txt", "x") / "a" / "b" / "v.npy"),
        ("under a file",),
        ("mkdir -p",),
    ),
    Case(
        "embed-output-is-a-directory",
        lambda c: embed(c, (c.tmp / "d.npy").mkdir() or c.tmp / "d.npy"),
        ("is a directory",),
    ),
    Case(
        "embed-full-disk-npy",
        lambda c: ["embed", c.tiny, "--input", c.file("big.txt", TEXTS * 400), "--output", full_disk(256, 8) / "v.npy"],
        ("no space left on device", "free some space"),
    ),
    Case(
        "embed-full-disk-jsonl",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("big.txt", TEXTS * 400),
            "--output",
            full_disk(256, 8) / "v.jsonl",
        ],
        ("no space left on device",),
    ),
    Case(
        "embed-full-disk-npz",
        lambda c: ["embed", c.tiny, "--input", c.file("big.txt", TEXTS * 400), "--output", full_disk(256, 8) / "v.npz"],
        ("no space left on device",),
    ),
    # --- probe ----------------------------------------------------------------------------------------
    Case("probe-output-read-only-parent", lambda c: probe(c, read_only_dir(c) / "p"), ("cannot write in",)),
    Case(
        "probe-overwrite-mount-point",
        lambda c: probe(c, read_only_model(c), "--overwrite"),
        ("is a mount point", "choose a directory inside it"),
    ),
    Case("probe-output-empty-mount-point", lambda c: probe(c, read_only_dir(c, "vol")), ("is a mount point",)),
    Case("probe-output-is-the-data", lambda c: probe(c, c.tmp / "t.csv"), ("is a file",)),
    Case(
        "probe-overwrite-the-model-it-loads",
        lambda c: (lambda m: probe(c, m, "--overwrite", model=m))(copy_model(c)),
        ("is the input model directory",),
    ),
    Case(
        "probe-eval-data-inside-output",
        lambda c: (lambda m: probe(c, m, "--overwrite", "--eval-data", c.file("cls-copy/dev.csv", CLS_CSV)))(
            copy_model(c)
        ),
        ("holds files bertkit did not write (dev.csv)", "would delete"),
    ),
    Case("probe-output-under-file", lambda c: probe(c, c.file("f.txt", "x") / "p"), ("under a file",), ("mkdir -p",)),
    Case("probe-output-root", lambda c: probe(c, "/"), ("current directory or one of its parents",)),
    Case("probe-output-cwd-parent", lambda c: probe(c, ".."), ("current directory or one of its parents",)),
    Case(
        "probe-overwrite-user-dir",
        lambda c: probe(c, user_dir(c), "--overwrite"),
        ("holds files bertkit did not write",),
    ),
    Case("probe-full-disk", lambda c: probe(c, full_disk(120) / "p"), ("no space left on device while writing",)),
    # --- pretrain mlm ---------------------------------------------------------------------------------
    Case("pretrain-output-read-only-parent", lambda c: pretrain(c, read_only_dir(c) / "m"), ("cannot write in",)),
    Case(
        "pretrain-overwrite-the-model-it-loads",
        lambda c: (lambda m: pretrain(c, m, "--overwrite", model=m))(copy_model(c)),
        ("is the input model directory",),
    ),
    Case(
        "pretrain-eval-data-inside-output",
        lambda c: (lambda m: pretrain(c, m, "--overwrite", "--eval-data", c.file("cls-copy/held.txt", CORPUS)))(
            copy_model(c)
        ),
        ("holds files bertkit did not write (held.txt)", "would delete"),
    ),
    Case(
        "pretrain-output-under-file",
        lambda c: pretrain(c, c.file("f.txt", "x") / "m"),
        ("under a file",),
        ("mkdir -p",),
    ),
    Case(
        "pretrain-overwrite-user-dir",
        lambda c: pretrain(c, user_dir(c), "--overwrite"),
        ("holds files bertkit did not write",),
    ),
    Case("pretrain-output-is-the-corpus", lambda c: pretrain(c, c.file("corpus.txt", CORPUS)), ("is a file",)),
    # --- finetune (the rule the others follow) --------------------------------------------------------
    Case(
        "finetune-overwrite-the-model-it-loads",
        lambda c: (lambda m: c.finetune("cls", ("t.csv", CLS_CSV), "--output", m, "--overwrite", "--model", m))(
            copy_model(c)
        ),
        ("is the input model directory",),
    ),
    Case(
        "finetune-output-read-only-parent",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--output", read_only_dir(c) / "m"),
        ("cannot write in",),
    ),
    Case(
        "finetune-checkpoints-read-only",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--output", read_only_dir(c) / "m", "--save-every", "1"),
        ("cannot write in",),
    ),
    Case(
        "finetune-checkpoints-dir-is-a-file",
        lambda c: (
            c.finetune("cls", ("t.csv", CLS_CSV), "--save-every", "1") if c.file("out.checkpoints", "x") else None
        ),
        ("is a file, where checkpoints go",),
    ),
    Case(
        "finetune-logs-dir-is-a-file",
        lambda c: (
            c.finetune("cls", ("t.csv", CLS_CSV), "--report-to", "tensorboard") if c.file("out.logs", "x") else None
        ),
        ("is a file, where the trackers' logs go",),
    ),
    Case(
        "pretrain-checkpoints-dir-is-a-file",
        lambda c: pretrain(c, c.tmp / "m", "--save-every", "1") if c.file("m.checkpoints", "x") else None,
        ("is a file, where checkpoints go",),
    ),
    # --- eval -----------------------------------------------------------------------------------------
    Case(
        "eval-output-is-the-data",
        lambda c: ["eval", c.trained("cls"), "--data", c.file("e.csv", CLS_CSV), "--output", c.tmp / "e.csv"],
        ("is the input file",),
    ),
    Case(
        "eval-output-read-only-dir",
        lambda c: [
            "eval",
            c.trained("cls"),
            "--data",
            c.file("e.csv", CLS_CSV),
            "--output",
            read_only_dir(c) / "m.json",
        ],
        ("cannot write in",),
    ),
    Case(
        "eval-read-only-model-dir",
        lambda c: ["eval", read_only_model(c), "--data", c.file("e.csv", CLS_CSV)],
        ("the metrics file", "cannot write in"),
    ),
    Case(
        "eval-output-under-file",
        lambda c: [
            "eval",
            c.trained("cls"),
            "--data",
            c.file("e.csv", CLS_CSV),
            "--output",
            c.file("f.txt", "x") / "m.json",
        ],
        ("under a file",),
    ),
    Case("eval-mlm-without-data", lambda c: ["eval", mlm_model(c)], ("held-out", "not a file"), ("is gone",)),
    # --- predict --------------------------------------------------------------------------------------
    Case(
        "predict-output-is-the-input",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.txt", TEXTS), "--output", c.tmp / "in.txt"],
        ("is the input file",),
    ),
    Case(
        "predict-output-read-only-dir",
        lambda c: [
            "predict",
            c.trained("cls"),
            "--input",
            c.file("in.txt", TEXTS),
            "--output",
            read_only_dir(c) / "p.jsonl",
        ],
        ("cannot write in",),
    ),
    # --- inspect --------------------------------------------------------------------------------------
    Case("inspect-attention-png-read-only", lambda c: attention(c, read_only_dir(c) / "a.png"), ("cannot write in",)),
    Case(
        "inspect-attention-json-read-only",
        lambda c: attention(c, read_only_dir(c) / "a.json", "--json"),
        ("cannot write in",),
    ),
    Case(
        "inspect-attention-json-over-a-model-file",
        lambda c: attention(c, Path(c.tiny) / "config.json", "--json"),
        ("is a file of the model",),
    ),
    Case(
        "inspect-attention-json-missing-dir",
        lambda c: attention(c, c.tmp / "no" / "a.json", "--json"),
        ("does not exist",),
    ),
    Case(
        "inspect-attention-png-under-file",
        lambda c: attention(c, c.file("f.txt", "x") / "a.png"),
        ("under a file",),
        ("mkdir -p",),
    ),
    Case("inspect-attention-png-missing-dir", lambda c: attention(c, c.tmp / "no" / "a.png"), ("does not exist",)),
    Case(
        "inspect-attention-png-is-a-directory",
        lambda c: attention(c, (c.tmp / "d.png").mkdir() or c.tmp / "d.png"),
        ("is a directory",),
    ),
    Case(
        "inspect-attention-max-length-1000-json",
        lambda c: attention(c, c.tmp / "a.json", "--json", "--max-length", "1000"),
        ("512 positions",),
    ),
    Case("inspect-attention-dpi-zero", lambda c: attention(c, c.tmp / "a.png", "--dpi", "0"), ("--dpi 0",)),
    Case("inspect-attention-dpi-huge", lambda c: attention(c, c.tmp / "a.png", "--dpi", "100000"), ("--dpi 100000",)),
    Case(
        "inspect-attention-full-disk",
        lambda c: attention(c, full_disk(64, 4) / "a.png", "--all-heads"),
        ("no space left on device",),
    ),
    # --- report ---------------------------------------------------------------------------------------
    Case("report-read-only-model-dir", lambda c: ["report", read_only_model(c)], ("report of", "cannot write in")),
    Case("report-full-disk", lambda c: ["report", model_on_full_disk(c)], ("no space left on device",)),
    # --- export ---------------------------------------------------------------------------------------
    Case(
        "export-read-only-model-dir",
        lambda c: ["export", "onnx", read_only_model(c), "--data", c.file("e.csv", CLS_CSV)],
        ("cannot write in",),
    ),
    Case(
        "export-pretrain-output",
        lambda c: ["export", "onnx", mlm_model(c)],
        ("pretrain mlm", "fine-tune it"),
        ("is gone",),
    ),
    Case(
        "export-pretrain-output-with-data",
        lambda c: ["export", "onnx", mlm_model(c), "--data", c.file("c.txt", CORPUS)],
        ("pretrain mlm",),
    ),
    Case(
        "export-user-dir-in-onnx-dir",
        lambda c: (
            lambda m: (
                (m / "onnx" / "mine").mkdir(parents=True),
                ["export", "onnx", m, "--data", c.file("e.csv", CLS_CSV)],
            )[1]
        )(copy_model(c)),
        ("holds files an export did not write (mine)",),
    ),
    Case(
        "export-data-inside-onnx-dir",
        lambda c: (
            lambda m: ["export", "onnx", m, "--data", (m / "onnx").mkdir() or c.file("cls-copy/onnx/e.csv", CLS_CSV)]
        )(copy_model(c)),
        ("holds files an export did not write (e.csv)",),
    ),
    Case(
        "export-full-disk",
        lambda c: ["export", "onnx", model_on_full_disk(c), "--data", c.file("e.csv", CLS_CSV)],
        ("no space left on device",),
    ),
    Case(
        "export-onnx-is-a-user-file",
        lambda c: (
            lambda m: ((m / "onnx").write_text("mine"), ["export", "onnx", m, "--data", c.file("e.csv", CLS_CSV)])[1]
        )(copy_model(c)),
        ("is a file an export did not write",),
    ),
    Case("report-figures-is-a-file", lambda c: ["report", figures_file(c)], ("is a file, where the report's figures",)),
    Case(
        "eval-figures-is-a-file",
        lambda c: ["eval", figures_file(c), "--data", c.file("e.csv", CLS_CSV)],
        ("is a file, where the report's figures",),
    ),
    # --- names too long for the file system (with the hidden staging/.tmp siblings' suffixes) ----------
    Case("probe-output-name-too-long", lambda c: probe(c, c.tmp / ("x" * 240)), ("too long for the file system",)),
    Case(
        "finetune-output-parent-too-long",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--output", c.tmp / ("x" * 300) / "m"),
        ("too long",),
    ),
    Case("embed-output-name-too-long", lambda c: embed(c, c.tmp / ("x" * 240 + ".npy")), ("too long",)),
    Case("inspect-attention-name-too-long", lambda c: attention(c, c.tmp / ("x" * 300 + ".png")), ("too long",)),
    Case(
        "eval-output-name-too-long",
        lambda c: [
            "eval",
            c.trained("cls"),
            "--data",
            c.file("e.csv", CLS_CSV),
            "--output",
            c.tmp / ("m" * 250 + ".json"),
        ],
        ("too long",),
    ),
    # --- push: nothing written into the model directory, whatever fails -------------------------------
    Case(
        "push-no-card-offline",
        lambda c: (c.offline(), ["push", cardless_model(c), "--repo", "me/model"])[1],
        ("unreachable", "nothing was pushed"),
    ),
    Case(
        "push-no-card-token-refused",
        lambda c: (hub_answers(c, "whoami"), ["push", cardless_model(c), "--repo", "me/model"])[1],
        ("checking the token", "401"),
        (),
    ),
    Case(
        "push-no-card-upload-fails",
        lambda c: (hub_answers(c, "create_commit"), ["push", cardless_model(c), "--repo", "me/model"])[1],
        ("while uploading",),
    ),
    Case(
        "push-read-only-model-offline",
        lambda c: (c.offline(), ["push", read_only_model(c), "--repo", "me/m"])[1],
        ("unreachable",),
    ),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_output_locations_fail_in_one_line_and_change_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys, read_only, small_disk
):
    MOUNTS.read_only, MOUNTS.small_disk = read_only, small_disk
    work = tmp_path / "case"
    work.mkdir()
    # tmp_path is watched too: the small disks are mounted beside the case folder
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys, tmp_path, seconds=60)
