"""verl's trainer config for the reference config on every shipped profile, as verl's own dataclasses
accepted it (built here on CPU). Rewrite the golden files: python tests/golden/verl_configs.py

A verl upgrade or a change to trinity/runtime/verl/config.py that changes what verl receives shows up
as a diff of these files. `--json` prints the renders instead (the test runs it in a process of its
own: importing verl brings torch in).
"""

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "verl"
UPDATE = "python tests/golden/verl_configs.py"
MODEL = "/models/policy"  # the path verl is given; nothing is loaded
PROFILES = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))


def render(profile: str) -> str:
    """The committed text: how it was made, verl's platform variables, then the actor_rollout_ref section."""
    import yaml
    from omegaconf import OmegaConf

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.verl.config import build

    config = resolve(Request(REPO / "examples" / "grpo_gsm8k" / "gsm8k.yaml", (f"hardware={profile}",))).config
    section = OmegaConf.to_container(build(config, MODEL, 100), resolve=True)
    data = {
        "trainer": {"device": config.trainer.device},
        "verl_env": get_platform(config.hardware.device_type).verl_env(),
        "actor_rollout_ref": section,
    }
    return (
        f"# verl's config for examples/grpo_gsm8k/gsm8k.yaml hardware={profile}; rewrite with: {UPDATE}\n"
        + yaml.safe_dump(data, sort_keys=True)
    )


def main() -> int:
    sys.path.insert(0, str(REPO))
    os.chdir(REPO)
    for name in [k for k in os.environ if k.startswith("TRINITY_")]:
        del os.environ[name]
    renders = {profile: render(profile) for profile in PROFILES}
    if "--json" in sys.argv:
        print(json.dumps(renders))
        return 0
    from trinity.utils.atomic import write_text_atomic

    HERE.mkdir(exist_ok=True)
    for profile, text in renders.items():
        write_text_atomic(HERE / f"{profile}.yaml", text)
        print((HERE / f"{profile}.yaml").relative_to(REPO))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
