"""rlcr_reward's five weighted parts against hand-worked responses (Trinity-RFT's rlcr_reward at cc24051: the strict
four-block tail, the Brier score, the confidence read even out of form), and its weights checked by their model."""

import pytest
from pydantic import ValidationError

from trinity.config.rewards import RLCRRewardArgs
from trinity.runtime.rewards import bind
from trinity.runtime.rewards.rlcr_reward import in_form, last_confidence

ONES = {"format": 1.0, "accuracy": 1.0, "brier": 1.0, "mean_confidence": 1.0, "confidence_one_or_zero": 1.0}


def tail(answer: str, confidence: str = "0.8", between: str = "") -> str:
    blocks = f"<answer>{answer}</answer>\n<analysis>sure</analysis> <confidence>{confidence}</confidence>\n"
    return f"<think>2+2 is 4</think>{between}{blocks}"


def parts(response: str, truth="4", weights=ONES) -> dict:
    return bind("rlcr_reward", {"weights": weights})(response, truth)


def test_a_right_answer_in_form_scores_format_accuracy_and_its_brier():
    got = parts(tail("\\boxed{4}", "0.8"))
    assert got == pytest.approx(
        {"format": 1.0, "accuracy": 1.0, "brier": 1 - 0.2**2, "mean_confidence": 0.8, "confidence_one_or_zero": 0.0}
    )


def test_a_confident_wrong_answer_loses_its_brier():
    got = parts(tail("5", "1"), truth="#### 4")  # the reference's answer after ####
    assert got == {"format": 1.0, "accuracy": 0.0, "brier": 0.0, "mean_confidence": 1.0, "confidence_one_or_zero": 1.0}


@pytest.mark.parametrize(
    "response",
    [
        tail("4", between=" text "),  # words between two blocks
        tail("4") + "more",  # words after the confidence
        "<think>a<answer>4</answer></think>" + tail("4"),  # a tag opened inside another
        tail("4", confidence="1.5"),  # a confidence outside [0, 1]
        tail("4", confidence="nan"),
        "<answer>4</answer><analysis>x</analysis><confidence>0.5</confidence>",  # no think block
    ],
)
def test_out_of_form_scores_no_format_accuracy_or_brier(response):
    got = parts(response)
    assert (got["format"], got["accuracy"], got["brier"]) == (0.0, 0.0, 0.0) and in_form(response) is None


def test_the_confidence_parts_read_the_last_closed_confidence_even_out_of_form():
    out_of_form = "I guess 4. <confidence>0.005</confidence> bye"
    assert last_confidence(out_of_form) == 0.005
    assert parts(out_of_form) == {
        "format": 0.0,
        "accuracy": 0.0,
        "brier": 0.0,
        "mean_confidence": 0.005,
        "confidence_one_or_zero": 1.0,
    }
    assert last_confidence("<confidence><answer>1</answer></confidence>") is None  # a tag inside it


def test_each_part_is_weighted_and_the_default_weights_are_upstreams():
    weighted = {"format": 2.0, "accuracy": 3.0, "brier": 0.0, "mean_confidence": -1.0, "confidence_one_or_zero": 0.0}
    assert parts(tail("4", "0.5"), weights=weighted) == {
        "format": 2.0,
        "accuracy": 3.0,
        "brier": 0.0,
        "mean_confidence": -0.5,
        "confidence_one_or_zero": 0.0,
    }
    default = bind("rlcr_reward", {})(tail("4", "1"), "4")
    assert default == {
        "format": 0.5,
        "accuracy": 0.5,
        "brier": 0.5,
        "mean_confidence": 1e-5,
        "confidence_one_or_zero": 1e-5,
    }


@pytest.mark.parametrize(
    "weights,message",
    [
        ({"format": 1.0}, r"missing \['accuracy', 'brier', 'confidence_one_or_zero', 'mean_confidence'\]"),
        ({**ONES, "style": 1.0}, r"unknown \['style'\]"),
        ({**ONES, "brier": True}, "weight 'brier' must be a finite number"),
        ({**ONES, "brier": float("inf")}, "weight 'brier' must be a finite number"),
    ],
)
def test_weights_name_all_five_parts_with_finite_numbers(weights, message):
    with pytest.raises(ValidationError, match=message):
        RLCRRewardArgs(weights=weights)
