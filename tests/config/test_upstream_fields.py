"""Every Trinity-RFT 0.6.0 config key has a fate (conf/upstream_fields.yaml), and the schema keeps to it.

`upstream/trinity-rft-0.6.0-fields.json` is every leaf of upstream's config classes with its type and
default, read from the 0.6.0 wheel (../shared/research); `upstream/...-internal-fields.json` the ones
upstream marks as filled by itself.
"""

import json
import re
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from tests.conftest import MINIMAL, REPO
from trinity.config import upstream
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.config.schema import RunConfig
from trinity.errors import ConfigError

HERE = Path(__file__).parent / "upstream"
UPSTREAM = json.loads((HERE / "trinity-rft-0.6.0-fields.json").read_text())
INTERNAL = json.loads((HERE / "trinity-rft-0.6.0-internal-fields.json").read_text())
LEAVES = {path: info for path, info in UPSTREAM.items() if not info.get("section")}


def _internal(path: str) -> bool:
    """Whether upstream fills the key itself: it, or a section above it, is marked internal in its class."""
    parts = path.split(".")
    for end in range(1, len(parts) + 1):
        info = UPSTREAM.get(".".join(parts[:end]))
        name = parts[end - 1].removesuffix("[]").removesuffix("{}")
        if info is not None and name in INTERNAL.get(info.get("cls", ""), []):
            return True
    return False


def _unwrap(tp):
    while True:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
            tp = args[0]
        elif typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        else:
            return tp


def _schema_leaves(model: type[BaseModel], prefix: str = "") -> dict:
    out = {}
    for name, field in model.model_fields.items():
        tp, path = _unwrap(field.annotation), f"{prefix}{name}"
        item = typing.get_args(tp)[0] if typing.get_origin(tp) is list else None
        value = typing.get_args(tp)[1] if typing.get_origin(tp) is dict else None
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            out |= _schema_leaves(tp, path + ".")
        elif isinstance(item, type) and issubclass(item, BaseModel):
            out |= _schema_leaves(item, path + "[].")
        elif isinstance(value, type) and issubclass(value, BaseModel):  # a mapping of sections, as upstream's {}
            out |= _schema_leaves(value, path + "{}.")
        else:
            out[path] = field
    return out


OURS = _schema_leaves(RunConfig)


def _field(path: str):
    """The schema's field at a dotted path of sections (a section's own field, which OURS holds only as leaves)."""
    model, parts = RunConfig, path.split(".")
    for part in parts[:-1]:
        model = _unwrap(model.model_fields[part].annotation)
    return model.model_fields[parts[-1]]


def _covering(path: str) -> upstream.Fate:
    """The table entry of a leaf: its own or its nearest section's."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        found = upstream.table().get(prefix) or upstream.table().get(prefix.removesuffix("[]").removesuffix("{}"))
        if found is not None:
            return found
    raise KeyError(path)


def _kind(text: str) -> tuple[str, bool]:
    """Upstream's type string -> (base kind, optional)."""
    optional = text.startswith("typing.Optional[")
    inner = text.removeprefix("typing.Optional[").removesuffix("]") if optional else text
    for base, pattern in (
        ("list", "List"),
        ("dict", "Dict|dict"),
        ("bool", "bool"),
        ("int", "int"),
        ("float", "float"),
        ("str", "str|enum|SyncMethod"),
        ("any", "Any"),
    ):
        if re.search(rf"\b({pattern})\b", inner):
            return base, optional
    return inner, optional


def _our_kind(field) -> tuple[str, bool]:
    tp = field.annotation
    optional = type(None) in typing.get_args(tp) or tp is typing.Any
    tp = _unwrap(tp)
    origin = typing.get_origin(tp) or tp
    if origin is typing.Literal:
        return type(typing.get_args(tp)[0]).__name__, optional
    names = {
        bool: "bool",
        int: "int",
        float: "float",
        str: "str",
        list: "list",
        tuple: "list",
        dict: "dict",
        typing.Any: "any",
    }
    return names.get(origin, str(tp)), optional


def _our_default(field):
    if field.default is PydanticUndefined and field.default_factory is None:
        return "<required>"
    value = field.get_default(call_default_factory=True)
    return list(value) if isinstance(value, tuple) else value


USER_SETTABLE = sorted(p for p in LEAVES if not _internal(p))


def test_every_upstream_field_has_a_fate():
    missing = [p for p in LEAVES if _fate_or_none(p) is None]
    assert missing == [], f"no fate in conf/upstream_fields.yaml for {missing}"
    assert all(_covering(p).fate in ("supported", "not yet") for p in USER_SETTABLE), (
        "a user-settable key is neither supported nor 'not yet'"
    )


def _fate_or_none(path):
    try:
        return _covering(path)
    except KeyError:
        return None


def test_the_table_names_only_upstream_keys():
    sections = {p.removesuffix("[]").removesuffix("{}") for p, info in UPSTREAM.items() if info.get("section")}
    stray = [k for k, f in upstream.table().items() if f.fate != "removed" and k not in LEAVES and k not in sections]
    assert stray == []


