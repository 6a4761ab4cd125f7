from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "tests/gpu" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _switches_under_test():
    """``GRAPHTUNE_TEST_SPLIT_PDL_BF16=1``: the bf16 split kernels launched behind the kernel ahead
    (``interface_hopper.SPLIT_PDL_BF16``, off until its GPU run) in every GPU test of the session, so that a device call
    runs the bf16 decode tests with it before it is turned on."""
    import os
    if not os.environ.get("GRAPHTUNE_TEST_SPLIT_PDL_BF16"):
        yield
        return
    from graphtune.kernels.mla_decode import interface_hopper
    saved = interface_hopper.SPLIT_PDL_BF16
    interface_hopper.SPLIT_PDL_BF16 = True
    yield
    interface_hopper.SPLIT_PDL_BF16 = saved
