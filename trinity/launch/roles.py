"""The roles, one table: which runtime class runs each role's actors, the calls the driver makes on it, the env it
gets and whether it is one actor or several in rank order.

Every consumer reads an entry here: the launch plan (names and ranks), the runtime env (its env block), the role
factory (its class, loaded by `utils.imports.import_path`) and the protocol checks (tests/runtime/roles). Adding a
role is one entry, its runtime class (with `plan_arguments`) and its protocol. Classes are named as "module:attr"
strings: this layer imports no runtime code.
"""

from dataclasses import dataclass

TRAINER, ROLLOUT, EXPLORER, BUFFER = "trainer", "rollout", "explorer", "buffer"
AUXILIARY = "auxiliary"  # an auxiliary model's engines (explorer.auxiliary_models): rollout engines never weight-synced


@dataclass(frozen=True)
class RoleEntry:
    """What one role is, as plain facts."""

    name: str
    # "module:attr" of the actor class; None: the rollout engine's entry names it (config/engines.py)
    runtime_class: str | None
    protocol: str  # "module:attr" of the calls the driver makes on it (runtime/roles/protocols.py)
    env: str | None  # the run config's env block it gets besides env.common (none: common only)
    ranked: bool  # several actors in rank order (trainer ranks, engine slots); else at most one per stage
    verl_platform: bool = False  # runs verl: gets the platform's verl env (verl's own detection would answer "cpu")


_PROTOCOLS = "trinity.runtime.roles.protocols"
_ENTRIES = (
    RoleEntry(TRAINER, "trinity.runtime.trainer.rank:TrainerRank", f"{_PROTOCOLS}:TrainerCalls", "trainer", True, True),
    RoleEntry(ROLLOUT, None, f"{_PROTOCOLS}:EngineCalls", "rollout", True),
    # its class is its model's engine's; it takes the rollout processes' env, and no weight sync, sleep or wake
    RoleEntry(AUXILIARY, None, f"{_PROTOCOLS}:EngineCalls", "rollout", True),
    RoleEntry(EXPLORER, "trinity.runtime.explorer.role:Explorer", f"{_PROTOCOLS}:ExplorerCalls", None, False),
    RoleEntry(BUFFER, "trinity.runtime.buffer.actor:ExperienceBuffer", f"{_PROTOCOLS}:BufferCalls", None, False),
)
ROLES: dict[str, RoleEntry] = {r.name: r for r in _ENTRIES}


def role(name: str) -> RoleEntry:
    """The entry of role `name`; a ValueError naming the roles there are."""
    if name not in ROLES:
        raise ValueError(f"unknown role {name!r}; roles: {', '.join(ROLES)}")
    return ROLES[name]
