"""`exact_match` (the demo's): the response, trimmed, is exactly the reference, trimmed. accuracy 1 or 0."""

from typing import Any


def exact_match(response: str, truth: Any) -> dict[str, float]:
    """{'accuracy': 1.0} when the trimmed response equals the trimmed reference, else 0."""
    return {"accuracy": float(response.strip() == str(truth).strip())}
