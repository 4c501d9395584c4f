"""One calling convention for the public API (bertkit.api): the inputs, then the command's options
objects (bertkit.options: EvalOptions, InferenceOptions, PredictOptions, StreamOptions...), each
validated by its own ``validate()``; never a dozen flat parameters that rebuild those objects."""

from __future__ import annotations

import dataclasses
import inspect

from bertkit import api

MOST = 5
# functions still on the old convention (none now: finetune and distill take RunOptions too)
NOT_YET: set = set()


def parameters(name: str) -> list[str]:
    """The parameters of an API function, or of an API class's constructor. A dataclass is a record
    (a result, an options family): built by keyword, it is one of the objects the API takes or returns."""
    found = getattr(api, name)
    if inspect.isclass(found) and dataclasses.is_dataclass(found):
        return []
    return list(inspect.signature(found).parameters)


def test_no_public_api_function_takes_more_than_five_parameters():
    too_many = {name: parameters(name) for name in api.__all__ if len(parameters(name)) > MOST}
    assert set(too_many) - NOT_YET == set(), too_many


def test_the_allow_list_holds_only_what_is_still_too_long():
    assert all(len(parameters(name)) > MOST for name in NOT_YET), "converted: remove it from NOT_YET"


def test_every_public_name_is_checked():
    for name in api.__all__:
        found = getattr(api, name)
        assert callable(found), name
        parameters(name)  # a signature inspect can read
