"""The built-in tasks' words and code for their model cards (``Task.card_text``).

Each snippet runs as printed with transformers 5 alone and answers what `bertkit predict` answers
on the same input (tests/cli/test_model_card.py runs every one of them): it truncates at the model's
max length and reads the outputs the way the task's ``postprocess`` does.
"""

from __future__ import annotations

from dataclasses import replace

from bertkit.tasks.base import CardText

MODEL_DIR_LINE = "MODEL_DIR = $model_dir  # this directory, or its Hub id once pushed"
TRUNCATED = "Texts longer than $max_length tokens are truncated: the rest of the text is not read."

_CLASSIFY = f"""from transformers import pipeline

{MODEL_DIR_LINE}
classifier = pipeline("text-classification", model=MODEL_DIR)
# cut long input at the model's max length, as bertkit does, instead of failing on it
print(classifier(INPUT, truncation=True, max_length=$max_length))"""

CLS = CardText(
    hub_task="text-classification",
    title="Text Classification",
    does="classifies a text",
    example={"text": "a great film with very good acting"},
    snippet=_CLASSIFY.replace("INPUT", "$text"),
    limitations=TRUNCATED,
)

PAIR = CardText(
    hub_task="text-classification",
    title="Text Classification",
    does="classifies a pair of texts",
    example={"text": "John went to Paris.", "text_pair": "John visited Paris."},
    snippet=_CLASSIFY.replace("INPUT", '{"text": $text, "text_pair": $text_pair}'),
    limitations=TRUNCATED.replace("Texts", "Text pairs"),
)

_REGRESS = f"""from transformers import pipeline

{MODEL_DIR_LINE}
regressor = pipeline("text-classification", model=MODEL_DIR, function_to_apply="none")  # the raw number
print(regressor(INPUT, truncation=True, max_length=$max_length)SCORE)"""

_MULTI_LABEL = f"""from transformers import pipeline

{MODEL_DIR_LINE}
classifier = pipeline("text-classification", model=MODEL_DIR)  # a sigmoid per label (problem_type)
scores = classifier(INPUT, top_k=None, truncation=True, max_length=$max_length)
# a label is predicted at or above its threshold (tuned by `bertkit eval`, stored in bertkit.json)
per_label = dict(zip(classifier.model.config.id2label.values(), $thresholds))
chosen = [s["label"] for s in scores if s["score"] >= per_label.get(s["label"], $threshold)]
print({{"labels": chosen, "probabilities": {{s["label"]: round(s["score"], 6) for s in scores}}}})"""


def scoring(text: CardText) -> CardText:
    """cls/pair's card text when the label is a number (the regression kind's)."""
    single = text.example.keys() == {"text"}  # the pipeline answers a list for a text, a dict for a pair
    return replace(
        text,
        does=text.does.replace("classifies", "scores") + " with a number",
        title="Text Regression",
        snippet=_REGRESS.replace("INPUT", _INPUTS[single]).replace("SCORE", '[0]["score"]' if single else '["score"]'),
    )


def with_label_sets(text: CardText) -> CardText:
    """cls/pair's card text when the label is a set of labels (the multi-label kind's)."""
    return replace(
        text,
        does=text.does + " with any number of labels",
        title="Multi-label Text Classification",
        snippet=_MULTI_LABEL.replace("INPUT", _INPUTS[text.example.keys() == {"text"}]),
    )


_INPUTS = {True: "$text", False: '{"text": $text, "text_pair": $text_pair}'}

NER = CardText(
    hub_task="token-classification",
    title="Token Classification",
    does="tags each word with a BIO entity tag",
    example={"tokens": ["John", "lives", "in", "Paris", "and", "works", "for", "Google", "."]},
    snippet=f"""import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer

{MODEL_DIR_LINE}
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
model = AutoModelForTokenClassification.from_pretrained(MODEL_DIR).eval()
words = $tokens
inputs = tokenizer(words, is_split_into_words=True, truncation=True, max_length=$max_length, return_tensors="pt")
with torch.no_grad():
    best = model(**inputs).logits[0].argmax(-1).tolist()
first = {{}}  # the model was trained to tag a word at its first sub-word
for position, word in enumerate(inputs.word_ids()):
    if word is not None:
        first.setdefault(word, position)
tags = [model.config.id2label[best[first[w]]] if w in first else "O" for w in range(len(words))]
# an I-X that continues no X entity starts one (conlleval's reading), so the tags are valid IOB2
tags = [f"B-{{t[2:]}}" if t.startswith("I-") and (i == 0 or tags[i - 1][2:] != t[2:]) else t
        for i, t in enumerate(tags)]
print(list(zip(words, tags)))""",
    limitations="Sentences longer than $max_length sub-word tokens are read by bertkit in overlapping windows; "
    "the snippet above truncates them instead and tags the words past the cut `O`.",
)

QA = CardText(
    hub_task="question-answering",
    title="Question Answering",
    does="extracts the answer span to a question from a context",
    example={"id": "1", "question": "Who lives in Paris?", "context": "John lives in Paris and works for Google."},
    snippet=f"""import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

{MODEL_DIR_LINE}
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
model = AutoModelForQuestionAnswering.from_pretrained(MODEL_DIR).eval()
question, context = $question, $context
inputs = tokenizer(question, context, truncation="only_second", max_length=$max_length,
                   return_offsets_mapping=True, return_tensors="pt")
offsets = inputs.pop("offset_mapping")[0].tolist()
with torch.no_grad():
    output = model(**inputs)
# the best span i..j of context tokens with i <= j < i + $max_answer_length
in_context = torch.tensor([part == 1 for part in inputs.sequence_ids(0)])
scores = output.start_logits[0][:, None] + output.end_logits[0][None, :]
legal = (in_context[:, None] & in_context[None, :]).triu().tril($max_answer_length - 1)
i, j = divmod(int(scores.masked_fill(~legal, float("-inf")).argmax()), scores.shape[1])
print({{"answer": context[offsets[i][0]:offsets[j][1]], "start": offsets[i][0]}})""",
    limitations="Contexts longer than $max_length tokens are read by bertkit in overlapping windows, and a model "
    "trained with unanswerable questions may answer nothing; the snippet above reads one truncated "
    "window and always answers. Questions longer than 64 tokens are cut.",
)

MLM = CardText(
    hub_task="fill-mask",
    title="Fill-Mask",
    does="predicts masked word pieces (continued masked-LM pre-training)",
    example={"text": "John lives in [MASK]."},
    snippet=f"""from transformers import pipeline

{MODEL_DIR_LINE}
fill_mask = pipeline("fill-mask", model=MODEL_DIR)
text = $text.replace("[MASK]", fill_mask.tokenizer.mask_token)
print([(guess["token_str"], round(guess["score"], 3)) for guess in fill_mask(text)])""",
    cli="`bertkit eval DIR --data FILE` (held-out loss and perplexity); it is a starting point for "
    "`bertkit finetune TASK --model DIR`, and `bertkit predict` does not apply to it",
    limitations="Trained on blocks of $max_length tokens; it has no task head, so fine-tune it before using it "
    "for a task.",
)
