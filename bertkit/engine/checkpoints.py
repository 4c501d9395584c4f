"""Resumable training state: what a checkpoint holds, where it lives, how it is written, which
checkpoints are kept, and whether a command may continue from one.

Checkpoints live next to the model directory, not inside it (the model directory is written
all-or-nothing when training ends, and ``--overwrite`` replaces it)::

    <output>.checkpoints/
        history.jsonl          the live history (history.py)
        step-300/              complete: renamed into place only once every file is written
            model.safetensors  the weights after step 300
            best.safetensors   the best weights so far (absent when they are this step's own)
            optimizer.pt       AdamW moments and step counts
            scheduler.pt       learning-rate schedule (and the fp16 loss scaler)
            rank-0.pt ...      per process: Python/NumPy/torch RNG states, loss sums, example counts
            history.jsonl      the history up to step 300
            state.json         written last: position (epoch, next batch), best metric and step,
                               patience count, and the run's identity (what must not change)
        .step-600.tmp/         being written, or left by a kill: ignored, removed by the next run

Checkpoints are taken only at optimizer-step boundaries, so no gradient is ever half accumulated.
The batch plan of an epoch is a pure function of seed and epoch, so resuming rebuilds the plan
of the saved epoch and starts at the saved batch index: nothing is replayed.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bertkit.engine.checkpoint_files import (
    BEST,
    MODEL,
    STATE,
    STEP_DIR,
    STEP_TMP,
    Progress,
    check_layout,
    check_readable,
    complete_checkpoints,
    misfit,
    newest_readable,
)
from bertkit.engine.history import FILE as HISTORY_FILE
from bertkit.engine.history import History, read
from bertkit.engine.interrupts import test_signal
from bertkit.engine.rng_state import rng_state
from bertkit.engine.run_identity import differences, features_sha1, recorded  # noqa: F401 (features_sha1: api's import)
from bertkit.errors import BertkitError
from bertkit.model_dir import checkpoint_root, write_json
from bertkit.model_dir.files import disk_full_error, follow_umask
from bertkit.model_dir.ownership import refuse_strangers
from bertkit.model_dir.removal import claim, discard_owned, remove_owned, remove_temporary

RESUME_HINT = "repeat the interrupted run's command exactly, plus --resume; or start afresh with another --output"


class RunningSums:
    """This rank's running sums, saved per rank: loss and batches since the last log line and since
    the last evaluation, and examples, real tokens, padded tokens and the sum of squared lengths
    (attention's token pairs, for FLOP counts) so far."""

    def __init__(self, device, saved: dict | None = None, generators: dict | None = None):
        import torch

        self.device, self.generators = device, generators
        self.loss = {k: [torch.zeros((), device=device), 0] for k in ("log", "eval")}
        self.counts = [0, 0, 0, 0]
        if saved is not None:
            self.loss = {k: [saved["loss"][k][0].to(device), saved["loss"][k][1]] for k in self.loss}
            self.counts = [*saved["counts"], 0, 0, 0, 0][:4]

    def add(self, loss, lengths: list[int], new: bool, computed: int | None = None) -> None:
        """``computed``: the tokens the encoder ran for the batch (packed: the real ones and the packed
        row's spare ones); None: the padded batch's, rows x longest."""
        for key in self.loss:
            self.loss[key] = [self.loss[key][0] + loss, self.loss[key][1] + 1]
        if new:  # not a repeated example that only keeps a rank in step with the others
            self.counts = [
                self.counts[0] + len(lengths),
                self.counts[1] + sum(lengths),
                self.counts[2] + (len(lengths) * max(lengths) if computed is None else computed),
                self.counts[3] + sum(n * n for n in lengths),
            ]

    def mean_loss(self, key: str, acc) -> float:
        """The mean since the last call, over all ranks; every rank ran the same number of batches,
        so the mean of the ranks' means is the mean."""
        import torch

        total, batches = self.loss[key]
        self.loss[key] = [torch.zeros((), device=self.device), 0]
        return float(acc.reduce(total, "mean").item()) / max(batches, 1)

    def state(self) -> dict:
        return {
            "loss": {k: list(v) for k, v in self.loss.items()},
            "counts": list(self.counts),
            "rng": rng_state(self.generators),
        }


def read_state(path: Path) -> dict:
    try:
        return json.loads((path / STATE).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise BertkitError(
            f"{path} is not a readable bertkit checkpoint ({exc})",
            "pass --resume-from a step-N directory under <output>.checkpoints",
        ) from exc


class Checkpoints:
    """One run's checkpoints: validated in ``plan`` before any work, used by ``Engine.fit``."""

    def __init__(
        self,
        root: Path,
        save_every: int | None,
        keep: int | None,
        identity: dict,
        resume_from: Path | None = None,
        clear: bool = False,
    ):
        self.root, self.save_every, self.keep, self.identity = root, save_every, keep, identity
        self.resume_from, self.clear = resume_from, clear
        self.greater_is_better = True  # how _prune ranks scores: Engine.fit's setting, given to begin
        self.skipped: list[str] = []  # newer checkpoints passed over because they cannot be read
        self.inherited: tuple = ()  # identity keys the run left to defaults: a resumed run takes the checkpoint's
        self._weights = None  # the checkpoint's weights, between load_weights and begin

    @classmethod
    def plan(
        cls,
        output: Path,
        config,
        identity: dict,
        resume: bool,
        resume_from: str | None,
        overwrite: bool,
        inherited: tuple = (),
    ) -> "Checkpoints | None":
        """Decide, before any data is read, what this run saves and where it continues from
        (``inherited``: the identity's keys the run left to their defaults, which a resumed run takes
        from its checkpoint, e.g. the batch order a task's default once gave)."""
        root = checkpoint_root(output)
        check_layout(root)
        existing = complete_checkpoints(root)
        source, skipped = None, []
        if resume_from:
            path = Path(resume_from).expanduser().resolve()
            inside = complete_checkpoints(path)  # a checkpoints directory: its newest
            source = inside[-1][1] if inside else path
            if not (source / STATE).is_file():
                raise BertkitError(
                    f"--resume-from {resume_from} is not a complete checkpoint (no {STATE})",
                    f"pass a step-N directory under {root}",
                )
            check_readable(source)
        elif resume and existing:
            source, skipped = newest_readable(existing)
        elif existing and config.save_every and not resume:
            if not overwrite:
                raise BertkitError(
                    f"{root} holds checkpoints of an earlier run (newest: {existing[-1][1].name})",
                    "add --resume to continue it, or --overwrite to delete them and start over",
                )
            refuse_strangers(root, "--overwrite", hint=f"move them out of {root} first, or choose another --output")
        if not (resume or resume_from or config.save_every):
            return None
        plan = cls(
            root,
            config.save_every,
            config.keep_checkpoints,
            identity,
            source,
            clear=bool(overwrite and existing and source is None),
        )
        plan.skipped, plan.inherited = skipped, inherited
        plan.check_compatible()
        return plan

    def passed_over(self) -> list[str]:
        """The console's account of the newer checkpoints ``--resume`` could not read, if any."""
        if not self.skipped:
            return []
        return [f"checkpoint {'; '.join(self.skipped)}; resumed from {self.resume_from.name} instead"]

    def check_compatible(self) -> None:
        """Refuse to continue a checkpoint with settings that would train something else."""
        if self.resume_from is None:
            return
        saved = read_state(self.resume_from).get("identity", {})
        self.identity.update({key: recorded(saved, key) for key in self.inherited})
        found = differences(self.identity, saved)
        if found:
            raise BertkitError(f"cannot resume from {self.resume_from}: " + "; ".join(found), RESUME_HINT)

    # --- inside Engine.fit ---------------------------------------------------------------------
    def load_weights(self, model) -> None:
        """Put the checkpoint's weights into the fresh fp32 model, before anything copies them."""
        from safetensors.torch import load_file

        self._weights = None
        if self.resume_from is not None:
            self._weights = load_file(self.resume_from / MODEL)
            try:
                model.load_state_dict(self._weights)
            except RuntimeError as exc:  # missing, unexpected or differently shaped tensors
                raise misfit(self.resume_from, MODEL, exc) from exc

    def begin(self, acc, optimizer, scheduler, greater_is_better: bool = True):
        """Remove leftovers, then load the optimizer and schedule (before they are prepared).
        Returns (progress, history, best weights or None, this rank's saved state or None)."""
        import torch
        from safetensors.torch import load_file

        self.greater_is_better = greater_is_better

        if acc.is_main_process and self.root.is_dir():
            for path in self.root.iterdir():
                if STEP_TMP.fullmatch(path.name):
                    remove_temporary(path)
                elif self.clear and (STEP_DIR.fullmatch(path.name) or path.name == HISTORY_FILE):
                    remove_owned(path, "--overwrite")  # checked whole in plan(), before any work
        if acc.is_main_process and self.save_every:
            claim(self.root, HISTORY_FILE)  # the live history, written from here on
        acc.wait_for_everyone()
        live = self.root / HISTORY_FILE if acc.is_main_process and self.save_every else None
        if self.resume_from is None:
            return Progress(), History(live=live), None, None
        source = self.resume_from
        state = read_state(source)
        try:
            optimizer.load_state_dict(torch.load(source / "optimizer.pt", map_location="cpu", weights_only=True))
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:  # another model's or optimizer's state
            raise misfit(source, "optimizer.pt", exc) from exc
        schedules = torch.load(source / "scheduler.pt", map_location="cpu", weights_only=True)
        scheduler.load_state_dict(schedules["scheduler"])
        if schedules.get("scaler") and acc.scaler is not None:
            acc.scaler.load_state_dict(schedules["scaler"])
        progress = Progress(**state["progress"])
        best = None
        if progress.best_step is not None:
            best = load_file(source / BEST) if (source / BEST).is_file() else self._weights
        self._weights = None
        rank_state = torch.load(source / f"rank-{acc.process_index}.pt", map_location="cpu", weights_only=True)
        return progress, History(read(source / HISTORY_FILE), live=live), best, rank_state

    def save(
        self,
        acc,
        progress: Progress,
        rank_state: dict,
        weights,
        optimizer,
        scheduler,
        best: dict | None,
        history: History,
    ) -> Path:
        """Write step N's checkpoint into ``.step-N.tmp`` and rename it to ``step-N`` once complete
        (every rank's file included), then apply ``--keep-checkpoints``. ``weights()`` gives the
        model's weights on the CPU (fp32 for a bf16 run: its master weights)."""
        import torch
        from safetensors.torch import save_file

        step, main = progress.step, acc.is_main_process
        tmp, final = self.root / f".step-{step}.tmp", self.root / f"step-{step}"
        if main:
            remove_temporary(tmp)
            tmp.mkdir(parents=True)
            claim(tmp, MODEL, BEST, "optimizer.pt", "scheduler.pt", HISTORY_FILE, STATE)
            claim(tmp, *(f"rank-{rank}.pt" for rank in range(acc.num_processes)))
        acc.wait_for_everyone()
        try:
            torch.save(rank_state, tmp / f"rank-{acc.process_index}.pt")
            if main:
                save_file(weights(), tmp / MODEL)
                test_signal("save", step)
                if best is not None and progress.best_step != step:
                    save_file(best, tmp / BEST)
                torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
                torch.save(
                    {
                        "scheduler": scheduler.state_dict(),
                        "scaler": acc.scaler.state_dict() if acc.scaler is not None else None,
                    },
                    tmp / "scheduler.pt",
                )
                history.write(tmp / HISTORY_FILE)
        except Exception as exc:  # e.g. the disk filled up: leave no half checkpoint behind (a kill still may)
            full = disk_full_error(exc, self.root, final)
            self._abandon(tmp, main)
            if full is not None:
                raise full from exc
            raise
        acc.wait_for_everyone()
        if main:
            last = progress.evals[-1] if progress.evals else {}
            score = progress.best_metric if last.get("step") == step and progress.best_step == step else None
            try:
                write_json(
                    tmp / STATE, {"step": step, "score": score, "progress": asdict(progress), "identity": self.identity}
                )
            except BaseException:  # the state file is the last one: without it the checkpoint is half
                self._abandon(tmp, main)
                raise
            follow_umask(tmp)  # safetensors writes 0600: another user resuming needs the umask's modes
            claim(self.root, final.name)
            remove_owned(final, "saving this step's checkpoint again")  # an unreadable one passed over
            tmp.rename(final)
            self._prune()
        acc.wait_for_everyone()
        return final

    def _prune(self) -> None:
        """Keep the ``keep`` newest checkpoints plus the one saved right after the best evaluation."""
        if self.keep is None:
            return
        found = complete_checkpoints(self.root)
        sign = 1 if self.greater_is_better else -1
        # the best score, the earliest of equal ones
        scored = [(sign * score, -step, p) for step, p in found if (score := read_state(p).get("score")) is not None]
        keep = {p for _, p in found[-self.keep :]} | ({max(scored, key=lambda s: s[:2])[2]} if scored else set())
        for _, path in found:
            if path not in keep:
                discard_owned(path, "--keep-checkpoints")

    def _abandon(self, tmp: Path, main: bool) -> None:
        """A save that failed (a full disk): no half checkpoint, and no checkpoints directory left
        holding only a live history when no checkpoint was ever complete (nothing to resume)."""
        if main:
            remove_temporary(tmp)
            self.discard_if_unused()

    def discard_if_unused(self) -> None:
        """After a failed run (main process): a checkpoints directory without one complete
        checkpoint holds only the live history, nothing to resume from, and goes."""
        if not complete_checkpoints(self.root):
            discard_owned(self.root, "removing a checkpoints directory without a checkpoint")


def cpu_copy(model) -> dict:
    return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}
