"""The torch parts a task trains with, named here so that tasks never import bertkit.networks.

Tasks sit below ``bertkit.networks`` and stay torch-free, yet a task decides which loss wrapper,
collator or scorer its model trains and scores with. Each such part is a ``Part``: a name the task
calls like the class or function it stands for, bound to it by the networks module that defines it
(``losses.py``, ``masking.py``) when that module is imported. The engine imports them all
(``bertkit.networks.bind_task_parts``), so every network a task builds for an Engine is bound.

The masking rule is a plain, torch-free spec that a task checks when it is built, so it lives here
itself rather than behind a part.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertkit.errors import BertkitError


class Part:
    """A torch class or function a task names; ``bind`` gives it its value, and calls, attribute
    reads and ``isinstance`` checks then go to that value."""

    def __init__(self, name: str):
        self.name, self.target = name, None

    def bind(self, target):
        self.target = target
        return target

    def resolved(self):
        if self.target is None:
            # a programming error, not a user's: some path built a task's network without an Engine
            raise RuntimeError(f"the network part {self.name} is not bound yet: call "
                               "bertkit.networks.bind_task_parts() (the engine does) before building it")
        return self.target

    def __call__(self, *args, **kwargs):
        return self.resolved()(*args, **kwargs)

    def __getattr__(self, attribute: str):
        if attribute.startswith("__") or attribute in ("name", "target"):
            raise AttributeError(attribute)  # copy/pickle probes must not reach an unbound target
        return getattr(self.resolved(), attribute)

    def __instancecheck__(self, instance) -> bool:
        return isinstance(instance, self.resolved())

    def __repr__(self) -> str:
        return f"Part({self.name!r}, bound={self.target is not None})"


# networks/losses.py
TrainingLoss = Part("TrainingLoss")
set_head_bias = Part("set_head_bias")
# networks/masking.py
MaskingCollator = Part("MaskingCollator")
VocabTables = Part("VocabTables")
MaskedLMTrainer = Part("MaskedLMTrainer")
MaskedLMScorer = Part("MaskedLMScorer")
carry_base_pooler = Part("carry_base_pooler")


@dataclass(frozen=True)
class MaskRule:
    """BERT's masking rule (networks/masking.py applies it): ``rate`` of the tokens are chosen; of
    those ``mask_share`` become [MASK], ``random_share`` a random token, the rest stay."""

    rate: float = 0.15
    mask_share: float = 0.8
    random_share: float = 0.1
    whole_word: bool = False

    def validate(self) -> "MaskRule":
        if not 0 < self.rate < 1:
            raise BertkitError(f"--mask-rate {self.rate} must be between 0 and 1", "BERT used 0.15")
        if self.mask_share < 0 or self.random_share < 0 or self.mask_share + self.random_share > 1:
            raise BertkitError("--mask-token-share and --random-token-share must be >= 0 and add up to at most 1 "
                               "(the rest of the chosen tokens stay unchanged)", "BERT used 0.8 and 0.1")
        return self
