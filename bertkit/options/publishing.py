"""The options of `bertkit push` (`bertkit report` takes only the model directory)."""

from __future__ import annotations

from dataclasses import dataclass

from bertkit.options.base import MODEL_PANEL, REQUIRED, option


@dataclass
class PushOptions:
    """Where `bertkit push` uploads a model directory."""

    repo: str = option(REQUIRED, "Hub repository id: NAME or OWNER/NAME (created if missing).", MODEL_PANEL)
    private: bool = option(False, "Create the repository as private.", MODEL_PANEL, flag=True)
    token: str | None = option(None, "Hub token; default: the one `hf auth login` saved.", MODEL_PANEL)

    def validate(self, command: str = "bertkit push") -> "PushOptions":
        """Nothing to check here: the repo id's rule is bertkit.api.publishing's, run before any work."""
        return self
