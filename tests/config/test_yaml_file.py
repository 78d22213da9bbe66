"""YAML positions, parsed exactly as OmegaConf parses."""

from omegaconf import OmegaConf

from tests.conftest import REFERENCE
from trinity.config.sources.yaml_file import load_yaml

TRICKY = "lr: 1e-6\nflag: on\nday: 2001-12-14\nhex: 0x1F\nhalf: .5\nbig: 1_000\nnothing: ~\nlist:\n  - a: 1\n    b: [x, y]\n"


def test_values_parse_as_omegaconf_parses_them(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TRICKY)
    assert load_yaml(path).data == OmegaConf.to_container(OmegaConf.load(path))
    assert load_yaml(path).data["lr"] == 1e-6 and load_yaml(path).data["day"] == "2001-12-14"


def test_every_key_and_list_item_has_a_position(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TRICKY)
    doc = load_yaml(path)
    assert doc.where(("lr",)).endswith("t.yaml:1:1")
    assert doc.where(("list", 0)).endswith("t.yaml:9:5")
    assert doc.where(("list", 0, "b")).endswith("t.yaml:10:5")
    assert doc.where(("list", 0, "b", 1)).endswith("t.yaml:10:12")
    assert doc.where(("list", 0, "b", "nope")).endswith("t.yaml:10:5")


def test_reference_positions():
    doc = load_yaml(REFERENCE)
    assert doc.where(("synchronizer", "sync_method")).endswith("gsm8k.yaml:62:3")
    assert doc.where(("buffer", "explorer_input", "eval_tasksets", 0, "split")).endswith("gsm8k.yaml:39:7")


def test_empty_file_is_an_empty_mapping(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing\n")
    assert load_yaml(path).data == {}
