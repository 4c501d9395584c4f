"""The options of the commands that run a saved or pretrained model, one dataclass per family:
eval and predict share ``InferenceOptions``; ``EvalOptions``, ``PredictOptions``, ``StreamOptions``
(predict and embed: chunks, resume, Ray), ``EmbeddingOptions``, ``ProbeOptions``, ``ServeOptions``,
``ExportOptions`` and ``InspectOptions`` add their own. A task's own flags for these commands
come from its ``TaskOption``s (bertkit/cli/options.py: ``from_registry``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bertkit.options.base import (
    DATA_PANEL,
    INFERENCE_PANEL,
    MODEL_PANEL,
    OUTPUT_PANEL,
    REQUIRED,
    DatasetOptions,
    batch_size_option,
    check_at_least,
    check_batch_size,
    check_max_length,
    check_precision,
    check_threads,
    fail,
    max_length_option,
    option,
    precision_option,
    threads_option,
)
from bertkit.options.calibration import CoverageOptions

SCORING_PANEL, RAY_PANEL = "Scoring", "Ray cluster"
SERVER_PANEL, LIMITS_PANEL = "Server", "Batching and limits"
BACKEND_HELP = (
    "torch, onnx, onnx-int8 (after `bertkit export onnx`), openvino, openvino-int8 (after `bertkit "
    "export openvino`), or auto: the fastest the exports measured."
)
POOLING_HELP = (
    "cls | mean | max | last4-concat | last4-sum | layer:N (N as in hidden_states: 0 = embeddings, "
    "-1 = last). mean/max use real tokens only; the layer modes average their layer(s) over the tokens. "
    "Default: mean (one vector per row), the last layer (--per-word)."
)
MODEL_HELP = "Hub name, local directory (pretrained, fine-tuned, probe or pretrain output), or 'minilm'."
ACTORS = 2  # Ray actors when --actors is not given
MAX_WAIT_MS = 10_000  # longer would hold a request until a batch fills


@dataclass
class InferenceOptions:
    """How eval and predict run a saved model."""

    batch_size: int = batch_size_option("inference")
    precision: str = precision_option()
    threads: int | None = threads_option()

    def validate(self, command: str) -> "InferenceOptions":
        check_batch_size(self.batch_size, command)
        check_precision(self.precision)
        check_threads(self.threads, command)
        return self


HEAD_HELP = "A multi-head model's head to run (`bertkit finetune multi`); default: every head."


@dataclass
class EvalOptions:
    """What `bertkit eval` scores and where it writes the scores."""

    data: str | None = option(
        None,
        "Dataset name or file; default: what training evaluated on (the known dataset, or the --eval-data file).",
        DATA_PANEL,
    )
    head: str | None = option(None, HEAD_HELP, DATA_PANEL)
    split: str | None = option(
        None,
        "Split: train, dev (default), test (mnli: dev_mismatched too; a Hub dataset: its own split names too).",
        DATA_PANEL,
    )
    max_eval_samples: int | None = option(None, "Use only the first N examples.", DATA_PANEL)
    output: str | None = option(
        None,
        "Metrics JSON file in an existing directory; default "
        "<model_dir>/eval-<name>-<split>.json (a file: eval-<file stem>.json).",
        OUTPUT_PANEL,
    )
    store_threshold: bool | None = option(
        None,
        "qa v2, multi-label: store the tuned threshold; default: only from a full evaluation of the model's dev data.",
        SCORING_PANEL,
    )
    metric: list[str] | None = option(
        None,
        "Also score with an `evaluate` metric: a local script/directory (offline) or a Hub name; repeatable.",
        SCORING_PANEL,
        metavar="NAME|PATH",
    )
    # not flags of their own: --data-dir is RunOptions' flag, the dataset's config and splits
    # DatasetOptions', the task's eval flags its TaskOptions (the caller fills them in)
    data_dir: str | None = None
    dataset: DatasetOptions = field(default_factory=DatasetOptions)
    task_options: dict = field(default_factory=dict)

    def validate(self, command: str = "bertkit eval") -> "EvalOptions":
        check_at_least(self.max_eval_samples, "--max-eval-samples", command)
        return self


@dataclass
class PredictOptions:
    """What `bertkit predict` reads and writes."""

    input: str = option(
        REQUIRED,
        "Text lines (pair: TAB between texts), JSONL, JSON, CSV, TSV, Parquet; a directory "
        "or glob of shards; '-' = stdin.",
        DATA_PANEL,
    )
    output: str = option(
        "-",
        "JSONL (or .parquet) output file in an existing directory; '-' = stdout (--ray: a directory of Parquet files).",
        OUTPUT_PANEL,
    )
    backend: str = option("torch", BACKEND_HELP, INFERENCE_PANEL)
    head: str | None = option(None, HEAD_HELP, INFERENCE_PANEL)
    task_options: dict = field(default_factory=dict)  # the task's predict flags (--top-k, --format...)
    conformal: CoverageOptions = field(default_factory=CoverageOptions)  # --coverage, its flags (not its own)


@dataclass
class StreamOptions:
    """Input at any scale (bertkit.api.streaming) and scale-out on Ray Data: predict and embed."""

    chunk_rows: int = option(
        10_000, "Rows read, run and written at a time: memory stays flat whatever the input's size.", INFERENCE_PANEL
    )
    resume: bool = option(
        False,
        "Continue an interrupted run into the same --output after its last complete "
        "chunk (same input, model and options).",
        OUTPUT_PANEL,
        flag=True,
    )
    ray: bool = option(
        False,
        "Run on a Ray cluster with Ray Data (the bertkit ray extra): --output is a directory of Parquet files.",
        RAY_PANEL,
        flag=True,
    )
    ray_address: str | None = option(
        None, "The cluster: auto, ray://HOST:10001, ... (default: RAY_ADDRESS, else a new local cluster).", RAY_PANEL
    )
    # None: not given (``--actors 2`` given without --ray is refused like any other value)
    actors: int | None = option(None, f"--ray: actors, each with the model loaded once; default {ACTORS}.", RAY_PANEL)
    # not flags: how the caller reports (quiet: no progress lines; long_lived: bertkit.api.streaming.run)
    quiet: bool = False
    long_lived: bool = False

    def validate(self, command: str) -> "StreamOptions":
        check_at_least(self.chunk_rows, "--chunk-rows", command)
        check_at_least(self.actors, "--actors", command)
        return self

    @property
    def actor_count(self) -> int:
        return ACTORS if self.actors is None else self.actors


@dataclass
class EmbeddingOptions:
    """`bertkit embed`: one vector per row or per word."""

    input: str = option(
        REQUIRED,
        "Text lines (TAB: a pair), JSONL, JSON, CSV, TSV, Parquet; a directory or glob of "
        "shards; '-' = stdin. --per-word also reads 'tokens' lists.",
        DATA_PANEL,
    )
    output: str = option(
        REQUIRED,
        ".npy (rows x dim), .parquet (id + vector), .jsonl, .npz (vectors + ids, built in "
        "memory); '-' = JSONL on stdout; --ray: a directory of Parquet files.",
        OUTPUT_PANEL,
    )
    pooling: str | None = option(None, POOLING_HELP, INFERENCE_PANEL)
    per_word: bool = option(
        False, "One vector per word, at its first sub-word (as in ner).", INFERENCE_PANEL, flag=True
    )
    max_length: int = max_length_option("embedding")
    stride: int | None = option(
        None,
        "Tokens shared by consecutive windows of a long row (default max-length/4; "
        "--per-word windows share half their words, as in ner).",
        INFERENCE_PANEL,
    )
    batch_size: int = batch_size_option("inference")
    normalize: bool = option(False, "Scale every vector to unit length (for cosine).", INFERENCE_PANEL, flag=True)
    text_column: str | None = option(None, "Column with the text (default: sentence/text/...).", DATA_PANEL)
    text_pair_column: str | None = option(None, "Column with a second text, embedded as a pair.", DATA_PANEL)
    id_column: str | None = option(
        None, "Column with row ids (default: id/idx/guid/index, else the row number from 0).", DATA_PANEL
    )
    precision: str = precision_option()
    threads: int | None = threads_option()

    def validate(self, command: str = "bertkit embed") -> "EmbeddingOptions":
        check_max_length(self.max_length, command)
        check_batch_size(self.batch_size, command)
        check_precision(self.precision)
        check_threads(self.threads, command)
        return self


@dataclass
class ProbeOptions:
    """`bertkit probe`: frozen features and a logistic regression (its data options are RunOptions')."""

    pooling: str | None = option(None, POOLING_HELP, INFERENCE_PANEL)
    max_length: int | None = max_length_option("probing")
    batch_size: int = batch_size_option("probing")
    holdout: float = option(
        0.1, "Share of the training rows held out to choose C (then refit on all).", INFERENCE_PANEL
    )
    precision: str = precision_option()
    threads: int | None = threads_option()

    def validate(self, command: str = "bertkit probe") -> "ProbeOptions":
        check_max_length(self.max_length, command)
        check_batch_size(self.batch_size, command)
        check_precision(self.precision)
        check_threads(self.threads, command)
        return self


@dataclass
class ServeOptions:
    """`bertkit serve`: where it listens and how it batches."""

    host: str = option(
        "127.0.0.1", "Address to listen on (0.0.0.0: every interface; there is no authentication).", SERVER_PANEL
    )
    port: int = option(8000, "TCP port.", SERVER_PANEL)
    backend: str = option("auto", BACKEND_HELP, INFERENCE_PANEL)
    batch_size: int = batch_size_option("serving", LIMITS_PANEL)
    max_wait_ms: float = option(5.0, "How long a request waits for others to batch with.", LIMITS_PANEL)
    max_inputs: int = option(256, "Most input rows in one request (more: HTTP 413).", LIMITS_PANEL)
    max_request_bytes: int = option(1 << 20, "Largest request body (more: HTTP 413).", LIMITS_PANEL)
    threads: int | None = threads_option()

    def validate(self, command: str = "bertkit serve") -> "ServeOptions":
        check_batch_size(self.batch_size, command)
        check_threads(self.threads, command)
        check_at_least(self.max_inputs, "--max-inputs", command)
        check_at_least(self.max_request_bytes, "--max-request-bytes", command)
        if math.isnan(self.max_wait_ms) or not 0 <= self.max_wait_ms <= MAX_WAIT_MS:
            fail(
                f"--max-wait-ms must be between 0 and {MAX_WAIT_MS}, got {self.max_wait_ms}; a few milliseconds "
                "is usual",
                command,
            )
        return self

    def inference(self) -> InferenceOptions:
        """How the served model runs, as eval and predict run one (the backend picks its precision)."""
        return InferenceOptions(batch_size=self.batch_size, threads=self.threads)


@dataclass
class ExportOptions:
    """`bertkit export onnx|openvino`: the exported files and their parity check."""

    int8: bool = option(False, "Also write an int8 model (docs: serving.md).", MODEL_PANEL, flag=True)
    data: str | None = option(None, "Data for the parity check; default: the model's eval data.", DATA_PANEL)
    samples: int = option(500, "Examples the parity check runs on.", DATA_PANEL)
    threads: int | None = threads_option()

    def validate(self, command: str = "bertkit export") -> "ExportOptions":
        check_at_least(self.samples, "--samples", command)
        check_threads(self.threads, command)
        return self


@dataclass
class InspectOptions:
    """`bertkit inspect attention|tokens`: one text (or pair) through a model."""

    text: str = option(REQUIRED, "The text to run.", DATA_PANEL)
    text_pair: str | None = option(None, "A second text (segment 1).", DATA_PANEL)
    max_length: int = max_length_option("inspect attention")
    as_json: bool = option(False, "Write the raw weights as JSON instead of a figure.", OUTPUT_PANEL, flag="--json")

    def validate(self, command: str = "bertkit inspect") -> "InspectOptions":
        # not the model range of check_max_length: a few tokens are a fine way to see truncation
        check_at_least(self.max_length, "--max-length", command)
        return self


@dataclass
class AttentionOptions:
    """`bertkit inspect attention`: which heads, drawn how."""

    layer: int = option(-1, "Layer 1..L as in hidden_states (-1: the last).", INFERENCE_PANEL)
    head: int = option(0, "Head 0..H-1.", INFERENCE_PANEL)
    all_heads: bool = option(False, "A grid with every head of the layer.", INFERENCE_PANEL, flag=True)
    output: str | None = option(
        None, "Figure file (.png, .svg, .pdf); with --json a JSON file (default: stdout).", OUTPUT_PANEL
    )
    dpi: int = option(100, "Figure resolution.", OUTPUT_PANEL)
