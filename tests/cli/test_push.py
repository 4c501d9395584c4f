"""`bertkit push`: every offline check, then a clear one-line error where the network is needed."""

from __future__ import annotations

import pytest
from conftest import assert_user_error
from extras_models import train_tiny


@pytest.fixture(scope="module")
def cls_dir(tmp_path_factory, tiny_bert):
    return train_tiny("cls", tmp_path_factory.mktemp("push-cls"), tiny_bert)


def test_push_offline_is_one_line(cls_dir, run_cli, monkeypatch):
    from bertkit import hub

    hub.hub_reachable.cache_clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        assert_user_error(
            run_cli("push", cls_dir, "--repo", "someone/tiny-sentiment"),
            "the Hugging Face Hub is unreachable",
            "nothing was pushed",
        )
    finally:
        hub.hub_reachable.cache_clear()


def test_push_checks_before_the_network(cls_dir, run_cli, tmp_path):
    assert_user_error(run_cli("push", tmp_path, "--repo", "a/b"), "not a bertkit model")
    assert_user_error(run_cli("push", cls_dir, "--repo", "a/b/c"), "not a Hub repository id")
    assert_user_error(run_cli("push", cls_dir), "Missing option '--repo'")
