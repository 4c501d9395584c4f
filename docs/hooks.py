"""MkDocs hook (a local file, nothing fetched): the benchmark results live in benchmarks/, outside docs/,
and the pages link to them as ../benchmarks/... (which also works when the Markdown is read on a forge).
The site gets a copy of them under repo/benchmarks/, and those links are pointed there."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

PREFIX = "repo"


def _sources(root: Path) -> list[Path]:
    results = root / "benchmarks" / "results"
    found = [root / "benchmarks" / "README.md", *sorted(results.glob("*.md")), *sorted(results.glob("*.json"))]
    return found + sorted(results.glob("*.png"))  # the figures a result page shows (reliability diagrams)


def on_files(files, config):
    root = Path(config.config_file_path).parent
    for path in _sources(root):
        uri = f"{PREFIX}/{path.relative_to(root).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown, page, config, files):
    depth = page.file.src_uri.count("/")
    return markdown.replace("](" + "../" * (depth + 1) + "benchmarks/", "](" + "../" * depth + f"{PREFIX}/benchmarks/")
