"""Time bounds that grow with the machine's load, so that a test that waits for something or names what did
not answer in time passes on a shared machine as on a quiet one (and still fails when it never happens)."""

from __future__ import annotations

import math
import os

from gtool.cores import available_cores


def load_factor() -> float:
    """How many times busier than its cores this machine has been over the last minute (at least 1)."""
    return max(1.0, os.getloadavg()[0] / available_cores())


def scaled(seconds: float) -> int:
    """`seconds` (a bound that holds on a quiet machine) times the load factor, in whole seconds."""
    return math.ceil(seconds * load_factor())
