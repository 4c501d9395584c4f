"""CoNLL-2003 NER on the HF side, as run_ner.py: first sub-word labelled, seqeval entity F1."""

from __future__ import annotations

from benchmarks.hf_trainer import prepare, train_and_eval


def run(side: str, train_sents: list, eval_sents: list, model_path: str, hp: dict) -> dict:
    """run_ner pads dynamically in every recipe (DataCollatorForTokenClassification); truncation at
    512, which no CoNLL sentence reaches. Labels: the sorted tag set (eval tags added, so a small
    train slice cannot miss one); sub-words after the first get -100 (label_all_tokens=False)."""
    import numpy as np
    from datasets import Dataset
    from seqeval.metrics import f1_score, precision_score, recall_score
    from transformers import (
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorForTokenClassification,
        set_seed,
    )

    prepare()
    labels = sorted({t for s in train_sents + eval_sents for t in s["tags"]})
    label2id = {label: i for i, label in enumerate(labels)}
    set_seed(hp["seed"])
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForTokenClassification.from_pretrained(
        model_path, num_labels=len(labels), label2id=label2id, id2label=dict(enumerate(labels))
    )

    def align(batch):
        encoded = tokenizer(batch["tokens"], truncation=True, max_length=512, is_split_into_words=True)
        encoded["labels"] = []
        for i, tags in enumerate(batch["tags"]):
            previous, ids = None, []
            for word in encoded.word_ids(batch_index=i):
                ids.append(-100 if word is None or word == previous else label2id[tags[word]])
                previous = word
            encoded["labels"].append(ids)
        return encoded

    def tokenize(sentences):
        dataset = Dataset.from_list([{"tokens": s["tokens"], "tags": s["tags"]} for s in sentences])
        return dataset.map(align, batched=True, remove_columns=["tokens", "tags"])

    train_ds, eval_ds = tokenize(train_sents), tokenize(eval_sents)

    def evaluate(trainer) -> dict:
        prediction = trainer.predict(eval_ds)
        pairs = [
            [(labels[p], labels[g]) for p, g in zip(ps, gs) if g != -100]
            for ps, gs in zip(np.argmax(prediction.predictions, axis=2), prediction.label_ids)
        ]
        y_pred = [[p for p, _ in sent] for sent in pairs]
        y_true = [[g for _, g in sent] for sent in pairs]
        return {
            "precision": float(precision_score(y_true, y_pred)),
            "recall": float(recall_score(y_true, y_pred)),
            "f1": float(f1_score(y_true, y_pred)),
        }

    out = train_and_eval(
        side,
        model,
        train_ds,
        DataCollatorForTokenClassification(tokenizer),
        hp,
        evaluate,
        len(train_sents),
        len(eval_sents),
    )
    out["metric"] = out["metrics"]["f1"]
    return out
