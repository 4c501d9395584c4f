"""A retrieval set from SQuAD: each question's passage is the paragraph it was asked on.

The articles are split, not the questions: the LAST ``test_articles`` articles of the file are held
out (their questions are the ``test`` split), the others are ``train``, so no paragraph a model trained
on is one it is tested on. The corpus is every paragraph of every article (the train articles'
paragraphs are distractors at test time), its text the article's title and the paragraph, as BEIR's
dense retrieval joins them. Deterministic: the file's own order, nothing sampled.

Only SQuAD v1.1's dev file is at hand offline (there is no train file here), so this set is built
from ``dev-v1.1.json``: 48 articles, 2,067 paragraphs, 10,570 questions.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertkit.errors import BertkitError

TEST_ARTICLES = 10  # as README's SQuAD split by article: the first 38 train, the last 10 held out


@dataclass
class RetrievalSet:
    corpus: list[dict]  # {"_id", "title", "text"}
    queries: list[dict]  # {"_id", "text"}
    qrels: dict[str, list[tuple[str, str, int]]]  # split -> (query id, passage id, 1)
    pairs: list[dict]  # the train split's {"anchor": question, "positive": passage text}
    articles: dict[str, int]  # split -> articles


def passage_text(title: str, text: str) -> str:
    """What a search embeds for a passage (bertkit.data.beir.corpus_rows): title, then text."""
    return " ".join(part for part in (title.strip(), text.strip()) if part)


def build(squad: dict, test_articles: int = TEST_ARTICLES, where: str = "the SQuAD file") -> RetrievalSet:
    articles = squad.get("data") if isinstance(squad, dict) else None
    if not isinstance(articles, list) or not articles or not all("paragraphs" in a for a in articles):
        raise BertkitError(f"{where} is not nested SQuAD JSON", 'expected {"data": [{"title", "paragraphs"}]}')
    if not 1 <= test_articles < len(articles):
        raise BertkitError(
            f"{test_articles} held-out articles asked of {where}, which has {len(articles)}",
            f"hold out between 1 and {len(articles) - 1} articles, e.g. {min(TEST_ARTICLES, len(articles) - 1)}",
        )
    first_test = len(articles) - test_articles
    result = RetrievalSet([], [], {"train": [], "test": []}, [], {"train": first_test, "test": test_articles})
    seen_questions = set()
    for a, article in enumerate(articles):
        split = "test" if a >= first_test else "train"
        title = str(article.get("title") or "").replace("_", " ")
        for p, paragraph in enumerate(article["paragraphs"]):
            passage_id = f"a{a:03d}p{p:03d}"
            context = str(paragraph.get("context") or "")
            result.corpus.append({"_id": passage_id, "title": title, "text": context})
            for qa in paragraph.get("qas", ()):
                question_id = str(qa.get("id"))
                if question_id in seen_questions or not str(qa.get("question") or "").strip():
                    continue  # a repeated id or an empty question cannot be a query
                seen_questions.add(question_id)
                result.queries.append({"_id": question_id, "text": qa["question"].strip()})
                result.qrels[split].append((question_id, passage_id, 1))
                if split == "train":
                    result.pairs.append({"anchor": qa["question"].strip(), "positive": passage_text(title, context)})
    return result
