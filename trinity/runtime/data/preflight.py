"""The data sets' preflight check: each local data set a stage reads gives its first row, with every column its format
names, in the driver before Ray starts. The roles check the same row again at setup, where a folder saved by
`datasets` is first read (reading one here would bring torch into the driver)."""

from typing import Any

from ...config.hub.names import hub_name
from ...config.inputs import DataInput, data_inputs
from ...config.resolve import ResolvedConfig
from ...config.workflows import OWN_PROMPTS
from ...errors import Issue, dotted
from .prompts import missing_columns, no_column
from .tasksets import SUFFIXES, DataError, SplitError, first_row


def column_issues(resolved: ResolvedConfig) -> list[Issue]:
    """An error for each data set that cannot be read, or whose first row lacks a column its format names."""
    issues: list[Issue] = []
    for label, config, provenance in resolved.labelled():
        for data_input in data_inputs(config):
            issues += [i for i in _issues(data_input, provenance, label) if i not in issues]
    return issues


def _issues(data_input: DataInput, provenance: Any, label: str) -> list[Issue]:
    storage, key = data_input.storage, data_input.key
    if not storage.path or hub_name(storage.path, "dataset"):  # nothing to read (the roles refuse what needs one),
        return []  # or a hub repo's name: checked on its folder once the driver has fetched it
    what = f"{'taskset' if data_input.data == 'rollouts' else 'data set'} {storage.name}{label}"
    try:
        row = first_row(storage.path, storage.split, storage.subset_name)
    except (DataError, OSError) as exc:
        field = (*key, "split" if isinstance(exc, SplitError) else "path")
        return [
            Issue(
                f"{what}: {exc}",
                key=dotted(field),
                source=provenance.where(field),
                allowed=f"{', '.join(SUFFIXES)} files with at least one row, or a folder saved by datasets",
                hint="check the path, its split and subset_name, and the file's contents",
            )
        ]
    if row is None:
        return []
    prompt = getattr(storage, "default_workflow_type", None) not in OWN_PROMPTS
    missing = missing_columns(storage.format, row, data_input.data, prompt)
    issues = [_no_column(what, column, (*key, "format", name), row, provenance) for column, name in missing]
    features = storage.data_selector.feature_keys  # the columns a difficulty selector reads
    return issues + [
        _no_column(what, column, (*key, "data_selector", "feature_keys", i), row, provenance)
        for i, column in enumerate(features)
        if column not in row
    ]


def _no_column(what: str, column: str, path: tuple, row: dict, provenance: Any) -> Issue:
    return Issue(
        f"{what}: {no_column(column, row)}",
        key=dotted(path),
        source=provenance.written_where(path),
        hint=f"set {dotted(path)} to the column that holds it",
    )