@pytest.mark.parametrize("path", [p for p in sorted(LEAVES) if _fate_or_none(p) and _covering(p).fate == "supported"])
def test_a_supported_field_is_in_the_schema_with_upstreams_type_and_default(path):
    entry, info = _covering(path), LEAVES[path]
    assert entry.key == path, "a supported key is listed by itself, not by its section"
    if path not in OURS and _kind(info["type"]) == ("dict", True) and _in_schema(path) and entry.why:
        # an untyped dict upstream, a section of typed keys here (algorithm.rollout_correction: verl's), both optional
        assert _our_default(_field(path)) == info["default"] and _our_kind(_field(path))[1]
        return
    assert path in OURS, f"{path} is 'supported' but not in trinity's schema"
    ours = OURS[path]
    same = _our_kind(ours) == _kind(info["type"]) and _our_default(ours) == info["default"]
    assert same or entry.why, (
        f"{path}: {_our_kind(ours)} {_our_default(ours)!r} vs upstream {info['type']} {info['default']!r}; say why "
        "in the table"
    )


def _in_schema(key: str) -> bool:
    return key in OURS or any(p.startswith((key + ".", key + "[]")) for p in OURS)


# A refused key the schema keeps so that upstream's default still validates; a derive rule refuses any other value
# (tests/config/test_every_value_is_honoured.py resolves a config that sets it and checks the refusal).
KEPT_FOR_UPSTREAMS_DEFAULT: tuple[str, ...] = ()


@pytest.mark.parametrize("fate", ["not yet", "internal", "removed"])
def test_refused_keys_are_not_in_the_schema(fate):
    entries = [k for k, f in upstream.table().items() if f.fate == fate]
    inside = [k for k in entries if _in_schema(k) and k not in KEPT_FOR_UPSTREAMS_DEFAULT]
    assert entries and inside == []


def test_every_not_yet_key_has_a_reason():
    assert [k for k, f in upstream.table().items() if f.fate == "not yet" and not f.why] == []


BASE = (
    MINIMAL
    + """\
algorithm:
  repeat_times: 4
buffer:
  explorer_input:
    taskset: {path: /data/t}
    tasksets: [{path: /data/t}]
    eval_tasksets: [{path: /data/t}]
    default_workflow_type: math_workflow
  trainer_input:
    experience_buffer: {name: e}
stages:
  - stage_name: only
"""
)


def _override(key: str) -> str:
    return "+" + key.replace("[]", ".0").replace("{}", ".x") + "=1"


@pytest.mark.parametrize(
    "fate,message", [("not yet", upstream.NOT_YET), ("internal", upstream.INTERNAL), ("removed", upstream.REMOVED)]
)
def test_every_refused_key_is_refused_by_name_wherever_it_is_written(tmp_path, fate, message):
    path = tmp_path / "run.yaml"
    # a slot for its keys: a LoRA adapter, an auxiliary model
    slots = BASE.replace("/models/tiny\n", "/models/tiny\n  lora_configs: [{}]\n")
    path.write_text(slots + "explorer:\n  auxiliary_models: [{model_path: /models/judge}]\n")
    entries = [k for k, f in upstream.table().items() if f.fate == fate and k not in KEPT_FOR_UPSTREAMS_DEFAULT]
    for key in entries:
        with pytest.raises(ConfigError) as err:
            resolve(Request(path, ("hardware=cpu", _override(key))))
        want = key.replace("[]", "[0]").replace("{}", ".x")
        found = [i for i in err.value.issues if i.message == message and want.startswith(i.key)]
        assert found, f"{key}: {[i.render() for i in err.value.issues]}"


def test_validate_names_a_not_yet_key_where_it_is_written(cli, write):
    text = (
        BASE.replace("repeat_times: 4\n", "repeat_times: 4\n  enable_router_replay: true\n")
        + "trainer:\n  megatron:\n    tensor_model_parallel_size: 2\n"
    )
    result = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", text),
        "hardware=cpu",
        "+data_processor.task_pipeline.operators=[]",
    )
    assert result.code == 2 and "trinity: 3 problems in the config" in result.err
    assert (
        "error: run.yaml:5:3: algorithm.enable_router_replay: known Trinity-RFT key, not supported by trinity yet"
        in result.err
    )
    assert "hint: MoE router replay (the engines return each token's routed experts" in result.err
    assert (
        "run.yaml:17:3: trainer.megatron: known Trinity-RFT key, not supported by trinity yet\n    hint: Megatron "
        "training is not supported yet" in result.err
    )
    assert (
        "error: override '+data_processor.task_pipeline.operators=[]': data_processor.task_pipeline: known "
        "Trinity-RFT key, not supported by trinity yet\n    hint: task pipelines (Data-Juicer operators" in result.err
    )
    assert "unknown key" not in result.err


def test_a_not_yet_key_in_a_stage_is_named_in_the_stage(cli, write):
    text = BASE + "    buffer:\n      explorer_input:\n        taskset:\n          format: {image_key: img}\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert (
        "run.yaml:18:20: buffer.explorer_input.taskset.format.image_key: known Trinity-RFT key, not supported by "
        "trinity yet (in stage 'only')" in result.err
    )
    assert "hint: multi-modal data is not supported: trinity's engines, prompts and trainer carry text" in result.err


