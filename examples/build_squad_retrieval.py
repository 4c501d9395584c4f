"""Build the SQuAD retrieval set: questions -> the paragraph each was asked on, split by article.

    python examples/build_squad_retrieval.py ${BERTKIT_DATA_DIR:-../shared/data}/squad/dev-v1.1.json /tmp/squad-ret

writes a BEIR directory (corpus.jsonl: every paragraph, title + text; queries.jsonl; qrels/train.tsv
and qrels/test.tsv, the test split = the last --test-articles articles, held out) and
train-pairs.jsonl ({"anchor": question, "positive": paragraph} of the train articles, for
`bertkit finetune embedding`). Deterministic: the file's order, nothing sampled. Only SQuAD's dev
file is available offline here (there is no SQuAD train file), so the set comes from dev-v1.1.json.
Then: bertkit eval minilm --data /tmp/squad-ret --split test --output /tmp/squad-minilm.json
"""

import argparse
import sys

from bertkit.api.datasets import build_squad_retrieval
from bertkit.data.squad_retrieval import TEST_ARTICLES
from bertkit.errors import BertkitError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("squad", help="nested SQuAD JSON (dev-v1.1.json)")
    parser.add_argument("output", help="a new directory for the BEIR files")
    parser.add_argument("--test-articles", type=int, default=TEST_ARTICLES, help="last N articles held out (test)")
    args = parser.parse_args()
    try:
        done = build_squad_retrieval(args.squad, args.output, args.test_articles)
    except BertkitError as exc:
        sys.exit(f"error: {exc.message} (hint: {exc.hint})")
    print(
        f"{done['written_to']}: {done['passages']} passages; queries: train {done['queries']['train']} "
        f"({done['articles']['train']} articles), test {done['queries']['test']} ({done['articles']['test']} "
        f"articles); {done['pairs']} train pairs"
    )


if __name__ == "__main__":
    main()
