"""A user's own reward function, named in a config as tests.runtime.own_rewards:length_reward."""

NOT_A_FUNCTION = 3


def length_reward(response: str, truth, per_char: float = 1.0) -> dict[str, float]:
    """per_char for every character of the response."""
    return {"length": per_char * len(response)}
