"""The encoder behind `bertkit embed`, loaded once for many calls (the in-memory and streaming
paths, Ray actors): texts in, one pooled vector per text out."""

from __future__ import annotations

import numpy as np

from bertkit.models import resolve_model
from bertkit.models.tokenizer import load_tokenizer
from bertkit.networks.pooling import parse_pooling
from bertkit.options import EmbeddingOptions


class Embedder:
    """An encoder loaded once for many calls (`embed`, its streaming path, Ray actors): texts in,
    one pooled vector per text out, windows over long texts averaged as `embed` documents."""

    def __init__(self, model: str, options: EmbeddingOptions | None = None):
        """``options``: how to embed (pooling, per_word, max_length, stride, batch_size, normalize,
        precision, threads; validated here); its input, output and columns are the callers'."""
        options = (options or EmbeddingOptions()).validate("bertkit embed")
        self.spec = parse_pooling(options.pooling, options.per_word)
        self.model, self.max_length, self.batch_size = model, options.max_length, options.batch_size
        self.normalize, self.per_word = options.normalize, options.per_word
        self.stride = options.max_length // 4 if options.stride is None else options.stride
        self.precision, self.threads = options.precision, options.threads
        self.engine = self.network = self.tokenizer = None
        self.dim: int | None = None
        self.quiet = False  # no per-batch progress (a stream reports per chunk)
        self.encoder = None  # a loaded encoder to use instead of the directory's weights (an adapter directory's)

    def load(self) -> "Embedder":
        if self.engine is not None:
            return self
        from bertkit.networks import embedding

        model_ref = resolve_model(self.model)
        self.tokenizer = load_tokenizer(model_ref, self.model)
        embedding.check_encoder(model_ref, self.model, self.spec, self.max_length)

        from bertkit.engine import Engine  # heavy: torch + accelerate

        self.engine = Engine(self.precision, threads=self.threads)
        self.engine.quiet = self.quiet
        encoder = self.encoder if self.encoder is not None else embedding.load_encoder(model_ref, self.model)
        self.dim = int(encoder.config.hidden_size)
        self.network = self.engine.prepare_model(embedding.EmbeddingNetwork(encoder, self.spec, self.per_word))
        return self

    def vectors(self, texts: list[str], pairs: list[str] | None = None) -> np.ndarray:
        """(rows, dim) float32, one vector per text (pair), in order."""
        return self.vectors_with_counts(texts, pairs)[0]

    def vectors_with_counts(self, texts: list[str], pairs: list[str] | None = None) -> tuple[np.ndarray, int, int]:
        """(vectors, rows split into windows, model inputs run)."""
        from bertkit.networks import embedding

        self.load()
        features = embedding.row_features(self.tokenizer, texts, pairs, self.max_length, self.stride)
        outputs = embedding.run(self.engine, self.network, features, self.batch_size, self.tokenizer.pad_token_id)
        vectors = embedding.rows_from_windows(features, outputs, len(texts), self.spec)
        vectors = embedding.l2_normalize(vectors) if self.normalize else vectors
        self.dim = vectors.shape[1]
        return vectors, sum(n > 1 for n in window_counts(features, len(texts))), len(features)

    def word_vectors(self, sentences: list[list[str]]) -> tuple[list, int, int]:
        """One (words, dim) array per sentence; (vectors, sentences split into windows, inputs run)."""
        from bertkit.networks import embedding

        self.load()
        features, windowed = embedding.word_features(self.tokenizer, sentences, self.max_length)
        outputs = embedding.run(self.engine, self.network, features, self.batch_size, self.tokenizer.pad_token_id)
        vectors = embedding.words_from_windows(features, outputs, sentences)
        vectors = [embedding.l2_normalize(v) for v in vectors] if self.normalize else vectors
        return vectors, windowed, len(features)


def window_counts(features: list[dict], rows: int) -> list[int]:
    counts = [0] * rows
    for feature in features:
        counts[feature["example_index"]] += 1
    return counts