def test_multi_turn_sft_is_a_data_sets_key_and_a_taskset_is_told_so(cli, write):
    fmt = "{enable_concatenated_multi_turn: true}"
    text = BASE.replace("    taskset: {path: /data/t}\n", f"    taskset: {{path: /data/t, format: {fmt}}}\n")
    result = cli("config", "render", "-c", write("run.yaml", text), "hardware=cpu", "~stages")
    assert "run.yaml:7:39: buffer.explorer_input.taskset.format.enable_concatenated_multi_turn: changes nothing: " in (
        result.err
    )
    assert "Trinity-RFT's task reader ignores it too: a task opens with one prompt" in result.err


def test_a_key_trinity_dropped_names_its_replacement(cli, write):
    text = BASE.replace(
        "    experience_buffer: {name: e}\n",
        "    experience_buffer: {name: e, repeat_times: 2}\n    sft_warmup_steps: 10\n",
    )
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert (
        "buffer.trainer_input.sft_warmup_steps: no longer a key: Trinity-RFT 0.6 dropped it, and so did trinity\n    "
        "hint: use buffer.total_steps of an SFT stage" in result.err
    )
    assert (
        "buffer.trainer_input.experience_buffer.repeat_times: no longer a key" in result.err
        and "hint: use a task set key: buffer.explorer_input.taskset.repeat_times" in result.err
    )


def test_an_upstream_internal_key_says_upstream_fills_it(cli, write):
    result = cli(
        "config", "validate", "-c", write("run.yaml", BASE), "hardware=cpu", "+trainer.trainer_config_path=verl.yaml"
    )
    assert result.code == 2
    assert (
        "trainer.trainer_config_path: known Trinity-RFT key that Trinity-RFT fills itself; not a setting\n    hint: "
        "remove it; deprecated upstream: write the verl keys under trainer.trainer_config" in result.err
    )


def test_a_key_nobody_knows_is_still_unknown_with_a_suggestion(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", BASE), "hardware=cpu", "+trainer.save_intervall=3")
    assert (
        result.code == 2
        and "trainer.save_intervall: unknown key" in result.err
        and "did you mean 'save_interval'?" in result.err
    )


def _counts() -> dict[str, int]:
    fates = [_covering(p).fate for p in USER_SETTABLE]
    return {
        "supported": fates.count("supported"),
        "not yet": fates.count("not yet"),
        "internal": len(LEAVES) - len(USER_SETTABLE),
    }


def test_readme_states_the_counts():
    counts = _counts()
    readme = (REPO / "docs" / "config.md").read_text()
    line = f"{len(USER_SETTABLE)} user-settable keys: **{counts['supported']} supported, {counts['not yet']} not yet**"
    assert line in readme, f"docs/config.md should say: {line}"
    assert f"the {counts['internal']} keys upstream fills itself" in readme


def test_readme_lists_every_default_that_is_not_upstreams():
    readme = (REPO / "docs" / "config.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    differ = [p for p in USER_SETTABLE if p in OURS and _our_default(OURS[p]) != LEAVES[p]["default"] and "[]" not in p]
    assert differ and [p for p in differ if not any(f"`{p}`" in row.split(" | ")[0] for row in rows)] == []


def test_every_upstream_value_trinity_refuses_is_a_supported_keys_value_refused_by_name(tmp_path):
    """`values:` names a value Trinity-RFT takes for a key trinity supports: where it is written it is refused by name
    with the reason, not as an unknown value (Tinker's engine and trainer)."""
    assert upstream.values(), "conf/upstream_fields.yaml has a values section"
    path = tmp_path / "run.yaml"
    path.write_text(BASE)
    for key, refused in upstream.values().items():
        assert upstream.fate_of(tuple(key.split("."))).fate == "supported", key
        for value, why in refused.items():
            with pytest.raises(ConfigError) as err:
                resolve(Request(path, ("hardware=cpu", f"{key}={value}")))
            [issue] = [i for i in err.value.issues if i.key == key]
            # a name is quoted, a switch (use_v1: False) is not
            assert issue.message in (f"{upstream.NOT_YET_VALUE}: {value!r}", f"{upstream.NOT_YET_VALUE}: {value}")
            assert issue.hint == why


def test_tinker_is_refused_with_what_it_needs(cli, write):
    result = cli(
        "config", "validate", "-c", write("run.yaml", BASE), "hardware=cpu", "explorer.rollout_model.engine_type=tinker"
    )
    assert result.code == 2
    assert "explorer.rollout_model.engine_type: known Trinity-RFT value, not supported by trinity yet: 'tinker'" in (
        result.err
    )
    assert "TuFT 0.2.2, samples only on GPUs" in result.err
    unknown = cli("config", "validate", "-c", write("run.yaml", BASE), "hardware=cpu", "trainer.trainer_type=tinkr")
    assert unknown.code == 2 and "input should be 'verl' (got 'tinkr')" in unknown.err  # not upstream's: as before
