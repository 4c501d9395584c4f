"""The hostile corpus of #30's ownership rule: the user's files beside bertkit's in every kind of
directory a command deletes or replaces (``OUT.seeds``, ``OUT.folds``, ``OUT.tune`` and its trials,
``OUT.checkpoints`` and its steps, a model directory's folders), and shared Optuna studies that
belong to another --output or were searched over other ranges. Each is refused before any work in
ONE line naming the user's files, exit 2, nothing written or removed (tests/hostile.py's run_case).

bertkit's side of each folder is made by bertkit's own code: the manifest by
``model_dir.removal.claim``, the runs as copies of a trained model, the checkpoints by a real
checkpointed run (tests/checkpoint_corpus.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from checkpoint_corpus import (
    SHARED,
    checkpoints,
    shared_root,  # noqa: F401  (the module's autouse fixture: the shared checkpointed run)
    train_command,
)
from hostile import CLS_CSV, Case, Context, run_case

from bertkit.model_dir.removal import claim


def runs_dir(c: Context, name: str, runs: tuple, listed: bool = True) -> Path:
    """``<tmp>/<name>`` holding trained copies named ``runs``, listed in its manifest unless not ``listed``."""
    root = claim(c.tmp / name, *runs) if listed else c.tmp / name
    for run in runs:
        shutil.copytree(c.trained("cls"), root / run)
    return root


def seeds(c: Context, *extra) -> list:
    return c.finetune("cls", ("t.csv", CLS_CSV), "--eval-data", c.file("d.csv", CLS_CSV), "--seeds", 2, *extra)


def folds(c: Context, *extra) -> list:
    return c.finetune("cls", ("t.csv", CLS_CSV), "--folds", 2, *extra)


def tune(c: Context, *extra) -> list:
    return [
        "tune",
        "cls",
        "--data",
        c.file("t.csv", CLS_CSV),
        "--eval-data",
        c.file("d.csv", CLS_CSV),
        "--model",
        c.tiny,
        "--output",
        c.tmp / "out",
        "--trials",
        1,
        "--epochs",
        1,
        *extra,
    ]


def shared_study(c: Context, output: str | None = None, lr=None) -> list:
    """A study in a database outside the case's folder with one complete trial, trained for
    ``output`` (this case's --output when None) over ``lr`` (the default range when None)."""
    optuna = pytest.importorskip("optuna")
    url = f"sqlite:///{c.tmp.parent / 'shared.db'}"
    study = optuna.create_study(study_name="shared", storage=url, direction="maximize", load_if_exists=True)
    lr = lr or optuna.distributions.FloatDistribution(1e-5, 1e-4, log=True)
    value = lr.choices[0] if hasattr(lr, "choices") else lr.low
    trial = optuna.trial.create_trial(
        params={"lr": value},
        distributions={"lr": lr},
        value=0.5,
        user_attrs={"output": output or str((c.tmp / "out").resolve())},
    )
    study.add_trial(trial)
    return tune(c, "--storage", url, "--study-name", "shared", "--trials", 2)


def with_user_file(c: Context, relative: str, text: str = "mine") -> Path:
    return c.file(relative, text)


CASES = [
    # --- finetune --seeds -------------------------------------------------------------------------------
    Case(
        "seeds-overwrite-user-file-beside-the-runs",
        lambda c: (
            runs_dir(c, "out.seeds", ("seed-42",)),
            with_user_file(c, "out.seeds/notes.txt"),
            seeds(c, "--overwrite"),
        )[2],
        ("out.seeds, where --seeds puts its runs, holds files bertkit did not write (notes.txt)",),
        ("earlier --seeds run",),
    ),
    Case(
        "seeds-overwrite-user-file-inside-a-run",
        lambda c: (
            runs_dir(c, "out.seeds", ("seed-42",)),
            with_user_file(c, "out.seeds/seed-42/predictions.csv"),
            seeds(c, "--overwrite"),
        )[2],
        ("holds files bertkit did not write (seed-42/predictions.csv)",),
    ),
    Case(
        "seeds-overwrite-user-file-in-a-runs-figures",
        lambda c: (
            runs_dir(c, "out.seeds", ("seed-42",)),
            with_user_file(c, "out.seeds/seed-42/figures/plot.svg"),
            seeds(c, "--overwrite"),
        )[2],
        ("(seed-42/figures/plot.svg)",),
    ),
    Case(
        "seeds-runs-dir-of-the-users-only",
        lambda c: (with_user_file(c, "out.seeds/plan.txt"), seeds(c))[1],
        ("holds files bertkit did not write (plan.txt)", "choose another --output"),
        ("earlier --seeds run", "pass --overwrite"),  # the user's files: --overwrite would not help
    ),
    Case(
        "seeds-earlier-set-without-overwrite",
        lambda c: (runs_dir(c, "out.seeds", ("seed-42", "seed-43")), seeds(c))[1],
        ("holds an earlier --seeds run's models", "--overwrite"),
    ),
    Case(
        "seeds-a-model-the-manifest-does-not-list",
        lambda c: (runs_dir(c, "out.seeds", ("seed-1",), listed=False), seeds(c, "--overwrite"))[1],
        ("holds files bertkit did not write (seed-1)",),
    ),
    # --- finetune --folds -------------------------------------------------------------------------------
    Case(
        "folds-overwrite-user-file-in-a-fold",
        lambda c: (
            runs_dir(c, "out.folds", ("fold-1", "fold-2")),
            with_user_file(c, "out.folds/fold-2/notes.md"),
            folds(c, "--overwrite"),
        )[2],
        ("where --folds puts its runs, holds files bertkit did not write (fold-2/notes.md)",),
    ),
    Case(
        "folds-overwrite-a-users-folder",
        lambda c: (with_user_file(c, "out.folds/fold-1/keep/me.txt"), folds(c, "--overwrite"))[1],
        ("holds files bertkit did not write (fold-1)",),
    ),
    # --- tune ---------------------------------------------------------------------------------------------
    Case(
        "tune-user-file-in-a-trial-dir-before-any-study",
        lambda c: (with_user_file(c, "out.tune/trial-0/notes.txt"), tune(c))[1],
        ("where tune keeps its trials and study, holds files bertkit did not write (trial-0)",),
    ),
    Case(
        "tune-user-file-in-a-listed-trial",
        lambda c: (
            runs_dir(c, "out.tune", ("trial-0",)),
            claim(c.tmp / "out.tune", ".lock", "study.db"),
            with_user_file(c, "out.tune/trial-0/notes.txt"),
            tune(c),
        )[3],
        ("holds files bertkit did not write (trial-0/notes.txt)",),
    ),
    Case(
        "tune-user-file-beside-the-study",
        lambda c: (claim(c.tmp / "out.tune", ".lock", "study.db"), with_user_file(c, "out.tune/results.csv"), tune(c))[
            2
        ],
        ("holds files bertkit did not write (results.csv)",),
    ),
    Case(
        "tune-shared-study-of-another-output",
        lambda c: shared_study(c, output="/elsewhere/model"),
        ("study 'shared' is run for --output /elsewhere/model", "run it with --output /elsewhere/model"),
    ),
    Case(
        "tune-shared-study-searched-another-range",
        lambda c: shared_study(c, lr=__import__("optuna").distributions.FloatDistribution(2e-5, 5e-5, log=True)),
        ("searched lr over numbers 2e-05..5e-05 (log), this run over numbers 1e-05..0.0001 (log)",),
    ),
    Case(
        "tune-shared-study-searched-another-kind",
        lambda c: shared_study(c, lr=__import__("optuna").distributions.CategoricalDistribution([1e-5, 2e-5])),
        ("searched lr over the choices 1e-05, 2e-05, this run over numbers",),
    ),
    # --- checkpoints ---------------------------------------------------------------------------------------
    Case(
        "checkpoints-overwrite-user-file-beside-them",
        lambda c: (
            checkpoints(c),
            with_user_file(c, "out.checkpoints/notes.txt"),
            train_command(c, None, "--overwrite"),
        )[2],
        ("out.checkpoints holds files bertkit did not write (notes.txt), which --overwrite would delete",),
    ),
    Case(
        "checkpoints-overwrite-user-file-in-a-step",
        lambda c: (
            checkpoints(c),
            with_user_file(c, "out.checkpoints/step-2/why.txt"),
            train_command(c, None, "--overwrite"),
        )[2],
        ("holds files bertkit did not write (step-2/why.txt)",),
    ),
    # --- a model directory's own folders ---------------------------------------------------------------
    Case(
        "finetune-overwrite-user-file-in-figures",
        lambda c: (
            shutil.copytree(c.trained("cls"), c.tmp / "out"),
            with_user_file(c, "out/figures/notes.txt"),
            c.finetune("cls", ("t.csv", CLS_CSV), "--overwrite"),
        )[2],
        ("holds files bertkit did not write (figures/notes.txt), which --overwrite would delete",),
    ),
    Case(
        "finetune-overwrite-user-file-in-an-export",
        lambda c: (
            shutil.copytree(c.trained("cls"), c.tmp / "out"),
            with_user_file(c, "out/onnx/export.json", "{}"),
            with_user_file(c, "out/onnx/calibration.npz"),
            c.finetune("cls", ("t.csv", CLS_CSV), "--overwrite"),
        )[3],
        ("holds files bertkit did not write (onnx/calibration.npz)",),
    ),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 15 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_deletes_refuse_the_users_files_in_one_line_and_remove_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys, SHARED["root"], seconds=60)
