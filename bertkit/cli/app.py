"""The root command, --version, and the entry point that turns every user mistake into one line."""

from __future__ import annotations

import errno
import os
import sys

import typer
from typer.core import TyperGroup

from bertkit.cli import process_end
from bertkit.cli.common import Shown, is_main_process, show_event
from bertkit.cli.options import LATE_COMMANDS
from bertkit.errors import BertkitError

try:  # recent Typer vendors click and raises its own exception types
    from typer import TyperException as CommandLineError
except ImportError:  # older Typer raises click's
    from click import ClickException as CommandLineError

DEBUG_ENV = "BERTKIT_DEBUG"
# Writing failures the user can fix: the disk or quota is full, or the destination is read-only.
# Every writer stages its output (model_dir.files), so nothing half-written stays behind.
# The hints name no flag: export onnx, report and eval write into the model directory, not to --output.
WRITE_ERRORS = {
    errno.ENOSPC: "free some space there, or write to another disk",
    errno.EDQUOT: "free some space under your quota, or write somewhere else",
    errno.EROFS: "write to a writable file system",
    errno.EFBIG: "write to a file system that takes larger files",
}


def _flags_without_placeholder() -> None:
    """Typer's rich help prints a ``<bool>`` type after plain flags (--help, --overwrite), which
    take no value: show no type for them."""
    from typer.core import TyperOption

    original = getattr(TyperOption, "display_type_rich", None)
    if original is None:  # older typer has no such hook (seen on a GPU image): its own help, with the type
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag and self.metavar is None else original(self, ctx)

    if not getattr(original, "_bertkit", False):
        display_type_rich._bertkit = True
        TyperOption.display_type_rich = display_type_rich


# The command table of `bertkit --help`: panels in the order a user meets them, each panel's commands
# in the order they are used. A command missing here (a plug-in's) is listed last, under OTHER_PANEL.
COMMAND_PANELS = (
    ("Train", ("finetune", "distill", "tune", "pretrain", "probe")),
    ("Evaluate and predict", ("eval", "calibrate", "predict", "embed", "report")),
    ("Serve and export", ("serve", "export", "push")),
    ("Data", ("datasets", "audit", "select", "mine")),
    ("Inspect", ("inspect",)),
)
OTHER_PANEL = "Other"
PANEL_OF = {name: panel for panel, names in COMMAND_PANELS for name in names}
# `bertkit` alone: where to start (the README's first commands), not the whole help.
START_HERE = """bertkit {version}: fine-tune, evaluate and serve BERT-family models.

Start here: fine-tune the bundled MiniLM on 4,000 SST-2 sentences (offline, a
few minutes on a CPU; accuracy about 0.85 on the dev sentences), then score it
and use it:
  bertkit finetune cls --data sst2 --model minilm --max-train-samples 4000 \\
      --epochs 2 --lr 1e-4 --max-length 64 --output runs/sst2
  bertkit eval runs/sst2
  echo "a gripping, funny film" | bertkit predict runs/sst2 --input -

Then: `bertkit --help` lists every command by purpose, `bertkit finetune --help`
the tasks, `bertkit datasets` the datasets known by name."""


class RootGroup(TyperGroup):
    """The root command: a command whose flags include the registered tasks' (cli/options.py:
    LATE_COMMANDS) is built when it is invoked, not at import, so `bertkit --help` imports no task
    and a task registered later (a plug-in, a test) adds its flags. Its help lists the commands in
    COMMAND_PANELS' panels and order."""

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        return name, (LATE_COMMANDS[name]() if name in LATE_COMMANDS else command), rest

    def list_commands(self, ctx):
        registered = super().list_commands(ctx)
        ordered = [name for _, names in COMMAND_PANELS for name in names if name in registered]
        return ordered + [name for name in registered if name not in PANEL_OF]

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is not None:
            command.rich_help_panel = PANEL_OF.get(name, OTHER_PANEL)
        return command


_flags_without_placeholder()
app = typer.Typer(
    cls=RootGroup,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Fine-tune, evaluate and serve BERT-family models on classic NLP tasks.",
)


def _show_version(value: bool) -> None:
    if value:
        from bertkit import __version__

        typer.echo(f"bertkit {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_show_version, help="Print the version and exit."
    ),
):
    """Fine-tune, evaluate and serve BERT-family models on classic NLP tasks."""
    if ctx.invoked_subcommand is None:  # plain `bertkit`: where to start, exit 0
        from bertkit import __version__

        typer.echo(START_HERE.format(version=__version__))


def main() -> None:
    """Entry point: user mistakes, bertkit's own and the command line's, become one line on stderr
    and exit code 2 (traceback with BERTKIT_DEBUG=1). A rank of several processes leaves without
    the interpreter's teardown, which can abort it after its work is done (cli/process_end.py)."""
    try:
        _run_command()
    except SystemExit as done:
        if not process_end.in_process_group():
            raise
        process_end.leave(done.code)


def _run_command() -> None:
    if not sys.stderr.isatty():  # no \r-redrawn library bars in CI logs and files (read at their import)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from bertkit.events import listening

    Shown.reset()
    try:
        # Not standalone: Typer would print its usage errors as a multi-line box and exit itself.
        with listening(show_event):  # what a command decides is on stderr before its long work
            code = app(prog_name="bertkit", standalone_mode=False)
        Shown.flush()
    except CommandLineError as exc:  # bad values, missing arguments, unknown options
        if type(exc).__name__ == "NoArgsIsHelpError":  # a group alone (`bertkit export`): its help, as asked
            if exc.format_message().strip():  # rich help was already printed while the error was made
                typer.echo(exc.format_message())
            sys.exit(0)
        if os.environ.get(DEBUG_ENV):
            raise
        typer.echo(f"error: {_usage_message(exc)}", err=True)
        sys.exit(2)
    except BertkitError as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        if is_main_process():
            typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS or os.environ.get(DEBUG_ENV):
            raise
        if is_main_process():
            where = f" while writing {exc.filename}" if exc.filename else ""
            typer.echo(
                f"error: {(exc.strerror or str(exc)).lower()}{where} (hint: {WRITE_ERRORS[exc.errno]})", err=True
            )
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    except BrokenPipeError:  # the reader of stdout stopped (`bertkit predict ... | head`): done, not an error
        _quiet_stdout()
        sys.exit(0)
    except Exception as exc:
        if type(exc).__name__ != "PipeClosed":  # bertkit.api.streaming's, not imported here: --help stays light
            raise
        _quiet_stdout()
        sys.exit(0)
    if code == 130 and is_main_process():  # Typer turns Ctrl-C into this exit code
        typer.echo("interrupted", err=True)
    sys.exit(code if isinstance(code, int) else 0)  # --help and --version return 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush does not fail on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _usage_message(exc) -> str:
    """The command line parser's message on one line, with a hint naming the command's own help."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "bertkit"
    if ctx is None or ctx.parent is None:  # some parse errors carry no or the root context: find the command
        command = _command_in_argv() or command
    return f"{message} (hint: see `{command} --help`)"


def _command_in_argv() -> str | None:
    """The command (and a group's subcommand: `finetune cls`) named on the command line."""
    import typer.main

    commands = typer.main.get_command(app).commands
    words = sys.argv[1:]
    for i, word in enumerate(words):
        if word in commands:
            group, following = commands[word], words[i + 1] if i + 1 < len(words) else None
            if hasattr(group, "list_commands") and following in group.list_commands(None):
                return f"bertkit {word} {following}"
            return f"bertkit {word}"
    return None
