"""Learning test: a 3-layer student distilled from a MiniLM teacher beats the same student trained
without the teacher at the same small budget, on real SST-2."""

from __future__ import annotations

import pytest
from conftest import DATA_DIR, minilm_or_skip, require_data

pytestmark = pytest.mark.learning

TEACHER_ROWS, STUDENT_ROWS = 2000, 500


def test_distilled_student_beats_the_same_student_without_teacher(tmp_path):
    from bertkit import api
    from bertkit.api.distillation import distill
    from bertkit.config import TrainConfig
    from bertkit.options.distillation import DistillOptions

    require_data("sst2", "train.tsv")
    minilm_or_skip()
    teacher = str(tmp_path / "teacher")
    config = TrainConfig(epochs=2, lr=5e-5, batch_size=32, max_train_samples=TEACHER_ROWS, max_length=64)
    taught = api.finetune("cls", "sst2", teacher, model="minilm", data_dir=str(DATA_DIR), config=config)
    # the students: the teacher's layers 0, 2, 4, the same rows, steps and seed; only the loss differs
    student = TrainConfig(epochs=2, lr=1e-4, batch_size=32, max_train_samples=STUDENT_ROWS, seed=1)
    scores = {}
    for alpha in (0.0, 0.5):  # 0: the gold labels only, no teacher
        result = distill(
            teacher,
            "sst2",
            str(tmp_path / f"student-{alpha}"),
            DistillOptions(student_layers=3, alpha=alpha),
            data_dir=str(DATA_DIR),
            config=student,
        )
        scores[alpha] = result.metrics["accuracy"]
    print("SST-2 dev: teacher", taught.metrics["accuracy"], "students (alpha: accuracy)", scores)
    assert taught.metrics["accuracy"] >= 0.78
    assert scores[0.5] >= scores[0.0] + 0.01
