"""The options of retrieval: ``eval --data BEIR_DIR`` (``RetrievalOptions``) and ``bertkit mine``
(``MineOptions``). The retriever is any model ``bertkit embed`` takes, pooled as embed pools."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bertkit.errors import BertkitError
from bertkit.options.base import (
    DATA_PANEL,
    INFERENCE_PANEL,
    MAX_LENGTHS,
    OUTPUT_PANEL,
    REQUIRED,
    batch_size_option,
    check_at_least,
    check_batch_size,
    check_choice,
    check_max_length,
    check_precision,
    check_threads,
    max_length_option,
    option,
    precision_option,
    threads_option,
)

RETRIEVAL_PANEL = "Retrieval (--data a BEIR directory)"
SIMILARITIES = ("cosine", "dot")
RETRIEVED = 100  # passages kept per query: what MAP@100 and Recall@100 read
CORPUS_CHUNK = 10_000  # passages embedded at a time: memory stays flat whatever the corpus's size
SIMILARITY_HELP = "cosine (the vectors scaled to unit length) or dot (as they are)."
RETRIEVAL_MAX_LENGTH = MAX_LENGTHS["retrieval"][0]


@dataclass
class RetrievalOptions:
    """What `bertkit eval` adds when --data is a BEIR directory."""

    rerank: str | None = option(
        None,
        "A reranker (a one-logit cross-encoder: `finetune rerank` output, a CrossEncoder or transformers "
        "checkpoint) that rescores each query's top --rerank-top passages.",
        RETRIEVAL_PANEL,
        metavar="MODEL",
    )
    rerank_top: int = option(RETRIEVED, "Passages per query the reranker rescores.", RETRIEVAL_PANEL)
    similarity: str = option("cosine", SIMILARITY_HELP, RETRIEVAL_PANEL, choices=SIMILARITIES)
    max_length: int = max_length_option("retrieval", RETRIEVAL_PANEL)
    corpus_chunk: int = option(CORPUS_CHUNK, "Passages embedded at a time (memory stays flat).", RETRIEVAL_PANEL)

    def validate(self, command: str = "bertkit eval") -> "RetrievalOptions":
        check_at_least(self.rerank_top, "--rerank-top", command)
        check_at_least(self.corpus_chunk, "--corpus-chunk", command)
        check_choice(self.similarity, SIMILARITIES, "--similarity")
        check_max_length(self.max_length, command)
        return self

    def given_without_beir(self) -> list[str]:
        """The retrieval flags changed from their defaults (refused unless --data is a BEIR directory)."""
        defaults = RetrievalOptions()
        return [f"--{name.replace('_', '-')}" for name in vars(self) if getattr(self, name) != getattr(defaults, name)]


@dataclass
class MineOptions:
    """`bertkit mine`: hard negatives for (anchor, positive) pairs from a model's own ranking."""

    data: str = option(REQUIRED, "Pairs: JSONL/CSV/TSV with 'anchor' and 'positive' columns.", DATA_PANEL)
    corpus: str = option(
        REQUIRED, "Passages to mine from: a BEIR corpus.jsonl (_id, title, text) or .txt (one a line).", DATA_PANEL
    )
    output: str = option(
        REQUIRED, "Triplets JSONL (anchor, positive, negative), in an existing directory.", OUTPUT_PANEL
    )
    overwrite: bool = option(False, "Replace --output if it exists.", OUTPUT_PANEL, flag=True)
    candidates: int = option(10, "The model's best passages considered per anchor (its top k).", INFERENCE_PANEL)
    negatives: int = option(1, "Negatives kept per pair (one triplet each), the best-ranked first.", INFERENCE_PANEL)
    skip_top: int = option(
        0,
        "Also skip the first N candidates (after copies of the positive): likely unlabelled positives.",
        INFERENCE_PANEL,
    )
    margin: float = option(
        0.0,
        "Keep a candidate only if it scores at most (the positive's score - MARGIN): closer ones may be positives.",
        INFERENCE_PANEL,
    )
    similarity: str = option("cosine", SIMILARITY_HELP, INFERENCE_PANEL, choices=SIMILARITIES)
    max_length: int = max_length_option("retrieval")
    corpus_chunk: int = option(CORPUS_CHUNK, "Passages embedded at a time (memory stays flat).", INFERENCE_PANEL)
    batch_size: int = batch_size_option("inference")
    precision: str = precision_option()
    threads: int | None = threads_option()

    def validate(self, command: str = "bertkit mine") -> "MineOptions":
        for flag, value in (("--candidates", self.candidates), ("--negatives", self.negatives)):
            check_at_least(value, flag, command)
        check_at_least(self.skip_top, "--skip-top", command, minimum=0)
        check_at_least(self.corpus_chunk, "--corpus-chunk", command)
        if self.negatives + self.skip_top > self.candidates:
            raise BertkitError(
                f"--negatives {self.negatives} + --skip-top {self.skip_top} is more than the "
                f"--candidates {self.candidates} considered",
                "raise --candidates, or lower --negatives or --skip-top",
            )
        if not math.isfinite(self.margin):
            raise BertkitError(f"--margin must be a number, got {self.margin}", "e.g. --margin 0.05")
        check_choice(self.similarity, SIMILARITIES, "--similarity")
        check_max_length(self.max_length, command)
        check_batch_size(self.batch_size, command)
        check_precision(self.precision)
        check_threads(self.threads, command)
        return self
