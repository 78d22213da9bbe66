"""YAML positions, parsed exactly as OmegaConf parses."""

import re

from omegaconf import OmegaConf

from tests.config.test_errors import BOMB
from tests.conftest import MINIMAL, REFERENCE
from trinity.config.sources.yaml_file import load_yaml

TRICKY = (
    "lr: 1e-6\nflag: on\nday: 2001-12-14\nhex: 0x1F\nhalf: .5\nbig: 1_000\nnothing: ~\nlist:\n  - a: 1\n    b: [x, y]\n"
)


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


# --- hostile YAML: every file trinity reads goes through the same bounds ---------------

ANCHORED = MINIMAL + (
    "trainer: &trainer\n  save_interval: 7\n  grad_clip: 0.5\n"
    "stages:\n  - stage_name: warmup\n    trainer:\n      <<: *trainer\n      save_interval: 3\n"
    "  - stage_name: main\n    trainer: *trainer\n"
)


def test_anchors_aliases_and_merges_still_work(cli, write):
    path = write("run.yaml", ANCHORED)
    warmup = cli("config", "render", "-c", path, "--stage", "warmup", "--format", "json")
    main = cli("config", "render", "-c", path, "--stage", "main", "--format", "json")
    assert warmup.code == 0 and main.code == 0, warmup.err + main.err
    assert (warmup.json()["trainer"]["save_interval"], warmup.json()["trainer"]["grad_clip"]) == (3, 0.5)
    assert (main.json()["trainer"]["save_interval"], main.json()["trainer"]["grad_clip"]) == (7, 0.5)


def test_a_merged_key_is_located_where_the_merge_brings_it(cli, write):
    path = write("run.yaml", ANCHORED.replace("grad_clip: 0.5", "grad_clip: often"))
    result = cli("config", "validate", "-c", path)
    assert result.code == 2
    assert "error: run.yaml:5:3: trainer.grad_clip: input should be a valid number" in result.err


def test_a_bomb_in_a_profile_is_refused_by_every_command_that_reads_it(cli, write):
    write("site/bombp.yaml", "extends: cpu\ndescription: hostile\n" + BOMB)
    expected = "error: site/bombp.yaml:7:8: YAML aliases expand to more than 10,000 nodes at *d (an alias bomb?)"
    for args in (
        ("profile", "lint", "site"),
        ("profile", "show", "bombp", "--profile-dir", "site"),
        ("config", "validate", "--profile-dir", "site", "hardware=bombp"),
    ):
        result = cli(*args)
        # lint reports on stdout
        assert result.code == 2 and expected in result.out + result.err, (
            args,
            result.out,
            result.err,
        )


def test_a_bomb_or_a_recursive_alias_in_a_file_to_compare_with_is_refused(cli, write):
    bomb = write("bomb.yaml", BOMB)
    recursive = write("saved.yaml", "trainer: &t {again: *t}\n")
    vs = cli("config", "diff", "--vs-config", bomb)
    saved = cli("config", "diff", "--saved", recursive)
    assert vs.code == 2 and "error: bomb.yaml:5:8: YAML aliases expand to more than 10,000 nodes at *d" in vs.err
    assert (
        saved.code == 2
        and "error: saved.yaml:1:21: YAML alias *t refers to the collection that contains it (a recursive alias)"
        in saved.err
    )


def test_deep_nesting_in_a_large_file_is_refused_before_the_parser_recurses(cli, write):
    # 30,000 levels overflow libyaml's C stack (a segfault); the event scan runs for any file past 32 KiB.
    path = write("run.yaml", MINIMAL + "x: " + "[" * 30_000 + "]" * 30_000 + "\n")
    result = cli("config", "validate", "-c", path)
    # Our scan stops at level 51 (column 53); a newer libyaml's scanner reads ahead and stops at its own 1,000-level
    # bound first.
    assert result.code == 2 and re.search(
        r"error: run\.yaml:3:(53|1003): YAML nested more than 50 levels deep\n", result.err
    ), result.err


def test_an_alias_bound_is_exact(cli, write):
    # 100 aliases of a 100-node list stand for exactly 10,000 nodes: allowed; one more alias is not.
    anchor = "items: &l [" + ", ".join(["0"] * 99) + "]\n"
    at_bound = write("ok.yaml", anchor + "copies: [" + ", ".join(["*l"] * 100) + "]\n")
    past = write("past.yaml", anchor + "copies: [" + ", ".join(["*l"] * 101) + "]\n")
    ok, refused = cli("config", "validate", "-c", at_bound), cli("config", "validate", "-c", past)
    assert ok.code == 2 and "YAML" not in ok.err and "items: unknown key" in ok.err  # gets past loading to the schema
    assert refused.code == 2 and "past.yaml:2:410: YAML aliases expand to more than 10,000 nodes at *l" in refused.err
