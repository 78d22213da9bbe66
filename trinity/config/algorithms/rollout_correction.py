"""Rollout correction (verl's `algorithm.rollout_correction`): what its settings mean, read once for every consumer.

The rollout engine samples with its own numerics (and, off-policy, older weights) while the trainer learns with its
own: their log-probs of the same tokens differ. With the trainer's recomputed old log-probs (decoupled mode, verl's
`bypass_mode: false`), the log-ratio r = log pi_old - log pi_rollout gives importance-sampling weights (IS, truncated
at a threshold) applied to the policy loss, and a rejection mask (RS) that keeps tokens or whole sequences out of the
loss where a divergence estimate exceeds its bound. verl 0.9.1's semantics (verl/trainer/ppo/rollout_corr_helper.py,
verl/trainer/config/algorithm.py RolloutCorrectionConfig); the trainer computes them in
trinity/runtime/trainer/rollout_correction.py, the rules checking a config are in
trinity/config/derive/rollout_correction.py.

Pure Python: the config commands read this module without torch.
"""

import math
from dataclasses import dataclass
from typing import Literal

IS_LEVELS = ("token", "sequence")  # per-token weights, or one per sequence (the product of its tokens')


@dataclass(frozen=True)
class Rejection:
    """A rejection option: a per-token divergence estimate of the log-ratio r, taken per token or aggregated over a
    sequence (sum, mean, max), and kept within its bounds. k1 = -r, kept within [log lower, log upper] (a ratio
    bound "lower_upper"; one number u means 1/u_u); k2 = r^2 / 2 and k3 = exp(r) - 1 - r, kept at most `upper`."""

    level: Literal["token", "sum", "mean", "max"]
    estimator: Literal["k1", "k2", "k3"]

    @property
    def ratio_bounds(self) -> bool:
        """Whether the option takes a lower and an upper ratio bound (k1), else an upper bound alone."""
        return self.estimator == "k1"


# verl's SUPPORTED_ROLLOUT_RS_OPTIONS, by name (rollout_corr_helper.py)
REJECTIONS: dict[str, Rejection] = {
    **{f"token_{k}": Rejection("token", k) for k in ("k1", "k2", "k3")},
    **{f"seq_sum_{k}": Rejection("sum", k) for k in ("k1", "k2", "k3")},
    **{f"seq_mean_{k}": Rejection("mean", k) for k in ("k1", "k2", "k3")},
    **{f"seq_max_{k}": Rejection("max", k) for k in ("k2", "k3")},
}

Bounds = tuple[float | None, float]  # (lower, upper); lower None: an upper bound alone


def is_bounds(spec: float | str) -> Bounds:
    """rollout_is_threshold: a number (or a string of one) truncates the weights at it (TIS); "lower_upper" zeroes
    the weights outside [lower, upper] (IcePop). Both positive, lower <= upper; ValueError says what is wrong."""
    if isinstance(spec, bool) or not isinstance(spec, (int, float, str)):
        raise ValueError(f"{spec!r} is neither a number nor a 'lower_upper' string")
    text = str(spec).strip()
    lower_text, sep, upper_text = text.partition("_")
    lower, upper = (_number(lower_text, spec), _number(upper_text, spec)) if sep else (None, _number(text, spec))
    if upper <= 0 or (lower is not None and lower <= 0):
        raise ValueError(f"{spec!r}: its bounds must be positive")
    if lower is not None and lower > upper:
        raise ValueError(f"{spec!r}: the lower bound is above the upper")
    return lower, upper


def rejection_options(spec: str) -> list[str]:
    """rollout_rs: one option or several, comma-separated (each must pass), duplicates dropped, in order."""
    options = list(dict.fromkeys(part.strip() for part in spec.split(",") if part.strip()))
    if not options:
        raise ValueError(f"{spec!r} names no option")
    unknown = [o for o in options if o not in REJECTIONS]
    if unknown:
        raise ValueError(f"{', '.join(map(repr, unknown))} is not a rejection option")
    return options


def rejection_bounds(options: list[str], spec: float | str | None) -> dict[str, Bounds]:
    """rollout_rs_threshold for `options`: one bound for all or one per option, comma-separated. A k1 option takes
    "lower_upper" ratio bounds (a number u alone: 1/u_u), the others an upper bound alone."""
    if spec is None:
        raise ValueError("rejection sampling needs a threshold")
    if isinstance(spec, bool) or not isinstance(spec, (int, float, str)):
        raise ValueError(f"{spec!r} is neither a number nor a string of them")
    parts = [str(spec)] if not isinstance(spec, str) else [p.strip() for p in spec.split(",") if p.strip()]
    if len(parts) not in (1, len(options)):
        raise ValueError(f"{spec!r} gives {len(parts)} thresholds for {len(options)} options: give one, or one each")
    parts = parts * len(options) if len(parts) == 1 else parts
    return {option: _rejection_bound(option, part) for option, part in zip(options, parts)}


def _rejection_bound(option: str, part: str) -> Bounds:
    lower_text, sep, upper_text = part.partition("_")
    if REJECTIONS[option].ratio_bounds:
        upper = _number(upper_text if sep else part, part)
        lower = _number(lower_text, part) if sep else (1.0 / upper if upper else 0.0)
        if lower <= 0 or upper <= 0:
            raise ValueError(f"{option}: {part!r}: its bounds must be positive")
        if lower > upper:
            raise ValueError(f"{option}: {part!r}: the lower bound is above the upper")
        return lower, upper
    if sep:
        raise ValueError(f"{option}: {part!r}: this option takes an upper bound alone, no 'lower_upper'")
    upper = _number(part, part)
    if upper <= 0:
        raise ValueError(f"{option}: {part!r}: its bound must be positive")
    return None, upper


def _number(text: str, spec: object) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{spec!r} is not a number or a 'lower_upper' pair of them") from None
    if math.isnan(value):
        raise ValueError(f"{spec!r} is not a number")
    return value
