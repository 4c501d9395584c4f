"""Every option a command takes, declared once: a dataclass field with its type, default and help,
one dataclass per command family, each with its ``validate()``; the rules they check are written
once (base.py). The CLI builds every flag from these fields (bertkit/cli/options.py) and from the
registered tasks' ``TaskOption``s. Nothing here imports torch.

- base.py: the field helper, the panels, the shared defaults, one check per rule, the run directory
- training.py: finetune, tune, pretrain (TrainConfig, RunOptions, RepeatOptions, TuneOptions)
- inference.py: eval, predict, embed, probe, serve, export, inspect
- publishing.py: push
- selection.py: select
- audit.py: audit
- calibration.py: calibrate, and the coverage of predict and select
"""

from bertkit.options.audit import *  # noqa: F401,F403
from bertkit.options.base import *  # noqa: F401,F403
from bertkit.options.calibration import *  # noqa: F401,F403
from bertkit.options.inference import *  # noqa: F401,F403
from bertkit.options.publishing import *  # noqa: F401,F403
from bertkit.options.selection import *  # noqa: F401,F403
from bertkit.options.training import *  # noqa: F401,F403
