"""`arith_feedback_workflow`: a text game over several turns. The model answers the row's problem; a wrong answer is
told whether it is too low or too high (or not a number) and the model answers again, up to `max_turns` times.
An episode solved on turn t earns 1 - (t - 1) / max_turns (1 at once, less for each retry: a wrong first answer is
not worth as much as a right one), else 0; its accuracy is whether it was solved. Each turn is judged by the taskset's
reward function (`exact_match` unless it names another). `repeat_times` episodes of a task play in step, one engine
call per turn. Only the model's answers are trained: the feedback is the environment's."""

from .base import Workflow, positive


class ArithFeedbackWorkflow(Workflow):
    """Answer, hear "too low" or "too high", answer again: solved sooner earns more, within `max_turns`."""

    default_reward = "exact_match"
    arguments = {"max_turns": 3, "too_low": "<", "too_high": ">", "not_a_number": "?"}

    @classmethod
    def check_values(cls, args: dict) -> None:
        super().check_values(args)
        positive(cls, args, "max_turns")

    def run(self):
        truth = str(self.task.row[self.task.format.response_key])
        turns = self.arg("max_turns")
        episodes = [self.model.conversation(self.task) for _ in range(self.task.repeat_times)]
        solved = [0] * len(episodes)  # the turn that solved each episode (0: not solved)

        def step(i, episode, turn):
            answer = episode.messages[-1]["content"]
            if self.right(answer, truth, len(episode.response_ids)):
                solved[i] = turn
                return True
            if turn < turns:
                episode.add_messages([{"role": "user", "content": self._feedback(answer, truth)}])
            return False

        self.play(episodes, turns, step)
        return [
            e.experience(
                1 - (s - 1) / turns if s else 0.0, self.task.uid, accuracy=float(s > 0), first_try=float(s == 1)
            )
            for e, s in zip(episodes, solved)
        ]

    def _feedback(self, answer: str, truth: str) -> str:
        target = _number(truth)
        if target is None:
            raise ValueError(f"arith_feedback_workflow compares answers with a number; the reference is {truth!r}")
        guess = _number(answer)
        if guess is None:
            return self.arg("not_a_number")
        return self.arg("too_low") if guess < target else self.arg("too_high")


def _number(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None
