"""Committed JSON Schemas are current, draft-07 valid, and every shipped YAML points at one and passes it."""

import json

import jsonschema
import pytest

from tests.conftest import REFERENCE, REPO
from trinity.config.json_schema import SCHEMAS, dumps
from trinity.config.sources.yaml_file import load_yaml

REGENERATE = (
    "trinity config schema -o schemas/run-config.schema.json && trinity profile schema -o "
    "schemas/hardware-profile.schema.json"
)
SHIPPED = {
    "hardware-profile": sorted((REPO / "profiles").glob("*.yaml")),
    "run-config": [REPO / "conf" / "config.yaml", *sorted((REPO / "examples").rglob("*.yaml"))],
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_committed_schema_is_current(name):
    committed = (REPO / "schemas" / f"{name}.schema.json").read_text()
    assert committed == dumps(SCHEMAS[name]()), (
        f"schemas/{name}.schema.json is stale; regenerate with:\n    {REGENERATE}"
    )


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_shipped_yaml_passes_its_schema(name):
    schema = json.loads((REPO / "schemas" / f"{name}.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    for path in SHIPPED[name]:
        assert [e.message for e in validator.iter_errors(load_yaml(path).data)] == [], path
    assert list(validator.iter_errors({"trainer": {"save_intervall": 1}}))  # typos are caught in the editor too


def test_every_shipped_yaml_names_its_schema():
    for name, files in SHIPPED.items():
        for path in files:
            if path == REFERENCE:
                continue  # the RFC's file stays byte-identical; .vscode/settings.json maps examples/ instead
            first = path.read_text().splitlines()[0]
            assert first.startswith("# yaml-language-server: $schema=") and first.endswith(
                f"schemas/{name}.schema.json"
            ), path
            assert (path.parent / first.split("=", 1)[1]).resolve() == REPO / "schemas" / f"{name}.schema.json"


def test_reference_config_is_the_rfcs_unchanged():
    shared = REPO.parent / "shared" / "reference" / "gsm8k.yaml"
    if not shared.exists():
        pytest.skip("no ../shared beside this checkout")
    assert REFERENCE.read_bytes() == shared.read_bytes()


def test_schema_commands(cli, tmp_path):
    assert json.loads(cli("config", "schema").out)["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert "facts" in json.loads(cli("profile", "schema").out)["properties"]


def test_a_number_a_boolean_or_a_choice_may_be_an_interpolation():
    """An editor must not flag `node_num: ${oc.env:NODE_NUM,2}`: trinity types it by the field once resolved."""
    validator = jsonschema.Draft7Validator(SCHEMAS["run-config"]())
    good = {"cluster": {"node_num": "${oc.env:NODE_NUM,2}"}, "mode": "${oc.env:MODE,both}", "trainer": {"grad_clip": 1}}
    assert list(validator.iter_errors(good)) == []
    bad = {"cluster": {"node_num": "two"}, "synchronizer": {"sync_interval": True}}
    assert sorted(".".join(map(str, e.absolute_path)) for e in validator.iter_errors(bad)) == [
        "cluster.node_num",
        "synchronizer.sync_interval",
    ]
