"""Is the Hugging Face Hub reachable? Asked once per process with one short request, so an
offline machine fails in one line within seconds instead of minutes of library retries.

When the Hub is unreachable the process switches the libraries to offline mode, so anything
already in the local Hugging Face cache still loads (and nothing else is retried).
"""

from __future__ import annotations

import functools
import os
import urllib.error
import urllib.request

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
TRUTHY = {"1", "true", "yes", "on"}
PROBE_TIMEOUT_S = 3.0


def offline_requested() -> bool:
    return any(os.environ.get(name, "").strip().lower() in TRUTHY for name in OFFLINE_VARIABLES)


@functools.lru_cache(maxsize=1)
def hub_reachable() -> bool:
    """True when one request to the Hub endpoint gets any HTTP answer within a few seconds."""
    if offline_requested():
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    try:
        urllib.request.urlopen(
            urllib.request.Request(endpoint + "/api/models?limit=1", method="HEAD"), timeout=PROBE_TIMEOUT_S
        ).close()
    except urllib.error.HTTPError:
        return True  # an HTTP error status is still an answer: the Hub is there
    except (OSError, ValueError):
        return False
    return True


def use_hub_or_cache() -> bool:
    """Call before a Hub load: returns whether the Hub is reachable, and if not, puts the
    libraries in offline mode so they read the local cache once instead of retrying."""
    if hub_reachable():
        return True
    for name in OFFLINE_VARIABLES:
        os.environ[name] = "1"
    try:  # huggingface_hub reads the variable at import time; keep an imported copy in step
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = True
    except (ImportError, AttributeError):
        pass
    return False
