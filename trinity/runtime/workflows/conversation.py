"""A multi-turn episode recorded as the token ids the model saw and produced.

The model's replies are kept as the ids it generated, never decoded and tokenised again; only what the environment
says between turns is tokenised, as the chat template renders it after the reply. That rendering is the template's
text between an assistant message and the next generation prompt: rendered once around a placeholder reply, so the
model's own text cannot change it. Where the template's closing of the turn starts with the token the reply ended
with (its end of sequence or end of turn), that token stands for it; a reply cut at max_tokens gets the whole
closing from the environment.
"""

import math
from dataclasses import dataclass, field
from typing import Any

from ..experience import Experience, with_accuracy

PLACEHOLDER = "\x00reply\x00"  # no model writes it, no template changes it


class ConversationError(ValueError):
    """A conversation the chat template cannot extend turn by turn."""


@dataclass(frozen=True)
class ChatTemplate:
    """Messages to text by the model's chat template (the taskset's own, else the model's, else the tokenizer's)."""

    tokenizer: Any
    template: str | None = None
    enable_thinking: bool | None = False  # None: the template's own default
    tools: list[dict] | None = None  # OpenAI function schemas the template renders into the prompt

    def render(self, messages: list[dict], generation_prompt: bool) -> str:
        """The messages as the template writes them, with the cue for the model's turn or without."""
        if self.template is None and not getattr(self.tokenizer, "chat_template", None):
            raise ConversationError(
                "a multi-turn workflow needs a chat template, and this model's tokenizer has none: set "
                "model.custom_chat_template (or the taskset's format.chat_template)"
            )
        from ..data.prompts import render_chat

        return render_chat(self.tokenizer, messages, self.template, self.enable_thinking, self.tools, generation_prompt)

    def ids(self, text: str) -> list[int]:
        """Token ids of rendered text (the template writes the special tokens itself)."""
        return self.tokenizer.encode(text, add_special_tokens=False)

    def after_reply(self, history: list[dict], messages: list[dict]) -> tuple[str, str]:
        """(how the template closes an assistant turn after its content, the text of `messages` up to the next
        generation prompt), for a reply that follows `history`."""
        reply = {"role": "assistant", "content": PLACEHOLDER}
        before = self.render([*history, reply], generation_prompt=False)
        after = self.render([*history, reply, *messages], generation_prompt=True)
        closing = before[before.rindex(PLACEHOLDER) + len(PLACEHOLDER) :]
        # what comes before the reply may differ (Qwen3 drops an empty think block once the reply is no longer the
        # last turn): the episode keeps its own ids for that part; only what follows the reply must agree
        rest = after[after.rindex(PLACEHOLDER) + len(PLACEHOLDER) :] if PLACEHOLDER in after else ""
        if PLACEHOLDER not in after or not rest.startswith(closing):
            raise ConversationError(
                "the chat template changes a reply's turn when a turn is added, so a conversation cannot grow as the "
                "model saw it; use a template that keeps earlier replies as written"
            )
        return closing, rest[len(closing) :]


