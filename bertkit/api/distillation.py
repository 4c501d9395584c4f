"""`bertkit distill TEACHER_DIR`: train a smaller student on a fine-tuned teacher's softened outputs.

It is ``api.finetune`` with the distillation method added (bertkit/methods/distillation.py: its
hooks run at the spine's fixed points). This entry checks what needs no model: the teacher
directory, the student (the teacher's encoder with fewer layers, or another checkpoint with the
teacher's vocabulary), the task options, and reads the student's input as the teacher's (its long
texts and document context: a student that read other inputs would learn logits for text it never
sees).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bertkit.api.streaming import check_model_kept
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.methods import recorded_methods
from bertkit.methods.distillation import TASKS, Distillation
from bertkit.model_dir import load_meta
from bertkit.models import load_config, resolve_model
from bertkit.models.tokenizer import load_tokenizer
from bertkit.options import RunOptions, TrainConfig, default_output
from bertkit.options.distillation import DistillOptions
from bertkit.tasks.document_context import CONTEXT_OPTIONS
from bertkit.tasks.label_kinds import DEFAULT_KIND
from bertkit.tasks.long_text import LONG_TEXT_OPTIONS
from bertkit.training.plan import Driver

SINGLE_LABEL = (None, DEFAULT_KIND, "single_label_classification")
# The options that say what a model reads: the student reads as its teacher did
INPUT_OPTIONS = tuple(option.name for option in LONG_TEXT_OPTIONS + CONTEXT_OPTIONS)
# The gold loss's options of finetune: distillation trains with its own loss (networks/distillation.py)
GOLD_LOSS_OPTIONS = ("class_weights", "loss", "focal_gamma")


def distill(teacher: str, run: RunOptions, options: DistillOptions | None = None, config: TrainConfig | None = None):
    """Distil the model directory ``teacher`` into a student saved at ``run.output`` (default
    runs/distilled-<data>; a FinetuneResult). ``run.model`` is not read: the student is the teacher
    with ``options.student_layers`` layers, or ``options.student``."""
    from bertkit.api.finetuning import finetune

    options = (options or DistillOptions()).validate()
    config = (config or TrainConfig()).validate("bertkit distill")  # its hints name distill's --help
    meta = _teacher_meta(teacher)
    task = meta["task"]["task"]
    teacher_config = load_config(str(teacher), str(teacher))
    layers = teacher_config.num_hidden_layers
    taken, student = _student(teacher, layers, options, teacher_config)
    output = run.output or default_output(run.data, "distilled-")
    check_model_kept(Path(output).expanduser(), str(teacher))
    _check_task_options(task, config.task_options)
    config = replace(config, task_options=_teacher_inputs(meta, config.task_options))
    if config.max_length is None:  # the length the teacher was trained (and its logits are computed) at
        config = replace(config, max_length=meta["task"].get("max_length"))
    plan = Distillation(str(teacher), meta, layers, options, taken, Path(output).expanduser())
    if options.plain_student:
        plan.plain_metrics = _plain_student(task, replace(run, model=student), config, plan)
    return finetune(task, replace(run, model=student, output=output), config, Driver(methods=(plan,)))


def _plain_student(task: str, run: RunOptions, config: TrainConfig, distilling: Distillation) -> dict:
    """The evaluation metrics of the same student trained on the gold labels alone (alpha 0: the
    teacher's outputs weigh nothing), with the same data, steps, seed and code path: the baseline a
    distilled student must beat. Trained in a scratch directory that is not kept."""
    import tempfile

    from bertkit.api.finetuning import finetune

    notice("baseline", "distill --plain-student: training the same student without the teacher first (the baseline)")
    gold_only = replace(
        distilling.options, alpha=0.0, hidden_loss=None, unlabelled=None, augment=0, plain_student=False
    )
    with tempfile.TemporaryDirectory(prefix="bertkit-plain-student-") as scratch:
        output = Path(scratch) / "student"
        plain = Distillation(
            distilling.teacher, distilling.meta, distilling.teacher_layers, gold_only, distilling.taken, output
        )
        quiet = replace(run, output=str(output), overwrite=False, report_to="none", resume=False, resume_from=None)
        metrics = finetune(task, quiet, config, Driver(methods=(plain,))).metrics
    if not metrics:
        notice("baseline", "distill --plain-student: no evaluation data, so no comparison with the plain student")
    return metrics


def _check_task_options(task: str, given: dict) -> None:
    from bertkit.tasks import get_task_class

    declared = {option.name for option in get_task_class(task).options_for("finetune")}
    foreign = sorted(name for name in given if name not in declared)
    if foreign:
        flags = ", ".join("--" + name.replace("_", "-") for name in foreign)
        raise BertkitError(f"{flags}: not an option of the teacher's task ({task})", f"drop {flags}")
    unused = sorted(name for name in given if name in GOLD_LOSS_OPTIONS)
    if unused:
        flags = ", ".join("--" + name.replace("_", "-") for name in unused)
        raise BertkitError(
            f"{flags}: bertkit distill trains with its own loss (the teacher's softened outputs plus "
            "cross-entropy on the gold labels), which these do not change",
            f"drop {flags}; --alpha weighs the two parts",
        )


def _teacher_inputs(meta: dict, given: dict) -> dict:
    """The student's task options, reading its input as the teacher's (a different value given: refused)."""
    recorded = meta["task"].get("options") or {}
    taught = {name: recorded[name] for name in INPUT_OPTIONS if recorded.get(name) is not None}
    for name, value in taught.items():
        if name in given and given[name] != value:
            flag = "--" + name.replace("_", "-")
            raise BertkitError(
                f"{flag} {given[name]}: the teacher read its input with {flag} {value}; a student that reads other "
                "input learns the teacher's outputs for text it never sees",
                f"drop {flag} (the student reads as its teacher did)",
            )
    return {**given, **taught}


def _teacher_meta(teacher: str) -> dict:
    path = Path(teacher).expanduser()
    if not (path / "bertkit.json").is_file():
        raise BertkitError(
            f"TEACHER_DIR {teacher} is not a bertkit model directory (no bertkit.json)",
            "give a directory that `bertkit finetune` wrote",
        )
    meta = load_meta(str(path))
    task, kind = meta["task"]["task"], (meta["task"].get("options") or {}).get("problem_type")
    if meta.get("kind") != "finetune" or task not in TASKS:
        raise BertkitError(
            f"TEACHER_DIR {teacher} is a {_what(task, meta.get('kind'))} directory; distill takes cls, pair and ner "
            "models (qa: not supported, docs: distillation.md)",
            "give a directory that `bertkit finetune cls|pair|ner` wrote",
        )
    unloadable = [method.flag for method in recorded_methods(meta) if not method.ordinary_weights(meta)]
    if unloadable:
        raise BertkitError(
            f"TEACHER_DIR {teacher} was trained with {unloadable[0]}: its directory holds no ordinary task model's "
            "weights for the teacher to run and the student to be made of",
            "give a teacher fine-tuned without it (with --lora: without --save-adapter, the adapters merged)",
        )
    if kind not in SINGLE_LABEL:
        raise BertkitError(
            f"TEACHER_DIR {teacher} is a {kind} model; distill takes single-label classifiers and taggers",
            "give a teacher fine-tuned with one label per example",
        )
    return meta


def _what(task: str, kind: str | None) -> str:
    """A directory's kind as a message names it: "qa finetune", "multi-head" (not "multi multi-head")."""
    return kind if kind and kind.startswith(task) else f"{task} {kind}"


def _student(teacher: str, layers: int, options: DistillOptions, teacher_config) -> tuple[list | None, str]:
    """(the teacher layers taken, or None for a --student checkpoint; the --model finetune loads)."""
    if options.student is not None:
        _check_vocabulary(teacher, options.student)
        if options.hidden_loss is not None:
            student_config = load_config(resolve_model(options.student), options.student)
            if student_config.hidden_size != teacher_config.hidden_size:
                raise BertkitError(
                    f"--hidden-loss compares hidden states: the teacher's are {teacher_config.hidden_size} wide, "
                    f"--student {options.student}'s {student_config.hidden_size} (no projection is learned)",
                    "drop --hidden-loss, or use --student-layers",
                )
        return None, options.student
    count = options.student_layers if options.student_layers is not None else layers // 2
    if not 1 <= count < layers:
        raise BertkitError(
            f"--student-layers {count} must be below the teacher's {layers} layers (and at least 1)",
            f"e.g. --student-layers {max(1, layers // 2)}" if layers > 1 else "give a smaller --student checkpoint",
        )
    from bertkit.networks.distillation import chosen_layers

    return chosen_layers(layers, count), str(teacher)


def _check_vocabulary(teacher: str, student: str) -> None:
    """The teacher scores the student's token ids: their vocabularies must be one."""
    ref = resolve_model(student)
    theirs = load_tokenizer(ref, student, load_config(ref, student)).get_vocab()
    ours = load_tokenizer(str(teacher), str(teacher), load_config(str(teacher), str(teacher))).get_vocab()
    if theirs == ours:
        return
    only_ours = sorted(set(ours) - set(theirs))[:3]
    moved = sorted(t for t in set(ours) & set(theirs) if ours[t] != theirs[t])[:3]
    shown = f"tokens only the teacher has: {only_ours}" if only_ours else f"tokens with other ids: {moved}"
    raise BertkitError(
        f"--student {student} has another vocabulary than the teacher ({len(theirs)} vs {len(ours)} tokens; "
        f"{shown or 'ids differ'}): the teacher's logits would be for other tokens",
        "give a --student with the teacher's tokenizer, or use --student-layers",
    )
