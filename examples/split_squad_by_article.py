"""Split a nested SQuAD JSON file by article into two files, so that no article is in both.

    python examples/split_squad_by_article.py dev-v1.1.json --first 38 first.json rest.json

writes the first 38 articles to first.json and the remaining ones to rest.json (the "version"
field is kept). Useful when only the dev file is at hand: train on one part, evaluate on the other.
"""

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", help="nested SQuAD JSON (data -> paragraphs -> qas)")
    parser.add_argument("first_output", help="file for the first N articles")
    parser.add_argument("rest_output", help="file for the remaining articles")
    parser.add_argument("--first", type=int, required=True, help="number of articles in the first file")
    args = parser.parse_args()
    if not Path(args.input).is_file():  # e.g. $BERTKIT_DATA_DIR unset in this shell: one line, no traceback
        parser.exit(
            2,
            f"error: {args.input} not found (hint: give the SQuAD file's path; the data lives in "
            "--data-dir / $BERTKIT_DATA_DIR, default ../shared/data)\n",
        )

    with open(args.input, encoding="utf-8") as handle:
        squad = json.load(handle)
    articles = squad["data"]
    if not 0 < args.first < len(articles):
        parser.error(f"--first must be between 1 and {len(articles) - 1} ({len(articles)} articles)")
    for path, part in ((args.first_output, articles[: args.first]), (args.rest_output, articles[args.first :])):
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"version": squad.get("version", ""), "data": part}, handle)
        questions = sum(len(p["qas"]) for a in part for p in a["paragraphs"])
        print(f"{path}: {len(part)} articles, {questions} questions")


if __name__ == "__main__":
    main()