@dataclass(eq=False)  # an episode is itself: two that read alike are still two
class Conversation:
    """One episode: the first prompt's ids, then every turn's, each token marked as the model's or the environment's.

    `limit` is the engine's context (max_model_len): a turn that would pass it ends the conversation as truncated.
    """

    template: ChatTemplate
    messages: list[dict]
    limit: int | None = None
    prompt_ids: list[int] = field(init=False)
    response_ids: list[int] = field(default_factory=list, init=False)
    logprobs: list[float] = field(default_factory=list, init=False)
    action_mask: list[int] = field(default_factory=list, init=False)
    weight_version: int = field(default=0, init=False)
    truncated: bool = field(default=False, init=False)
    turns: int = field(default=0, init=False)  # the model's replies so far
    # what reward_turn gave each turn (a run of the model's tokens) so far
    turn_rewards: list[float] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.messages = list(self.messages)
        self.prompt_ids = self.template.ids(self.template.render(self.messages, generation_prompt=True))
        if self.limit is not None and len(self.prompt_ids) >= self.limit:
            raise ConversationError(
                f"the conversation's first prompt is {len(self.prompt_ids)} tokens, and the context "
                f"(max_model_len) holds {self.limit} with the reply: raise model.max_model_len or shorten the prompt"
            )

    def context(self) -> list[int]:
        """Every token so far: what the model continues on its next turn."""
        return self.prompt_ids + self.response_ids

    def room(self) -> int | None:
        """Tokens the next reply may take before the context is full (None: no limit)."""
        return None if self.limit is None else self.limit - len(self.context())

    def add_reply(self, ids: list[int], logprobs: list[float], text: str, weight_version: int) -> None:
        """The model's turn: its generated ids (trained), their log-probs, and its text as an assistant message."""
        if ids and self.action_mask[-1:] != [1]:  # a reply right after another continues its turn (one run)
            self.turn_rewards.append(0.0)
        self.response_ids += ids
        self.logprobs += logprobs
        self.action_mask += [1] * len(ids)
        self.messages.append({"role": "assistant", "content": text})
        self.weight_version = max(self.weight_version, weight_version)
        self.turns += 1

    def reward_turn(self, reward: float) -> None:
        """Reward the model's latest turn on its own (a game's points for a move); `experience` puts what is left of
        the episode's reward on the last turn."""
        if not self.turn_rewards:
            raise ConversationError("reward_turn rewards the model's latest turn: add a reply first")
        self.turn_rewards[-1] += float(reward)

    def add_messages(self, messages: list[dict]) -> bool:
        """The environment's turn (user or tool messages) after the model's; False, and the conversation is
        truncated, when it leaves no room for another reply."""
        if self.messages[-1].get("role") != "assistant":
            raise ConversationError("the environment speaks after the model's reply: add a reply first")
        if self.truncated:
            return False  # the context is full: the episode is over
        closing, text = self.template.after_reply(self.messages[:-1], messages)
        ids = self.template.ids(closing + text)
        closes = self.template.ids(closing)[:1]
        if closes and ids[:1] == closes and self.response_ids[-1:] == closes:
            ids = ids[1:]  # the reply ended with the token that closes the turn (end of sequence, end of turn)
        if self.limit is not None and len(self.context()) + len(ids) >= self.limit:
            self.truncated = True
            return False
        self.response_ids += ids
        self.logprobs += [0.0] * len(ids)
        self.action_mask += [0] * len(ids)
        self.messages += messages
        return True

    def experience(self, reward: float, group: str, /, **metrics: float) -> Experience:
        """The episode as one experience: the environment's tokens after the model's last reply are left out. Where
        turns were rewarded on their own, `reward` is the episode's total: what they did not take goes to the last."""
        end = len(self.action_mask)
        while end and not self.action_mask[end - 1]:
            end -= 1
        turn_rewards = None
        if any(self.turn_rewards):
            last = float(reward) - sum(self.turn_rewards[:-1])
            if self.turn_rewards[-1] and not math.isclose(self.turn_rewards[-1], last, abs_tol=1e-9):
                raise ConversationError(
                    f"reward_turn gave the last turn {self.turn_rewards[-1]}, and the episode's reward {reward} leaves "
                    f"it {last}: the reward experience() takes is the episode's total, its turns' rewards included"
                )
            turn_rewards = [*self.turn_rewards[:-1], last]
        return Experience(
            prompt_ids=list(self.prompt_ids),
            response_ids=self.response_ids[:end],
            logprobs=self.logprobs[:end],
            reward=float(reward),
            group=group,
            weight_version=self.weight_version,
            metrics=with_accuracy(reward, {"turns": self.turns, **metrics})
            | ({"truncated": 1.0} if self.truncated else {}),
            action_mask=self.action_mask[:end],
            truncated=self.truncated,
            turn_rewards=turn_rewards,
        )
