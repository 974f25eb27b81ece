"""`gtool plan`: a performance and memory model of gtool.trainer that ranks the grids of P ranks.

costmodel/    the cost model itself: pure, from a store's metadata and a device profile
calibration/  the measurements that make a device profile (`gtool plan --calibrate`); they drive the
              pipeline, the loader and the trainer
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gtool.faces import face

if TYPE_CHECKING:
    from gtool.plan.calibration.machine import SHIPPED, machine_folder, plan_profile
    from gtool.plan.calibration.microbench import calibrate
    from gtool.plan.calibration.trials import time_grids
    from gtool.plan.costmodel.auto import TRIAL_SPREAD, Timing, choose_layout, trial_grids
    from gtool.plan.costmodel.budget import RunMemory
    from gtool.plan.costmodel.planner import (
        GridEstimate,
        Plan,
        PlanRequest,
        largest_fitting_batch,
        layout_memory,
        make_plan,
    )
    from gtool.plan.costmodel.profile import DeviceProfile, load_profile, save_profile

__getattr__, __dir__ = face(__name__)
