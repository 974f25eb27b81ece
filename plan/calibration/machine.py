"""The device profile `gtool plan` and `--grid auto` price grids with: --profile's, gtool's shipped one
(`--profile shipped`), or by default this machine's, calibrated on first use (gtool.plan.calibration.quick)
and cached in this user's cache folder (gtool.usercache), one file per machine.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

from gtool.plan.costmodel.profile import VERSION, DeviceProfile, ProfileError, load_profile, save_profile
from gtool.usercache import user_cache

SHIPPED = "shipped"
"""--profile's name for gtool's shipped profile."""
FOLDER = "plan"
"""The user cache's subfolder of machine profiles and trials."""


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")


def torch_version() -> str:
    """torch's version, read from its installed metadata: importing torch would cost `gtool plan` and a
    `--grid auto` launcher 0.7 s, for a string (torch itself is asked where it has no metadata)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        import torch

        return torch.__version__


def machine_key() -> str:
    """What identifies this machine to its profile: host, processor, usable cores, torch and the profile
    format (a change of any calibrates afresh)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parts = [platform.node(), platform.machine(), _cpu_model(), str(cores), torch_version(), str(VERSION)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def machine_folder() -> Path:
    """Where this user's machine profiles and `--grid auto` trials are kept (any working folder)."""
    return user_cache() / FOLDER


def machine_profile_path() -> Path:
    return machine_folder() / f"profile-{machine_key()}.json"


def machine_trials_path() -> Path:
    """This machine's `--grid auto` trials (gtool.plan.calibration.trials), measured again after
    `gtool plan --recalibrate`."""
    return machine_folder() / f"trials-{machine_key()}.json"


def plan_profile(
    path: str | None, recalibrate: bool, report: Callable[[str], None], may_calibrate: bool = True
) -> tuple[DeviceProfile, str]:
    """The profile to plan with, and a line saying which it is. Without `path`, this machine's cached one,
    calibrated first when there is none (or `recalibrate`, which also forgets its `--grid auto` trials);
    when it may not calibrate (ranks of torchrun or srun would each measure something else and choose
    different grids), the shipped one."""
    if path == SHIPPED:
        return load_profile(None)
    if path:
        return load_profile(path)
    cached = machine_profile_path()
    if cached.exists() and not recalibrate:
        try:
            profile, _ = load_profile(str(cached))
            return profile, f"this machine's profile ({cached}; `gtool plan --recalibrate` measures it again)"
        except ProfileError:
            pass  # damaged or from an older gtool: measured again below
    if recalibrate:
        machine_trials_path().unlink(missing_ok=True)
    if not may_calibrate:
        profile, note = load_profile(None)
        return profile, f"{note} (no calibration of this machine yet: run `gtool plan --recalibrate` once)"
    from gtool.plan.calibration.quick import quick_calibrate  # torch: only when calibrating

    report(f"calibrating this machine for gtool plan (once, a few seconds; cached in {cached})")
    started = time.perf_counter()
    profile, measurements = quick_calibrate(report)
    took = time.perf_counter() - started
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        save_profile(profile, cached, measurements)
        where = f"cached in {cached}"
    except OSError as exc:
        where = f"not cached: {cached} cannot be written ({exc.strerror})"
    return profile, f"this machine's profile, calibrated just now in {took:.1f} s ({where})"
