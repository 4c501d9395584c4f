"""What ``--ray`` reads: local paths, globs and URLs, expanded and read with Ray's own readers."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from bertkit.data import formats
from bertkit.errors import BertkitError
from bertkit.ray.outputs import is_url

INPUT_SUFFIXES = formats.suffixes(lambda fmt: fmt.ray_read is not None)  # what Ray Data reads


def input_paths(spec: str) -> tuple[list[str] | str, str]:
    """(what Ray's reader gets, the format's suffix). Ray's readers take files and directories but
    no wildcards, so a glob is expanded here (sorted, as `bertkit predict` reads shards)."""
    if not is_url(spec):
        from bertkit.data.streams import shard_paths

        found = shard_paths(spec)  # local: the same checks and order as the single-process commands
        return [str(path) for path in found], _format_of(spec, found)
    import pyarrow.fs as pafs

    wildcards = [i for i, ch in enumerate(spec) if ch in "*?["]
    prefix = spec[: spec.rfind("/", 0, wildcards[0]) + 1] if wildcards else spec  # the directory before them
    try:
        filesystem, base = pafs.FileSystem.from_uri(prefix)
    except Exception as exc:  # an unknown scheme, a missing filesystem library, bad credentials
        raise BertkitError(
            f"cannot open --input {spec} ({exc})", "check the URL (s3://bucket/path, gs://...)"
        ) from None
    if wildcards:
        scheme, base = spec.split("://", 1)[0], base.rstrip("/")
        pattern = f"{base}/{spec[len(prefix) :]}"
        selector = pafs.FileSelector(base, recursive="/" in spec[wildcards[0] :])  # a wildcard in a directory
        try:
            listed = filesystem.get_file_info(selector)
        except FileNotFoundError:
            listed = []
        except OSError as exc:  # permissions, credentials, the network
            raise BertkitError(f"cannot list {prefix} ({exc})", "check the URL and your credentials") from None
        found = sorted(
            info.path
            for info in listed
            if info.type == pafs.FileType.File
            and fnmatch.fnmatchcase(info.path, pattern)
            and info.path.count("/") == pattern.count("/")
        )  # `*` stays within one directory
        if not found:
            raise BertkitError(f"no file matches {spec}", "check the pattern (quote it so the shell leaves it alone)")
        return [f"{scheme}://{path}" for path in found], _format_of(spec, found)
    try:
        info = filesystem.get_file_info(base)
    except OSError as exc:
        raise BertkitError(f"cannot open --input {spec} ({exc})", "check the URL and your credentials") from None
    if info.type == pafs.FileType.NotFound:
        raise BertkitError(f"--input {spec} does not exist", "check the URL")
    if info.type == pafs.FileType.Directory:
        inside = filesystem.get_file_info(pafs.FileSelector(base, recursive=False))
        return spec, _format_of(spec, [Path(i.path) for i in inside if i.type == pafs.FileType.File])
    return spec, _format_of(spec, [Path(base)])


def _format_of(spec: str, files: list) -> str:
    suffixes = sorted({Path(f).suffix.lower() for f in files} & set(INPUT_SUFFIXES))
    if len(suffixes) != 1:
        found = ", ".join(suffixes) if suffixes else "no data files"
        raise BertkitError(
            f"--input {spec}: Ray reads one format at a time, found {found}",
            f"point at files of one format ({', '.join(INPUT_SUFFIXES)})",
        )
    return suffixes[0]


def read_input(ray, paths, suffix: str):
    fmt = formats.lookup(suffix)
    return fmt.ray_read(ray.data, paths, fmt)
