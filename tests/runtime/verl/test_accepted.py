"""verl's acceptances, remembered by what verl was asked: equal keys for runs verl would answer alike, another key
for any change of what it reads (a trainer value, the passthrough, a model folder's files, where the child imports
from, verl's platform variables)."""

import os

import pytest

from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.runtime.driver.preflight import training_stages
from trinity.runtime.verl import accepted

ENV = {"VERL_PLATFORM": "cpu"}


@pytest.fixture
def key_of(demo_assets, monkeypatch):
    """The key of the demo (its assets this session's) with `overrides`."""
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))

    def key(*overrides: str, env: dict = ENV) -> str:
        return accepted.key(training_stages(resolve(Request(None, ("hardware=cpu", *overrides)))), env)

    return key


def test_what_verl_does_not_read_leaves_the_key_alone(key_of, tmp_path):
    assert (
        key_of()
        == key_of("buffer.total_steps=7", "trainer.save_interval=0", f"checkpoint_root_dir={tmp_path}")
        == key_of(
            "cluster.gpu_per_node=3", "explorer.rollout_model.engine_num=2", "synchronizer.sync_method=checkpoint"
        )
    )


@pytest.mark.parametrize(
    "change",
    [
        ("algorithm.optimizer.lr=3e-6",),
        ("buffer.train_batch_size=32",),
        ("+trainer.trainer_config.actor.clip_ratio_c=4.0",),
        ("stages.1.algorithm.optimizer.lr=3e-6",),
        ("algorithm.algorithm_type=ppo",),  # a critic to ask about too
    ],
)
def test_a_value_verl_reads_changes_the_key(key_of, change):
    assert key_of(*change) != key_of()


def test_verls_platform_variables_change_the_key(key_of):
    assert key_of(env={"VERL_PLATFORM": "npu"}) != key_of()


def test_a_model_folder_changed_on_disk_changes_the_key(key_of, demo_assets, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for file in (demo_assets / "model").iterdir():
        (model / file.name).write_bytes(file.read_bytes())
    before = key_of(f"model.model_path={model}")
    config = model / "config.json"
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 1_000_000_000))
    assert key_of(f"model.model_path={model}") != before


def test_a_folder_first_on_the_childs_import_path_changes_the_key(key_of, monkeypatch, tmp_path):
    before = key_of()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert key_of() != before


def test_a_package_installed_or_removed_changes_the_key(key_of, monkeypatch, tmp_path):
    """Installing or removing a package changes its site-packages folder's modification time."""
    site_packages = tmp_path / "site-packages"
    site_packages.mkdir()
    monkeypatch.setattr(accepted.site, "getsitepackages", lambda: [str(site_packages)])
    before = key_of()
    (site_packages / "newly_installed").mkdir()
    os.utime(site_packages, ns=(0, site_packages.stat().st_mtime_ns + 1_000_000_000))
    assert key_of() != before


def test_a_file_the_passthrough_names_is_stamped_and_a_dangling_link_is_no_error(key_of, tmp_path):
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    named = f"+trainer.trainer_config.actor_rollout_ref.model.tokenizer_path={tokenizer}"
    before = key_of(named)
    os.utime(tokenizer, ns=(0, tokenizer.stat().st_mtime_ns + 1_000_000_000))
    assert key_of(named) != before
    (tmp_path / "dangling").symlink_to(tmp_path / "absent")  # in a model folder: stamped as unreadable
    assert key_of(f"model.model_path={tmp_path}") is not None


def test_stages_that_cannot_be_named_are_never_known(key_of, monkeypatch, tmp_path):
    def unreadable(value):
        raise PermissionError(13, "Permission denied", value)

    monkeypatch.setattr(accepted, "_stamp", unreadable)
    monkeypatch.setenv("TRINITY_CACHE_DIR", str(tmp_path))
    assert key_of() is None
    accepted.remember(None)
    assert not accepted.known(None) and not (tmp_path / accepted.FOLDER).exists()


def test_remembered_keys_are_known_and_an_unwritable_cache_keeps_none(monkeypatch, tmp_path):
    monkeypatch.setenv("TRINITY_CACHE_DIR", str(tmp_path / "cache"))
    assert not accepted.known("k")
    accepted.remember("k")
    assert accepted.known("k") and not accepted.known("other")
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TRINITY_CACHE_DIR", str(tmp_path / "file"))  # a file where the folder would be
    accepted.remember("k")
    assert not accepted.known("k")
