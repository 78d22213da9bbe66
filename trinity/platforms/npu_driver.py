"""The Ascend NPU driver's release (its HDK, "Ascend HDK 25.3.RC1"), read from the files its installer writes: no vendor
package is imported and nothing is run.

The driver's installer records where it installed the driver in /etc/ascend_install.info
(`Driver_Install_Path_Param=/usr/local/Ascend`), and the driver's release in `<that folder>/driver/version.info`
(`Version=25.3.rc1`, among other key=value lines). Containers mount both files (vllm-ascend's container instructions,
releases/v0.23.0); `npu-smi info -t board` reports the same release as "Software Version" (verl 0.9.1 reads it there,
verl/utils/device.py get_npu_versions, by running npu-smi).

Releases look like 24.1.rc2, 25.3.rc1, 25.3.rc1.2 (a patch of 25.3.RC1), 25.5.0 and 25.5.t3.b001 (a test build of
25.5): a release candidate comes before the release of its major.minor, a test build before both.
"""

import re

from .detect import Probes
from .info_files import value_of
from .npu import NPU

DEVICE_TYPE = NPU.device_type  # the platform whose driver these files describe
INSTALL_INFO = "/etc/ascend_install.info"
INSTALL_PATH_KEY = "driver_install_path_param"  # the folder the driver went into, e.g. /usr/local/Ascend
DEFAULT_ROOT = "/usr/local/Ascend"
VERSION_INFO = "{root}/driver/version.info"  # `Version=25.3.rc1`
LOOKED_IN = (INSTALL_INFO, VERSION_INFO.format(root=DEFAULT_ROOT))  # what a report names when neither says a release
_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(rc|t)?(\d+))?", re.IGNORECASE)
_KINDS = {"t": -2, "rc": -1}  # a test build comes before a release candidate, which comes before the release


def driver_state(probes: Probes) -> dict[str, str | None]:
    """{release, release_from}: the installed driver's release and the file that says it; None where no driver's
    version file is found (where the install record points, else the default folder)."""
    roots = [value_of(probes.read(INSTALL_INFO) or "", INSTALL_PATH_KEY), DEFAULT_ROOT]
    for root in dict.fromkeys(r for r in roots if r):
        path = VERSION_INFO.format(root=root.rstrip("/"))
        release = value_of(probes.read(path) or "", "version")
        if release:
            return {"release": release, "release_from": path}
    return {"release": None, "release_from": None}


def release_order(release: str) -> tuple[int, ...] | None:
    """A release as a tuple that sorts as releases do ('25.3.rc1' -> (25, 3, -1, 1)); None for what is no release."""
    match = _RELEASE.match(release.strip())
    if match is None:
        return None
    major, minor, kind, number = match.groups()
    if kind:  # '25.3.rc1', '25.5.t3'
        return int(major), int(minor), _KINDS[kind.lower()], int(number)
    return int(major), int(minor), int(number or 0), 0  # '25.5.0', '25.3'


def at_least(release: str, minimum: str) -> bool | None:
    """Whether `release` is `minimum` or newer; None when either is no release this module can read."""
    have, need = release_order(release), release_order(minimum)
    return None if have is None or need is None else have >= need
