"""What the explorer reads from a taskset's rows: each row's workflow, named when it is unknown or missing."""

import pytest

from trinity.config.schema.buffer import TasksetConfig
from trinity.runtime.explorer.tasksets import row_workflows


def taskset(**fmt):
    return TasksetConfig(name="mixed", path="/d", format=fmt)


def test_each_row_runs_the_workflow_its_column_names_else_the_default():
    rows = [{"q": "1", "wf": "math_workflow"}, {"q": "2", "wf": None}, {"q": "3", "wf": "arith_workflow"}]
    classes = row_workflows(taskset(workflow_key="wf"), rows, "arith_workflow")
    assert [c.__name__ for c in classes] == ["MathWorkflow", "ArithWorkflow", "ArithWorkflow"]
    # no workflow_key: the column is only data
    assert [c.__name__ for c in row_workflows(taskset(), rows, "math_workflow")] == ["MathWorkflow"] * 3


def test_a_row_naming_an_unknown_workflow_or_none_at_all_is_named():
    with pytest.raises(
        ValueError,
        match="taskset mixed: row 1: unknown workflow 'maths_workflow'; built in: math_workflow, arith_workflow",
    ):
        row_workflows(taskset(workflow_key="wf"), [{"wf": "math_workflow"}, {"wf": "maths_workflow"}], None)
    with pytest.raises(
        ValueError,
        match="taskset mixed: row 0 names no workflow in column 'wf', and the taskset has no default_workflow_type",
    ):
        row_workflows(taskset(workflow_key="wf"), [{"wf": ""}], None)
    with pytest.raises(ValueError, match="taskset mixed: row 0: column 'wf' holds 3, not a workflow name"):
        row_workflows(taskset(workflow_key="wf"), [{"wf": 3}], "math_workflow")
