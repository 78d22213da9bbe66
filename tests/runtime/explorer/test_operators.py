"""The experience operators (config/operators.py) as the explorer applies them to a step's experiences, as
Trinity-RFT's filters do (buffer/operators/filters/reward_filter.py)."""

from hypothesis import given
from hypothesis import strategies as st

from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.runtime.experience import Experience
from trinity.runtime.explorer import operators

DEFAULTS = {"metric_key": "accuracy", "correct_threshold": 0.0}


def exp(group: str, accuracy: float, reward: float = 0.0, truncated: bool = False) -> Experience:
    return Experience([1], [2, 3], reward=reward, group=group, metrics={"accuracy": accuracy}, truncated=truncated)


def test_dynamic_sampling_keeps_the_tasks_some_but_not_all_of_whose_rollouts_are_right():
    exps = [exp("mixed", 1), exp("mixed", 0), exp("right", 1), exp("right", 1), exp("wrong", 0), exp("wrong", 0)]
    kept, counted = operators.dapo_dynamic_sampling(exps + [exp("alone", 1)], DEFAULTS)
    assert [e.group for e in kept] == ["mixed", "mixed"]
    assert counted == {"filtered_count": 5.0, "dropped_all_correct": 2.0, "dropped_all_wrong": 2.0}


def test_dynamic_sampling_reads_its_metric_else_the_reward_above_its_threshold():
    exps = [Experience([1], [2], reward=r, group="g") for r in (0.5, 0.9)]
    assert operators.dapo_dynamic_sampling(exps, DEFAULTS)[0] == []  # both rewards above 0: all right
    assert len(operators.dapo_dynamic_sampling(exps, DEFAULTS | {"correct_threshold": 0.6})[0]) == 2
    by_score = [Experience([1], [2], group="g", metrics={"score": s}) for s in (0.0, 1.0)]
    assert len(operators.dapo_dynamic_sampling(by_score, DEFAULTS | {"metric_key": "score"})[0]) == 2


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.booleans()), max_size=30))
def test_dynamic_sampling_keeps_whole_groups_each_with_a_right_and_a_wrong_rollout(rollouts):
    exps = [exp(group, float(right)) for group, right in rollouts]
    kept, counted = operators.dapo_dynamic_sampling(exps, DEFAULTS)
    groups = list(dict.fromkeys(e.group for e in kept))
    assert kept == [e for group in groups for e in exps if e.group == group]  # whole groups, each in order
    for group in groups:
        assert {e.metrics["accuracy"] for e in kept if e.group == group} == {0.0, 1.0}
    assert counted["filtered_count"] == len(exps) - len(kept)


def test_a_cut_response_trains_none_of_its_tokens():
    multi = Experience([1], [2, 3, 4], reward=1.0, action_mask=[1, 0, 1], turn_rewards=[0.5, 0.5], truncated=True)
    exps = [exp("g", 1, truncated=True), exp("g", 0), multi]
    masked, counted = operators.mask_response_truncated(exps, {})
    assert [e.mask() for e in masked] == [[0, 0], [1, 1], [0, 0, 0]]
    assert masked[2].turn_rewards is None and masked[2].reward == 1.0  # no turn left to reward apart
    assert counted == {"masked_truncated_count": 2.0}


def test_the_pipeline_applies_the_configs_operators_in_order(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "model:\n  model_path: /models/tiny\ndata_processor:\n  experience_pipeline:\n    operators:\n"
        "      - name: mask_response_truncated\n      - {name: dapo_dynamic_sampling, args: {correct_threshold: 0.5}}\n"
    )
    config = resolve(Request(path, ("hardware=cpu",))).config
    pipeline = operators.pipeline(config)
    assert [(f.__name__, args) for f, args in pipeline] == [
        ("mask_response_truncated", {}),
        ("dapo_dynamic_sampling", {"metric_key": "accuracy", "correct_threshold": 0.5}),
    ]
    exps = [exp("g", 0.6, truncated=True), exp("g", 0.4), exp("h", 1.0), exp("h", 1.0)]
    kept, counted = operators.apply(pipeline, exps)
    assert [e.mask() for e in kept] == [[0, 0], [1, 1]]
    assert counted == {
        "masked_truncated_count": 1.0,
        "filtered_count": 2.0,
        "dropped_all_correct": 2.0,
        "dropped_all_wrong": 0.0,
    }


def saving(tmp_path, *overrides):
    config = resolve(Request(None, ("hardware=cpu", "~stages", *overrides))).config
    return operators.input_store(config, tmp_path)


def test_save_input_keeps_the_experiences_as_made_where_it_names(tmp_path):
    """data_processor.experience_pipeline.save_input: SQLite by default (explorer_output.db in the run directory),
    or a JSON-lines file; what is kept reads back whole."""
    on = "+data_processor.experience_pipeline.save_input=true"
    made = [exp("a", 1, reward=1.0, truncated=True), exp("a", 0)]
    default = saving(tmp_path, on)
    default.add(made)
    assert (tmp_path / "explorer_output.db").exists() and default.pending() == made
    lines = saving(tmp_path, on, "+data_processor.experience_pipeline.input_save_path=saved/in.jsonl")
    lines.add(made)
    assert [Experience.from_json(line) for line in (tmp_path / "saved" / "in.jsonl").read_text().splitlines()] == made
    assert saving(tmp_path) is None  # off by default
