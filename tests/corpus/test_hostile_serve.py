"""Hostile-input corpus of `serve` (each case fails before listening) and of the input records that
`predict`, `embed` and `finetune` turn into texts: texts that are not strings or hold a lone
surrogate, ids that cannot be given back, JSON nested too deep, unreadable files. Same contract as
tests/corpus/test_bad_input_corpus.py (tests/hostile.py's run_case): ONE line `error: ... (hint: ...)`,
exit 2, no traceback, nothing written or removed in the case's folder or the shared models."""

from __future__ import annotations

import io
import os
import socket
from pathlib import Path

import pytest
from hostile import QA_RECORD, Case, Context, jsonl, run_case

DEEP = "[" * 3000 + "]" * 3000
SURROGATE = '"good \\ud800 film"'  # valid JSON, no valid UTF-8: a lone high surrogate
_held: list[socket.socket] = []  # sockets kept open while a case runs


def busy_port() -> int:
    """A port another socket is listening on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    _held.append(sock)
    return sock.getsockname()[1]


def unreadable(c: Context, name: str, text: str) -> Path:
    """A data file that reading fails on with EACCES, as for a user without read permission (the
    tests run as root, whom permission bits do not stop). It lies beside the case folder, so that
    the folder's before/after snapshot can still read everything in it."""
    path = c.tmp.parent / name
    path.write_text(text)
    real = Path.read_bytes

    def read_bytes(self):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    c.monkeypatch.setattr(Path, "read_bytes", read_bytes)
    access = os.access  # the streaming reader asks first, as a user without permission would be told
    c.monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if Path(p) == path else access(p, mode, *a, **k))
    return path


def fifo(c: Context) -> Path:
    path = c.tmp / "in.jsonl"
    os.mkfifo(path)
    return path


def stdin(c: Context, text: str) -> str:
    c.monkeypatch.setattr("sys.stdin", io.StringIO(text))
    return "-"


def predict(c: Context, task: str, name: str, text: str, *extra) -> list:
    return ["predict", c.trained(task), "--input", c.file(name, text), "--output", c.tmp / "out.jsonl", *extra]


def serve(c: Context, *extra) -> list:
    return ["serve", c.trained("cls"), *extra]


