"""Distillation (Hinton et al., 2015) as a training method: a smaller student trained on a
fine-tuned teacher's softened outputs (`bertkit distill TEACHER_DIR`; the command's entry, which
checks the teacher and picks the student, is bertkit/api/distillation.py).

Its hooks: the data's labels must be the teacher's, and the unlabelled text reads as the task's
(``check_data``); the student is the teacher's encoder with only the layers taken
(``adapt_network``); every training feature carries the teacher's logits, computed once and cached
(``training_features``, bertkit/methods/teacher_cache.py); the loss is on them
(``training_network``, ``collator``: bertkit/networks/distillation.py); and bertkit.json's
``distillation`` section records the teacher, the student and the measured ratios, which the card
says. It composes with LoRA (adapters on the student), merged only: a student made of some of the
teacher's layers is no base model an adapter directory could load over.

Not for qa: a span model's logits are two distributions over a window's tokens, whose windows a
student with another --max-length would cut differently; refused, said so.
"""

from __future__ import annotations

from pathlib import Path

from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.methods.base import Method
from bertkit.methods.teacher_cache import cache_root, teacher_fingerprint, teacher_logits
from bertkit.models import load_model
from bertkit.tasks.base import PREDICT
from bertkit.tasks.label_kinds import DEFAULT_KIND

TASKS = ("cls", "pair", "ner")
SPEED_FEATURES = 256  # the training features timed through teacher and student for the speed ratio
IGNORED = -100  # an unlabelled row's gold label: not scored by the hard loss


