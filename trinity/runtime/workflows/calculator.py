"""`calculator_workflow`: a tool-use task. The model may call `calculate` (integer arithmetic: + - * / and
parentheses) before it answers the row's problem; the tool's reply comes back as a tool turn, and the next reply
without a call is the answer, judged by the taskset's reward function (`exact_match` unless it names another) against
the row's reference: reward 1 when right, else 0 (also when `max_turns` replies pass without an answer). Calls are
parsed in `tool_call_format` (tool_calls.FORMATS: `hermes`, the default, or `brackets`); a bad call is answered with
its error and counted in `tool_errors`. `repeat_times` episodes of a task play in step, one engine call per turn;
only the model's turns are trained."""

import ast
import operator

from ..data.tool_calls import parser
from .base import Workflow, positive
from .toolbox import Toolbox

OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,
}
MAX_DIGITS = 30  # a product of products can grow without bound: refuse it rather than stall the workflow


def calculate(expression: str) -> int:
    """Integer arithmetic: + - * / (whole division) and parentheses."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    return _value(tree.body)


def _value(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        result = OPERATORS[type(node.op)](_value(node.left), _value(node.right))
        if len(str(abs(result))) > MAX_DIGITS:
            raise ValueError(f"the result has more than {MAX_DIGITS} digits")
        return result
    raise ValueError(f"only whole numbers, + - * / and parentheses: {ast.unparse(node)!r}")


class CalculatorWorkflow(Workflow):
    """Call the calculator or answer: a right answer within `max_turns` earns 1."""

    default_reward = "exact_match"
    arguments = {"max_turns": 3, "tool_call_format": "hermes"}

    @classmethod
    def check_values(cls, args: dict) -> None:
        super().check_values(args)
        positive(cls, args, "max_turns")
        parser(args.get("tool_call_format", "hermes"))  # an unknown format is named with the known ones

    def run(self):
        truth = str(self.task.row[self.task.format.response_key])
        turns = self.arg("max_turns")
        boxes = [Toolbox({"calculate": calculate}, self.arg("tool_call_format")) for _ in range(self.task.repeat_times)]
        episodes = [self.model.conversation(self.task, tools=box.schemas()) for box in boxes]
        answers: list[str | None] = [None] * len(episodes)

        def step(i, episode, turn):
            reply = episode.messages[-1]["content"]
            if not boxes[i].calls_in(reply):
                answers[i] = reply
                return True
            if turn < turns:  # a call on the last turn is not run: no turn is left to read its result
                episode.add_messages(boxes[i].respond(reply))
            return False

        self.play(episodes, turns, step)
        return [self._scored(e, a, box, truth) for e, a, box in zip(episodes, answers, boxes)]

    def _scored(self, episode, answer: str | None, box: Toolbox, truth: str):
        right = answer is not None and self.right(answer, truth, len(episode.response_ids))
        return episode.experience(
            float(right), self.task.uid, tool_calls=float(box.calls), tool_errors=float(box.errors)
        )