QA_SURROGATE = '{"question": "who lives in paris ?", "context": "john \\udc01 lives in paris ."}\n'
CASES = [
    # --- serve: settings and addresses, refused before the model is loaded or a port opened -------------
    Case("serve-port-negative", lambda c: serve(c, "--port", "-1"), ("--port -1",)),
    Case("serve-port-not-a-number", lambda c: serve(c, "--port", "http"), ("--port",)),
    Case(
        "serve-port-busy",
        lambda c: serve(c, "--port", busy_port()),
        ("cannot listen on 127.0.0.1", "choose another --port"),
    ),
    Case(
        "serve-host-not-this-machine",
        lambda c: serve(c, "--host", "192.0.2.1", "--port", "8765"),
        ("cannot listen on 192.0.2.1:8765", "give --host an address of this machine"),
    ),
    Case(
        "serve-host-unresolvable",
        lambda c: serve(c, "--host", "no-such-host.invalid", "--port", "8765"),
        ("cannot listen on no-such-host.invalid", "give --host an address of this machine"),
    ),
    Case(
        "serve-max-request-bytes-zero",
        lambda c: serve(c, "--max-request-bytes", "0", "--port", "8765"),
        ("--max-request-bytes must be >= 1",),
    ),
    Case(
        "serve-max-wait-negative",
        lambda c: serve(c, "--max-wait-ms", "-5", "--port", "8765"),
        ("--max-wait-ms must be between 0 and 10000",),
    ),
    Case("serve-batch-size-negative", lambda c: serve(c, "--batch-size", "-3", "--port", "8765"), ("--batch-size",)),
    Case(
        "serve-onnx-int8-not-exported", lambda c: serve(c, "--backend", "onnx-int8", "--port", "8765"), ("export onnx",)
    ),
    Case("serve-model-dir-is-a-file", lambda c: ["serve", c.file("model.bin", "x"), "--port", "8765"], ("model.bin",)),
    Case("serve-unknown-option", lambda c: serve(c, "--workers", "4"), ("No such option",)),
    # --- texts that are not strings, or that UTF-8 cannot carry (row and field named) -----------------
    Case(
        "predict-cls-text-true",
        lambda c: predict(c, "cls", "in.jsonl", jsonl({"text": True})),
        ("row 1: field 'text' is true/false",),
    ),
    Case(
        "predict-cls-text-surrogate-row-3",
        lambda c: predict(c, "cls", "in.jsonl", jsonl({"text": "a"}, {"text": "b"}) + f'{{"text": {SURROGATE}}}\n'),
        ("row 3: field 'text' holds an unpaired UTF-16 surrogate",),
    ),
    Case(
        "predict-pair-second-text-surrogate",
        lambda c: predict(c, "pair", "in.jsonl", f'{{"text": "a good film", "text_pair": {SURROGATE}}}\n'),
        ("field 'text_pair' holds an unpaired UTF-16 surrogate",),
    ),
    Case(
        "predict-pair-text-list",
        lambda c: predict(c, "pair", "in.jsonl", jsonl({"text": ["a"], "text_pair": "b"})),
        ("row 1: field 'text' is a list",),
    ),
    Case(
        "predict-ner-text-surrogate",
        lambda c: predict(c, "ner", "in.jsonl", f'{{"text": {SURROGATE}}}\n'),
        ("field 'text' holds an unpaired UTF-16 surrogate",),
    ),
    Case(
        "predict-ner-text-object",
        lambda c: predict(c, "ner", "in.jsonl", jsonl({"text": {"words": 1}})),
        ("row 1: field 'text' is an object",),
    ),
    Case(
        "predict-qa-context-surrogate",
        lambda c: predict(c, "qa", "in.jsonl", QA_SURROGATE),
        ("field 'context' holds an unpaired UTF-16 surrogate",),
    ),
    Case(
        "predict-qa-question-number",
        lambda c: predict(c, "qa", "in.jsonl", jsonl({**QA_RECORD, "question": 7})),
        ("row 1: field 'question' is a number",),
    ),
    Case(
        "predict-cls-stdin-text-object",
        lambda c: ["predict", c.trained("cls"), "--input", stdin(c, jsonl({"text": {"a": 1}}))],
        ("<stdin>: row 1: field 'text' is an object",),
    ),
    Case(
        "embed-text-number",
        lambda c: ["embed", c.tiny, "--input", c.file("in.jsonl", jsonl({"text": 2.5})), "--output", c.tmp / "v.npy"],
        ("row 1: field 'text' is a number",),
    ),
    # --- ids given back in predict's rows -------------------------------------------------------------
    Case(
        "predict-cls-id-object",
        lambda c: predict(c, "cls", "in.jsonl", jsonl({"id": {"n": 1}, "text": "good"})),
        ("row 1: field 'id' is an object",),
    ),
    Case(
        "predict-ner-id-surrogate",
        lambda c: predict(c, "ner", "in.jsonl", f'{{"id": {SURROGATE}, "text": "john lives in paris"}}\n'),
        ("field 'id' holds an unpaired UTF-16 surrogate",),
    ),
    Case(
        "predict-qa-id-list",
        lambda c: predict(c, "qa", "in.jsonl", jsonl({**QA_RECORD, "id": ["q1"]})),
        ("row 1: field 'id' is a list",),
    ),
    Case(
        "embed-id-surrogate",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("in.jsonl", f'{{"id": {SURROGATE}, "text": "good"}}\n'),
            "--output",
            c.tmp / "v.jsonl",
        ],
        ("field 'id' holds an unpaired",),
    ),
    Case(
        "embed-id-column-list",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("in.jsonl", jsonl({"guid": ["a"], "text": "good"})),
            "--output",
            c.tmp / "v.jsonl",
        ],
        ("row 1: field 'guid' is a list",),
    ),
    # --- JSON nested deeper than Python's parser goes -------------------------------------------------
    Case(
        "predict-cls-jsonl-deep",
        lambda c: predict(c, "cls", "in.jsonl", jsonl({"text": "a"}) + DEEP + "\n"),
        ("in.jsonl:2: invalid JSON (nested too deeply)",),
    ),
    Case("predict-cls-json-deep", lambda c: predict(c, "cls", "in.json", DEEP), ("nested too deeply",)),
    Case("predict-ner-jsonl-deep", lambda c: predict(c, "ner", "in.jsonl", DEEP + "\n"), ("nested too deeply",)),
    Case(
        "predict-qa-json-deep", lambda c: predict(c, "qa", "in.json", '{"data": ' + DEEP + "}"), ("nested too deeply",)
    ),
    Case(
        "predict-pair-stdin-deep",
        lambda c: ["predict", c.trained("pair"), "--input", stdin(c, DEEP)],
        ("nested too deeply",),
    ),
    # --- files that cannot be read -------------------------------------------------------------------
    Case(
        "predict-cls-unreadable",
        lambda c: ["predict", c.trained("cls"), "--input", unreadable(c, "in.csv", "text\ngood\n")],
        ("cannot read", "Permission denied", "permissions"),
    ),
    Case(
        "predict-ner-unreadable",
        lambda c: ["predict", c.trained("ner"), "--input", unreadable(c, "in.txt", "john lives in paris\n")],
        ("cannot read", "Permission denied"),
    ),
    Case(
        "finetune-data-unreadable",
        lambda c: c.finetune("cls", unreadable(c, "train.csv", "text,label\na,b\n")),
        ("cannot read", "Permission denied"),
    ),
    Case(
        "embed-input-unreadable",
        lambda c: ["embed", c.tiny, "--input", unreadable(c, "in.txt", "good\n"), "--output", c.tmp / "v.npy"],
        ("cannot read", "Permission denied"),
    ),
    Case(
        "predict-input-io-error",
        lambda c: ["predict", c.trained("cls"), "--input", "/proc/self/mem"],
        ("cannot read /proc/self/mem",),
        absent=("permissions",),
    ),
    Case("predict-input-fifo", lambda c: ["predict", c.trained("cls"), "--input", fifo(c)], ("is not a regular file",)),
]


@pytest.fixture(autouse=True)
def _release_sockets():
    yield
    while _held:
        _held.pop().close()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_input_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)


def test_case_ids_are_new():
    from test_bad_input_corpus import CASES as CORE
    from test_hostile_commands import CASES as COMMANDS
    from test_hostile_json import CASES as JSON_VALUES

    ids = [case.id for case in CASES]
    assert len(set(ids)) == len(ids) and not set(ids) & {case.id for case in CORE + COMMANDS + JSON_VALUES}