class Distillation(Method):
    """What a distillation adds to a finetune run; built by ``api.distill`` (not by an option)."""

    name = "distill"
    flag = "bertkit distill"
    tasks = TASKS
    composes_with = ("finetune", "lora")
    section = "distillation"

    def __init__(self, teacher: str, meta: dict, teacher_layers: int, options, taken: list | None, output: Path):
        super().__init__(options)
        self.teacher, self.meta, self.teacher_layers = teacher, meta, teacher_layers
        self.options, self.taken, self.output = options, taken, output
        self.teacher_network = None
        self.unlabelled: list = []
        self.record: dict = {}
        self.plain_metrics: dict = {}  # --plain-student: the same student trained without the teacher

    def check_plan(self, plan) -> None:
        super().check_plan(plan)
        kind = plan.adapter.options.get("problem_type")
        if kind not in (None, DEFAULT_KIND):  # a teacher's logits are one distribution per row or token
            raise BertkitError(
                f"bertkit distill does not compose with --problem-type {kind}: it distils single-label "
                "classifiers and taggers",
                "drop --problem-type",
            )
        if plan.config.save_adapter:  # the student's base would be the teacher: layers 0..N-1, not those taken
            raise BertkitError(
                "--save-adapter does not compose with bertkit distill: the student is made of some of the "
                "teacher's layers, which no base model holds for an adapter directory to load over",
                "drop --save-adapter (the adapters are then merged into the student)",
            )

    def check_data(self, run) -> None:
        """The data's labels are the teacher's (ids included); the unlabelled text reads as the task's."""
        labels = self.meta["task"].get("labels")
        if run.adapter.labels != labels:
            raise BertkitError(
                f"the data's labels {run.adapter.labels} are not the teacher's {labels}: its logits are for other "
                "classes",
                "give data with the teacher's label set, or a teacher trained on this data's labels",
            )
        if self.options.unlabelled is not None:
            self.unlabelled = _read_unlabelled(run.adapter, self.options.unlabelled)
        if self.options.augment and run.adapter.per_token_outputs:
            raise BertkitError("--augment applies to cls and pair (sentence-level logits)", "drop --augment")

    def adapt_network(self, network, run):
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

    def training_features(self, features: list, run) -> list:
        """The training features (and the unlabelled text's) with the teacher's logits."""
        from bertkit.model_dir.fingerprint import fingerprint

        adapter, engine = run.adapter, run.engine
        if self.unlabelled:
            features = list(features) + _soft_features(self.unlabelled, run, "unlabelled_features")
        if self.options.augment:  # Tang et al. 2019's rewritten rows (data/augment.py), the teacher's labels only
            from bertkit.data.augment import augmented_rows

            mask = run.tokenizer.mask_token or run.tokenizer.unk_token  # a tokenizer without a mask token
            rows = augmented_rows(run.train_examples, self.options.augment, mask, run.plan.config.seed)
            features = list(features) + _soft_features(rows, run, "augmented_features")
            self.record["augment"] = {"per_row": self.options.augment, "rows": len(rows)}
        self.teacher_network = load_model(adapter.model_class, self.teacher, self.teacher, trained=True)
        self.teacher_network.to(engine.accelerator.device).eval()
        print_ = teacher_fingerprint(fingerprint(self.teacher), features, adapter.targets, engine.precision)
        cached = teacher_logits(
            engine,
            self.teacher_network,
            features,
            adapter.per_token_outputs,
            run.tokenizer.pad_token_id,
            32,
            cache_root(self.output),
            print_,
        )
        self.record["teacher_logits"] = {"reused": cached.reused, "computed": cached.computed}
        return [{**f, "teacher_logits": logits} for f, logits in zip(features, cached.logits)]

    def training_network(self, network, run):
        from bertkit.networks.distillation import DistillationLoss

        o = self.options
        teacher = self.teacher_network if o.hidden_loss else None
        return DistillationLoss(network, o.temperature, o.alpha, teacher, o.hidden_loss, o.hidden_weight)

    def collator(self, collator, run):
        from bertkit.networks.distillation import DistillCollator

        return DistillCollator(run.tokenizer.pad_token_id, run.adapter.targets)

    def trained_network(self, network):
        from bertkit.networks.distillation import DistillationLoss

        return network.model if isinstance(network, DistillationLoss) else network

    def sections(self, finished, run) -> dict:
        """bertkit.json's ``distillation`` section: the teacher, the student, the loss, the ratios."""
        from bertkit.networks.distillation import measure_speed, parameter_count

        student, engine = finished.model, run.engine
        notice("weights", f"distill: timing teacher and student on {SPEED_FEATURES} training features for the card")
        sample = run.train_features[:SPEED_FEATURES]
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

    def baselines(self, run) -> list[dict]:
        """The teacher's score on the run's evaluation data: a reference for the student; with
        --plain-student, the same student trained without the teacher: a baseline it must beat."""
        from bertkit.metrics.baselines import record, reference

        adapter, examples = run.adapter, run.eval_examples
        if not examples or self.teacher_network is None:
            return []
        notice("weights", f"distill: scoring the teacher on the {len(examples)} evaluation examples")
        outputs = run.engine.infer(
            self.teacher_network,
            run.eval_features,
            run.plan.config.eval_batch_size,
            adapter.output_names,
            adapter.per_token_outputs,
            run.tokenizer.pad_token_id,
            description="eval",
        )
        outputs.pop("loss", None)
        metrics = adapter.metrics(examples, adapter.postprocess(examples, run.eval_features, outputs))
        found = [reference("teacher", "the teacher, on the same evaluation data", metrics)]
        if self.plain_metrics:
            rule = "the same student trained without the teacher (the gold labels only, the same seed)"
            found.append(record("plain-student", rule, self.plain_metrics, (adapter.main_metric,)))
        return found

    @classmethod
    def card_procedure(cls, meta: dict, public_name) -> list[str]:
        """The teacher, the student, the loss and the measured ratios."""
        section = meta["distillation"]
        student = section.get("student") or {}
        made = (
            f"the teacher's layers {student['layers_taken']}"
            if student.get("layers_taken") is not None
            else public_name(student.get("model"))
        )
        size, speed = section.get("parameters") or {}, section.get("speed") or {}
        return [
            f"Distilled from {public_name(section.get('teacher'))} ({section.get('teacher_layers')} layers) into a "
            f"{student.get('layers')}-layer student made from {made}, with temperature {section.get('temperature')} "
            f"and alpha {section.get('alpha')}. Parameters: {size.get('student')} ({size.get('ratio')} of the "
            f"teacher's {size.get('teacher')}); predict speed: {speed.get('ratio')}x the teacher's "
            f"({speed.get('examples')} training examples, torch, this machine)."
        ]


def _read_unlabelled(adapter, path: str) -> list:
    """The examples of ``path`` read as the task reads predict's input (no labels needed)."""
    if adapter.per_token_outputs:
        raise BertkitError("--unlabelled applies to cls and pair (sentence-level logits)", "drop --unlabelled")
    file = Path(path).expanduser()
    examples = adapter.read(Source(str(file), path=file), PREDICT)
    if not examples:
        raise BertkitError(f"--unlabelled {path} holds no examples", "give a text file, one example per line")
    return [{k: v for k, v in example.items() if k != "label"} for example in examples]


def _soft_features(rows: list, run, counted_as: str) -> list:
    """Rows the teacher labels, as training features trained on its soft targets only; their count
    recorded in the run's preprocessing as ``counted_as``."""
    extra = run.adapter.preprocess(rows, run.tokenizer, train=False)
    run.preprocessing[counted_as] = len(extra)
    return [_soft_only(f, run.adapter.per_token_outputs) for f in extra]


def _soft_only(feature: dict, per_token: bool) -> dict:
    labels = [IGNORED] * len(feature["input_ids"]) if per_token else IGNORED
    return {**feature, "labels": labels, "soft_only": True}
