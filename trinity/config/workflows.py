"""The workflows a taskset can name: built-in names, or `module:Class` for your own.

Names map to import paths as data, so the config layer can check them without importing the runtime.
"""

import re

WORKFLOWS = {
    "math_workflow": "trinity.runtime.workflows.math:MathWorkflow",
    "arith_workflow": "trinity.runtime.workflows.arith:ArithWorkflow",
    "arith_feedback_workflow": "trinity.runtime.workflows.arith_feedback:ArithFeedbackWorkflow",
    "calculator_workflow": "trinity.runtime.workflows.calculator:CalculatorWorkflow",
    "react_agent_workflow": "trinity.runtime.workflows.react:ReactAgentWorkflow",
}
# The reward function (trinity/config/rewards.py) each built-in workflow scores with when its taskset names none.
DEFAULT_REWARDS = {
    "math_workflow": "math_reward",
    "arith_workflow": "exact_match",
    "arith_feedback_workflow": "exact_match",
    "calculator_workflow": "exact_match",
    "react_agent_workflow": "exact_match",
}
# Built-in workflows whose agents call the engines' OpenAI endpoint (explorer.rollout_model.enable_openai_api).
OPENAI_CLIENTS = ("react_agent_workflow",)
IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def workflow_path(name: str) -> str:
    """The import path of a workflow name; '' when it is neither built in nor `module:Class`."""
    if name in WORKFLOWS:
        return WORKFLOWS[name]
    return name if IMPORT_PATH.match(name) else ""
