"""The workflows a taskset can name: built-in names, or `module:Class` for your own.

Names map to import paths as data, so the config layer can check them without importing the runtime. A workflow that
needs a package trinity does not install names it in `NEEDS` (found, never imported, by `trinity config validate` and
before a run: workflow_checks.py); its `workflow_args` are a model in workflow_args.py where it declares one there.
Trinity-RFT's workflows trinity cannot run are known and refused with the reason (`UNSUPPORTED_WORKFLOWS`).
"""

import re
from dataclasses import dataclass

RUNTIME = "trinity.runtime.workflows."

WORKFLOWS = {
    "math_workflow": RUNTIME + "math:MathWorkflow",
    "arith_workflow": RUNTIME + "arith:ArithWorkflow",
    "arith_feedback_workflow": RUNTIME + "arith_feedback:ArithFeedbackWorkflow",
    "calculator_workflow": RUNTIME + "calculator:CalculatorWorkflow",
    "react_agent_workflow": RUNTIME + "react:ReactAgentWorkflow",
    # Trinity-RFT's async twins run the same steps with its async model calls; the explorer here runs every workflow
    # in its own loop, gathering their engine calls, so a twin is its workflow
    "async_math_workflow": RUNTIME + "math:MathWorkflow",
    "math_rm_workflow": RUNTIME + "math_rm:MathRMWorkflow",
    "async_math_rm_workflow": RUNTIME + "math_rm:MathRMWorkflow",
    "math_boxed_workflow": RUNTIME + "math_boxed:MathBoxedWorkflow",
    "math_ruler_workflow": RUNTIME + "math_ruler:MathRulerWorkflow",
    "async_math_boxed_workflow": RUNTIME + "math_boxed:MathBoxedWorkflow",
    "frozen_lake_workflow": RUNTIME + "frozen_lake:FrozenLakeWorkflow",
    "step_wise_alfworld_workflow": RUNTIME + "alfworld:StepWiseAlfworldWorkflow",
}
# The reward function (trinity/config/rewards.py) each built-in workflow scores with when its taskset names none; a
# workflow absent here scores with its environment's reward or needs the taskset to name one (math_rm_workflow).
DEFAULT_REWARDS = {
    "math_workflow": "math_reward",
    "async_math_workflow": "math_reward",
    "arith_workflow": "exact_match",
    "arith_feedback_workflow": "exact_match",
    "calculator_workflow": "exact_match",
    "react_agent_workflow": "exact_match",
    "math_boxed_workflow": "math_boxed_reward",
    "async_math_boxed_workflow": "math_boxed_reward",
    "math_ruler_workflow": "math_reward",  # the reference's score, reported beside the judge's reward
}
# Built-in workflows that build their prompts from their environment (a row holds its settings, each with a default):
# the taskset's prompt column is not read, so none is looked for.
OWN_PROMPTS = ("frozen_lake_workflow",)
# Built-in workflows that score only with the reward their taskset names (a reward model or judge: no default).
NAMED_REWARD = ("math_rm_workflow", "async_math_rm_workflow")
# Built-in workflows that ask an auxiliary model (explorer.auxiliary_models[0], their judge) through its endpoint.
AUXILIARY_CLIENTS = ("math_ruler_workflow",)
# Built-in workflows whose agents call the engines' OpenAI endpoint (explorer.rollout_model.enable_openai_api).
OPENAI_CLIENTS = ("react_agent_workflow",)
# Built-in workflows that ask the model one turn and read its reply's text (prompt, generate, chat): the ones an
# external API model (model.external_model) can answer, as it returns text and no token ids. The others hold
# multi-turn conversations in the chat template's tokens, or read the engines' token ids of an agent's calls.
TEXT_REPLIES = (
    "math_workflow",
    "async_math_workflow",
    "arith_workflow",
    "math_rm_workflow",
    "async_math_rm_workflow",
    "math_boxed_workflow",
    "async_math_boxed_workflow",
    "math_ruler_workflow",
)
IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Needs:
    """Packages a workflow imports when it runs, and the extra of trinity's pyproject.toml that installs them."""

    packages: tuple[str, ...]  # import names, found (importlib.util.find_spec) before a run
    extra: str
    why: str


NEEDS: dict[str, Needs] = {
    "frozen_lake_workflow": Needs(("gymnasium",), "gym", "its lake is gymnasium's FrozenLakeEnv"),
    "step_wise_alfworld_workflow": Needs(
        ("alfworld", "textworld", "fast_downward"), "alfworld", "its games are ALFWorld's, played in TextWorld"
    ),
}
# Trinity-RFT's workflows trinity cannot run, with the reason.
UNSUPPORTED_WORKFLOWS: dict[str, str] = {
    "intercode_sql_workflow": "it runs each task's SQL in InterCode's Docker container (image docker-env-sql, through "
    "the intercode-bench package), and trinity starts no Docker containers",
}


def workflow_path(name: str) -> str:
    """The import path of a workflow name; '' when it is neither built in nor `module:Class`."""
    if name in WORKFLOWS:
        return WORKFLOWS[name]
    return name if IMPORT_PATH.match(name) else ""
