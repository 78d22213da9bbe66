"""Where trinity keeps what it may lose between runs: $TRINITY_CACHE_DIR, else the XDG cache folder, else ~/.cache."""

from pathlib import Path

from trinity.paths import cache_dir


def test_the_cache_folder_is_the_named_one_else_the_xdg_one_else_the_homes(monkeypatch, tmp_path):
    monkeypatch.setenv("TRINITY_CACHE_DIR", str(tmp_path / "named"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "named"
    monkeypatch.setenv("TRINITY_CACHE_DIR", "")  # set empty: as unset
    assert cache_dir() == tmp_path / "xdg" / "trinity"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path(tmp_path / "home" / ".cache" / "trinity")


def test_without_a_home_the_cache_is_this_users_folder_in_the_temporary_one(monkeypatch):
    """A container's uid with no home: `~` does not expand, and no folder named `~` appears where the run starts."""
    import os
    import tempfile

    from trinity import paths

    monkeypatch.delenv("TRINITY_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(paths.os.path, "expanduser", lambda path: path)
    assert cache_dir() == Path(tempfile.gettempdir()) / f"trinity-cache-{os.getuid()}"
