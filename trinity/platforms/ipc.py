"""Whether a node's devices can map each other's memory between processes (device IPC: a colocated engine takes the
trainer's weights from its device buffer, synchronizer.sync_channel device_ipc): the platform's mechanism
(`Platform.device_ipc`) and, where the platform names one (`Platform.ipc_driver`), the node's driver release.

The release is read from the driver's own files, as `trinity doctor` reads CANN's (npu_driver.py for Ascend's HDK);
nothing is imported or run.
"""

from typing import NamedTuple

from . import npu_driver
from .base import Platform
from .detect import Probes

# the module that reads and orders the driver releases of each platform that names one
DRIVERS = {npu_driver.DEVICE_TYPE: npu_driver}


class IpcSupport(NamedTuple):
    """Whether device IPC works here, and why (what --explain and the note show)."""

    on: bool
    why: str


def driver_release(platform: Platform, probes: Probes) -> dict[str, str | None] | None:
    """{release, release_from} of this node's driver where `platform`'s device IPC depends on it; None elsewhere
    (nothing is read)."""
    if not platform.device_ipc or not platform.ipc_driver:
        return None
    return DRIVERS[platform.device_type].driver_state(probes)


def support(platform: Platform, driver: dict[str, str | None] | None) -> IpcSupport:
    """Device IPC on a node of `platform` whose driver release `driver_release` read (None: none was read)."""
    if not platform.device_ipc or not platform.ipc_driver:
        return IpcSupport(platform.device_ipc, platform.ipc_reason)
    release, where = (driver or {}).get("release"), (driver or {}).get("release_from")
    need = f"it needs driver release {platform.ipc_driver} or newer"
    if release is None:
        looked = ", ".join(DRIVERS[platform.device_type].LOOKED_IN)
        return IpcSupport(False, f"no {platform.device_type} driver release found on this node ({looked}); {need}")
    newer = DRIVERS[platform.device_type].at_least(release, platform.ipc_driver)
    if newer is None:
        return IpcSupport(False, f"driver release {release!r} ({where}) is none this version of trinity reads; {need}")
    if not newer:
        return IpcSupport(False, f"driver release {release} ({where}) is older than {platform.ipc_driver}; {need}")
    return IpcSupport(True, f"{platform.ipc_reason}; driver release {release} ({where})")


def driver_report(platform: Platform, probes: Probes) -> tuple[dict | None, list[tuple[str, str, str]]]:
    """`trinity doctor`'s driver line where `platform`'s device IPC depends on the driver ({release, release_from,
    device_ipc, why}; None elsewhere), and the problem it makes: device IPC off here, as (severity, message, hint)."""
    driver = driver_release(platform, probes)
    if driver is None:
        return None, []
    here = support(platform, driver)
    report = {**driver, "device_ipc": here.on, "why": here.why}
    if here.on:
        return report, []
    hint = (
        f"install the {platform.device_type} driver release {platform.ipc_driver} or newer; until then a colocated "
        "run moves its weights through Ray's object store (host memory) instead of device IPC"
    )
    return report, [("warning", f"device IPC is off on this node: {here.why}", hint)]
