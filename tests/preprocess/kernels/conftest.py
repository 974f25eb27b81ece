"""Every kernel test runs once in numpy's form and once in numba's (test_forms compares them directly)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gtool.preprocess import kernels


@pytest.fixture(autouse=True, params=["numpy", "numba"])
def kernel_form(request: pytest.FixtureRequest) -> Iterator[str]:
    with kernels.forced(request.param == "numba"):
        yield request.param
