"""NVML constants shared by the metrics agent's consumers: the fault analyzer and the simulator.

`gpu_metrics.throttle_reasons` holds NVML's clocks-event-reasons bitmask (nvmlClocksEventReasons,
formerly nvmlClocksThrottleReasons). Kept here, free of heavy imports, so the simulator and the
analyzer agree on the bits without one importing the other.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["GPU_IDLE", "SW_POWER_CAP", "HW_SLOWDOWN", "SW_THERMAL", "HW_THERMAL", "HW_POWER_BRAKE", "THROTTLE_BITS"]

GPU_IDLE = 0x1
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
THROTTLE_BITS: Mapping[int, str] = {
    GPU_IDLE: "gpu_idle",
    0x2: "applications_clocks_setting",
    SW_POWER_CAP: "sw_power_cap",
    HW_SLOWDOWN: "hw_slowdown",
    0x10: "sync_boost",
    SW_THERMAL: "sw_thermal_slowdown",
    HW_THERMAL: "hw_thermal_slowdown",
    HW_POWER_BRAKE: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
