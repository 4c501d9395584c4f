"""`bertkit distill TEACHER_DIR`: train a smaller student on a fine-tuned teacher's softened outputs.

It is ``api.finetune`` with a ``Distillation`` handed in: the same reading, engine, evaluation and
all-or-nothing model directory. The distillation adds, at fixed points of that run: a check that
the teacher's task and labels are the data's (before any model loads), the student (the teacher's
encoder with fewer layers, or another checkpoint with the teacher's vocabulary), the teacher's
logits for every training feature (computed once, cached: bertkit/api/teacher_cache.py), the
unlabelled text the teacher labels, the loss (bertkit/networks/distillation.py), and bertkit.json's
``distillation`` section: the teacher, the layers taken, the parameter and measured speed ratios.

Not for qa: a span model's logits are two distributions over a window's tokens, whose windows a
student with another --max-length would cut differently; refused, said so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from bertkit.api.streaming import check_model_kept
from bertkit.api.teacher_cache import cache_root, teacher_fingerprint, teacher_logits
from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.model_dir import load_meta
from bertkit.models import load_config, load_model, load_tokenizer, resolve_model
from bertkit.options import TrainConfig
from bertkit.options.distillation import DistillOptions
from bertkit.tasks.base import PREDICT
from bertkit.tasks.label_kinds import DEFAULT_KIND

TASKS = ("cls", "pair", "ner")
SINGLE_LABEL = (None, DEFAULT_KIND, "single_label_classification")
SPEED_FEATURES = 256  # the training features timed through teacher and student for the speed ratio
IGNORED = -100  # an unlabelled row's gold label: not scored by the hard loss


def distill(
    teacher: str,
    data: str,
    output: str,
    options: DistillOptions | None = None,
    eval_data: str | None = None,
    data_dir: str | None = None,
    config: TrainConfig | None = None,
    overwrite: bool = False,
    report_to: str | None = None,
    threads: int | None = None,
    resume: bool = False,
    resume_from: str | None = None,
):
    """Distil the model directory ``teacher`` into a student saved at ``output`` (a FinetuneResult)."""
    from bertkit.api.finetuning import finetune

    options = (options or DistillOptions()).validate()
    config = (config or TrainConfig()).validate("bertkit distill")  # its hints name distill's --help
    meta = _teacher_meta(teacher)
    task = meta["task"]["task"]
    teacher_config = load_config(str(teacher), str(teacher))
    layers = teacher_config.num_hidden_layers
    taken, student = _student(teacher, layers, options, teacher_config)
    check_model_kept(Path(output).expanduser(), str(teacher))
    _check_task_options(task, config.task_options)
    if config.max_length is None:  # the length the teacher was trained (and its logits are computed) at
        config = replace(config, max_length=meta["task"].get("max_length"))
    plan = Distillation(str(teacher), meta, layers, options, taken, Path(output).expanduser())
    return finetune(
        task,
        data,
        output,
        model=student,
        eval_data=eval_data,
        data_dir=data_dir,
        config=config,
        overwrite=overwrite,
        report_to=report_to,
        threads=threads,
        resume=resume,
        resume_from=resume_from,
        distill=plan,
    )


def _check_task_options(task: str, given: dict) -> None:
    from bertkit.tasks import get_task_class

    declared = {option.name for option in get_task_class(task).options_for("finetune")}
    foreign = sorted(name for name in given if name not in declared)
    if foreign:
        flags = ", ".join("--" + name.replace("_", "-") for name in foreign)
        raise BertkitError(f"{flags}: not an option of the teacher's task ({task})", f"drop {flags}")


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
            f"TEACHER_DIR {teacher} is a {task} {meta.get('kind')} directory; distill takes cls, pair and ner "
            "models (qa: not supported, see README)",
            "give a directory that `bertkit finetune cls|pair|ner` wrote",
        )
    if kind not in SINGLE_LABEL:
        raise BertkitError(
            f"TEACHER_DIR {teacher} is a {kind} model; distill takes single-label classifiers and taggers",
            "give a teacher fine-tuned with one label per example",
        )
    return meta


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


@dataclass
class Distillation:
    """What a distillation adds to a finetune run (api/finetuning.py calls it at fixed points)."""

    teacher: str
    meta: dict
    teacher_layers: int
    options: DistillOptions
    taken: list | None  # the teacher layers the student starts from (None: a --student checkpoint)
    output: Path
    teacher_network: object = None
    unlabelled: list = field(default_factory=list)
    record: dict = field(default_factory=dict)

    def check_task(self, adapter) -> None:
        """The data's labels are the teacher's (ids included); the unlabelled text reads as the task's."""
        labels = self.meta["task"].get("labels")
        if adapter.labels != labels:
            raise BertkitError(
                f"the data's labels {adapter.labels} are not the teacher's {labels}: its logits are for other classes",
                "give data with the teacher's label set, or a teacher trained on this data's labels",
            )
        if self.options.unlabelled is not None:
            self.unlabelled = _read_unlabelled(adapter, self.options.unlabelled)

    def student(self, network):
        """The teacher's model with only the layers taken (a --student checkpoint: as loaded)."""
        if self.taken is None:
            return network
        from bertkit.networks.distillation import drop_layers

        notice(
            "weights",
            f"student: the teacher's layers {self.taken} of 0..{self.teacher_layers - 1} (0-based), "
            "with its embeddings and head",
            layers=self.taken,
        )
        return drop_layers(network, self.taken)

    def with_teacher(self, adapter, engine, tokenizer, features: list, preprocessing: dict) -> list:
        """The training features (and the unlabelled text's) with the teacher's logits."""
        from bertkit.export.fingerprint import fingerprint

        if self.unlabelled:
            extra = adapter.preprocess(self.unlabelled, tokenizer, train=False)
            features = list(features) + [_soft_only(f, adapter.per_token_outputs) for f in extra]
            preprocessing["unlabelled_features"] = len(extra)
        self.teacher_network = load_model(adapter.model_class, self.teacher, self.teacher, trained=True)
        self.teacher_network.to(engine.accelerator.device).eval()
        print_ = teacher_fingerprint(fingerprint(self.teacher), features, adapter.targets, engine.precision)
        cached = teacher_logits(
            engine,
            self.teacher_network,
            features,
            adapter.per_token_outputs,
            tokenizer.pad_token_id,
            32,
            cache_root(self.output),
            print_,
        )
        self.record["teacher_logits"] = {"reused": cached.reused, "computed": cached.computed}
        return [{**f, "teacher_logits": logits} for f, logits in zip(features, cached.logits)]

    def training_network(self, network):
        from bertkit.networks.distillation import DistillationLoss

        o = self.options
        teacher = self.teacher_network if o.hidden_loss else None
        return DistillationLoss(network, o.temperature, o.alpha, teacher, o.hidden_loss, o.hidden_weight)

    def collator(self, tokenizer, targets):
        from bertkit.networks.distillation import DistillCollator

        return DistillCollator(tokenizer.pad_token_id, targets)

    def trained_model(self, network):
        from bertkit.networks.distillation import DistillationLoss

        return network.model if isinstance(network, DistillationLoss) else network

    def sections(self, engine, student, features: list) -> dict:
        """bertkit.json's ``distillation`` section: the teacher, the student, the loss, the ratios."""
        from bertkit.networks.distillation import measure_speed, parameter_count

        sample = features[:SPEED_FEATURES]
        pad = getattr(student.config, "pad_token_id", 0) or 0
        teacher_speed, student_speed = measure_speed(
            (self.teacher_network, student), sample, pad, engine.accelerator.device
        )
        size = (parameter_count(self.teacher_network), parameter_count(student))
        o = self.options
        return {
            "distillation": {
                "teacher": self.teacher,
                "teacher_layers": self.teacher_layers,
                "student": {
                    "model": o.student or self.teacher,
                    "layers": student.config.num_hidden_layers,
                    "layers_taken": self.taken,
                },
                "temperature": o.temperature,
                "alpha": o.alpha,
                "hidden_loss": o.hidden_loss,
                "hidden_weight": o.hidden_weight if o.hidden_loss else None,
                "unlabelled": {"file": o.unlabelled, "examples": len(self.unlabelled)} if o.unlabelled else None,
                "parameters": {"teacher": size[0], "student": size[1], "ratio": round(size[1] / size[0], 4)},
                "speed": {
                    "teacher_examples_per_s": round(teacher_speed, 1),
                    "student_examples_per_s": round(student_speed, 1),
                    "ratio": round(student_speed / teacher_speed, 2) if teacher_speed else None,
                    "examples": len(sample),
                },
                **self.record,
            }
        }


def _read_unlabelled(adapter, path: str) -> list:
    """The examples of ``path`` read as the task reads predict's input (no labels needed)."""
    if adapter.per_token_outputs:
        raise BertkitError("--unlabelled applies to cls and pair (sentence-level logits)", "drop --unlabelled")
    file = Path(path).expanduser()
    examples = adapter.read(Source(str(file), path=file), PREDICT)
    if not examples:
        raise BertkitError(f"--unlabelled {path} holds no examples", "give a text file, one example per line")
    return [{k: v for k, v in example.items() if k != "label"} for example in examples]


def _soft_only(feature: dict, per_token: bool) -> dict:
    labels = [IGNORED] * len(feature["input_ids"]) if per_token else IGNORED
    return {**feature, "labels": labels, "soft_only": True}
