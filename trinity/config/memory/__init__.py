"""Memory fit before launch: will this run fit in the devices of its hardware?

Pure arithmetic on the resolved config, the hardware profile's `memory_gb_per_device` and the
model's shape (no weights, no torch, no device): `shape` counts parameters from config.json fields,
`catalog` finds them (a local folder, else the shipped table), `lora` counts a LoRA adapter's
parameters, `trainer` and `rollout` estimate each role's bytes per device (their docstrings give the
formulas and sources), `checks` builds one check per role against what its device gives it, `knobs`
finds changes that would make a check fit, `plan` puts them together, `issues` turns them into config
issues and `report` prints them.

Each stage that runs is checked on its own; without stages, the root config is.
"""

from ...errors import Issue, undotted
from ..resolve import ResolvedConfig, as_strict, in_stage
from .issues import plan_issues
from .plan import MemoryPlan, plan_memory

__all__ = ["MemoryPlan", "memory_check", "memory_plans", "plan_memory"]


def memory_plans(resolved: ResolvedConfig) -> list[tuple[str, MemoryPlan]]:
    """(stage name, plan) for every stage, or ('', plan) of the root config when there are no stages."""
    return [(name or "", plan_memory(config)) for name, config in resolved.runs]


def memory_check(resolved: ResolvedConfig, strict: bool = False) -> tuple[list[tuple[str, MemoryPlan]], list[Issue]]:
    """The plans and their issues ('does not fit' an error, a warning with ignore_validator_suggestions; 'tight' a
    warning; an error under --strict)."""
    plans = memory_plans(resolved)

    def locate(key: str) -> str:
        return resolved.provenance.written_where(undotted(key))

    issues = []
    for (name, plan), (_, config) in zip(plans, resolved.runs):
        found = plan_issues(plan, locate, config.ignore_validator_suggestions)
        issues += [in_stage(i, f"stage '{name}'") for i in found] if name else found
    return plans, [as_strict(i) for i in issues] if strict else issues
