"""An agent's recorded endpoint calls as experiences: one per episode where each call continues the one before.

Calls chain when a call's prompt is the previous call's prompt and reply, token for token, followed by what the
environment said (tool results, the user's next turn): the chat template rendered the agent's messages as the model
saw and wrote them. A chain is one experience, like a Conversation's: the replies trained, the environment's tokens
between them masked out. A call that does not continue the chain (the agent rewrote its history, or a template
changes earlier turns) starts a new experience with the same reward and the same `episode` id, so a step-wise
advantage (multi_step_grpo, gigpo) counts the episode once.
"""

from ..experience import Experience, with_accuracy
from .history import RecordedCall


def chains(calls: list[RecordedCall]) -> list[list[RecordedCall]]:
    """The calls in runs where each continues the one before it."""
    out: list[list[RecordedCall]] = []
    context: list[int] = []
    for call in calls:
        if out and call.prompt_ids[: len(context)] == context and len(call.prompt_ids) >= len(context):
            out[-1].append(call)
        else:
            out.append([call])
        context = call.prompt_ids + call.response_ids
    return out


def experience(chain: list[RecordedCall], reward: float, group: str, episode: str, **metrics: float) -> Experience:
    """One chain of calls as one experience: its first prompt, then every reply (trained) and what came between."""
    response, logprobs, mask = [], [], []
    context = list(chain[0].prompt_ids)
    for call in chain:
        between = call.prompt_ids[len(context) :]
        response += between + call.response_ids
        logprobs += [0.0] * len(between) + call.logprobs
        mask += [0] * len(between) + [1] * len(call.response_ids)
        context = call.prompt_ids + call.response_ids
    return Experience(
        prompt_ids=list(chain[0].prompt_ids),
        response_ids=response,
        logprobs=logprobs,
        reward=float(reward),
        group=group,
        weight_version=max(c.weight_version for c in chain),
        metrics=with_accuracy(reward, {"turns": len(chain), **metrics}),
        action_mask=mask,
        episode=episode,
    )


def experiences(
    calls: list[RecordedCall], reward: float, group: str, episode: str, **metrics: float
) -> list[Experience]:
    """An episode's calls as experiences (one per chain), each with the episode's reward and id."""
    return [experience(chain, reward, group, episode, **metrics) for chain in chains(calls)]
