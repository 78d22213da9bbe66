"""What the tests of the derivation rules share: a render of a run config given as text."""

import pytest

from tests.conftest import MINIMAL


@pytest.fixture
def render(cli, write):
    """Render a run config given as YAML text on a profile with overrides; returns (Result, dict or None)."""

    def _render(text: str, *args: str):
        path = write("run.yaml", text if text.startswith("model:") else MINIMAL + text)
        result = cli("config", "render", "-c", path, "--format", "json", *args)
        return result, (result.json() if result.code == 0 else None)

    return _render
