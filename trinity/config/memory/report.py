"""A memory plan for people (a breakdown per role and device) and for programs (JSON-ready data)."""

from .checks import Check
from .estimate import GIB
from .issues import gets, gib, knob_text
from .plan import MemoryPlan, TrainedAdapter

LABEL_WIDTH = 72


def plans_text(plans: list[tuple[str, MemoryPlan]]) -> str:
    """Every plan's breakdown, stage by stage."""
    return "\n".join(plan_text(plan, stage) for stage, plan in plans)


def plan_text(plan: MemoryPlan, stage: str = "") -> str:
    """One plan: the device, the models, each check with its items by phase, what was not checked."""
    where = f" (stage '{stage}')" if stage else ""
    memory = f": {plan.device_memory / GIB:.0f} GiB per device" if plan.device_memory else ""
    lines = [f"memory plan for {plan.hardware}{where}{memory}"]
    for found in plan.models:
        shape = found.shape
        lines.append(
            f"model {found.name}: {shape.params / 1e9:.2f} B parameters ({shape.model_type}, {shape.layers} layers, "
            f"vocabulary {shape.vocab}; shape from {found.source})"
        )
    if plan.lora:
        lines.append(_lora_line(plan.lora))
    for check in plan.checks:
        lines += ["", *_check_lines(check)]
    lines += [f"{u.reason}" + (f" ({u.hint})" if u.hint else "") for u in plan.unchecked]
    return "\n".join(lines) + "\n"


def _lora_line(lora: TrainedAdapter) -> str:
    engines = {"adapter": "the engines apply it", "merged": "the engines take merged full weights"}[lora.lora_sync]
    return (
        f"LoRA adapter on {lora.model}: rank {lora.adapter.rank} on {', '.join(lora.adapter.modules) or 'no module'}, "
        f"{lora.parameters / 1e6:.1f} M parameters ({lora.share:.2%} of the model), trained on a frozen base; "
        f"{engines} (synchronizer.lora_sync: {lora.lora_sync})"
    )


def _check_lines(check: Check) -> list[str]:
    verdict = check.status if check.status == "fits" else check.status.upper() if check.hard else "vLLM queues the rest"
    head = f"{check.subject}: {gib(check.need)} of {gets(check)} ({check.share:.0%}): {verdict}"
    lines = [head]
    phases = {
        "": "held throughout",
        **{p: p + (" (peak)" if p == check.estimate.peak_phase else "") for p in check.estimate.phases},
    }
    for phase, title in phases.items():
        items = [i for i in check.estimate.items if i.phase == phase]
        if items and len(phases) > 1:
            lines.append(f"  {title}")
        lines += [f"    {i.label:<{LABEL_WIDTH}} {gib(i.bytes):>10}" for i in items]
    lines += [f"  would fit with: {knob_text(k)}" for k in check.knobs]
    return lines


def plans_dict(plans: list[tuple[str, MemoryPlan]]) -> list[dict]:
    """Every plan as JSON-ready data, bytes as integers."""
    return [{"stage": stage, **plan_dict(plan)} for stage, plan in plans]


def plan_dict(plan: MemoryPlan) -> dict:
    """One plan as JSON-ready data."""
    return {
        "hardware": plan.hardware,
        "device_memory_bytes": plan.device_memory,
        "fits": plan.fits,
        "models": [
            {"name": f.name, "parameters": f.shape.params, "source": f.source, "shape": f.shape._asdict()}
            for f in plan.models
        ],
        "lora": _lora_dict(plan.lora),
        "checks": [_check_dict(c) for c in plan.checks],
        "unchecked": [u._asdict() for u in plan.unchecked],
    }


def _lora_dict(lora: TrainedAdapter | None) -> dict | None:
    if lora is None:
        return None
    return {
        "model": lora.model,
        "rank": lora.adapter.rank,
        "modules": list(lora.adapter.modules),
        "parameters": lora.parameters,
        "lora_sync": lora.lora_sync,
    }


def _check_dict(check: Check) -> dict:
    return {
        "role": check.role,
        "key": check.key,
        "subject": check.subject,
        "devices": check.devices,
        "status": check.status,
        "hard": check.hard,
        "need_bytes": check.need,
        "capacity_bytes": check.capacity,
        "capacity_label": check.capacity_label,
        "share": round(check.share, 4),
        "peak_phase": check.estimate.peak_phase,
        "items": [i._asdict() for i in check.estimate.items],
        "knobs": [k._asdict() for k in check.knobs],
    }
