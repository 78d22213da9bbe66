"""The Ascend driver's release (HDK) as its installer's files say it, and device IPC gated on it (platforms/ipc.py):
planted files stand in for the driver, which cannot be installed here."""

import pytest

from tests.fakes import ascend_driver, fake_machine
from trinity.platforms import PLATFORMS, ipc, npu_driver


def test_the_release_is_read_where_the_install_record_points():
    found = npu_driver.driver_state(fake_machine(texts=ascend_driver("25.3.rc1", root="/opt/ascend")))
    assert found == {"release": "25.3.rc1", "release_from": "/opt/ascend/driver/version.info"}


def test_without_an_install_record_the_default_folder_is_read_and_without_either_nothing_is_found():
    found = npu_driver.driver_state(fake_machine(texts=ascend_driver("24.1.rc2", recorded=False)))
    assert found == {"release": "24.1.rc2", "release_from": "/usr/local/Ascend/driver/version.info"}
    assert npu_driver.driver_state(fake_machine()) == {"release": None, "release_from": None}


@pytest.mark.parametrize(
    "release,newer",
    [
        ("25.3.rc1", True),
        ("25.3.RC1", True),
        ("25.3.rc1.2", True),  # a patch of 25.3.RC1
        ("25.3.rc2", True),
        ("25.3.0", True),  # the release after its candidates
        ("25.5.t3.b001", True),  # a test build of a later release
        ("25.5", True),
        ("25.2.0", False),
        ("25.2.rc1", False),
        ("24.1.rc2", False),
        ("25.3.t1", False),  # a test build comes before the release candidate
    ],
)
def test_releases_are_ordered_as_the_driver_numbers_them(release, newer):
    assert npu_driver.at_least(release, "25.3.rc1") is newer


def test_what_is_no_release_is_not_ordered():
    assert npu_driver.release_order("banana") is None and npu_driver.at_least("banana", "25.3.rc1") is None


def test_npu_device_ipc_depends_on_the_nodes_driver_and_cuda_on_nothing_read():
    npu = PLATFORMS["npu"]
    assert npu.device_ipc and npu.ipc_driver == "25.3.rc1"
    on = ipc.support(npu, ipc.driver_release(npu, fake_machine(texts=ascend_driver("25.3.rc1"))))
    assert on.on and "driver release 25.3.rc1 (/usr/local/Ascend/driver/version.info)" in on.why
    old = ipc.support(npu, ipc.driver_release(npu, fake_machine(texts=ascend_driver("25.2.0"))))
    assert not old.on and "older than 25.3.rc1" in old.why
    missing = ipc.support(npu, ipc.driver_release(npu, fake_machine()))
    assert not missing.on and "/etc/ascend_install.info, /usr/local/Ascend/driver/version.info" in missing.why
    unread = ipc.support(npu, ipc.driver_release(npu, fake_machine(texts=ascend_driver("banana"))))
    assert not unread.on and "'banana'" in unread.why
    assert ipc.driver_release(PLATFORMS["cuda"], fake_machine()) is None  # nothing of a GPU's driver is read
    assert ipc.support(PLATFORMS["cuda"], None).on and not ipc.support(PLATFORMS["cpu"], None).on
