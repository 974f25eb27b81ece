"""A room's face (gtool.faces): its names resolve to its modules' own objects, loaded only when asked for."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from gtool.faces import _exports

ROOMS = ("preprocess", "loader", "trainer", "plan", "stats")


def face_names(room: str) -> dict[str, tuple[str, str]]:
    package = importlib.import_module(f"gtool.{room}")
    with open(str(package.__file__), encoding="utf-8") as source:
        return _exports(source.read())


@pytest.mark.parametrize("room", ROOMS)
def test_every_name_of_a_face_is_its_modules_object(room: str) -> None:
    package = importlib.import_module(f"gtool.{room}")
    names = face_names(room)
    assert names and set(names) <= set(dir(package))
    for name, (module, real) in names.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), real)


@pytest.mark.integration  # a fresh interpreter: nothing of gtool imported yet
def test_a_face_loads_nothing_until_a_name_is_asked_for() -> None:
    probe = (
        "import sys, gtool.plan as plan\n"
        "assert 'gtool.plan.costmodel.planner' not in sys.modules\n"
        "plan.PlanRequest\n"
        "assert 'gtool.plan.costmodel.planner' in sys.modules\n"
        "assert 'gtool.plan.calibration.microbench' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_a_name_a_face_does_not_export_is_an_attribute_error() -> None:
    import gtool.plan

    with pytest.raises(AttributeError, match="'gtool.plan' has no attribute 'estimate_grid'"):
        gtool.plan.estimate_grid  # noqa: B018
