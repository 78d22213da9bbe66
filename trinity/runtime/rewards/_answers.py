"""Finding a math answer in text and deciding whether two answers are the same, shared by the math rewards.

The normalisation follows the usual MATH-benchmark (Hendrycks) rules: LaTeX spelling variants, units,
thousands separators and trailing zeros do not make two answers differ. No symbolic algebra: `2x+1`
and `1+2x` differ, but `0.5`, `1/2` and `\\frac{1}{2}` are one number.
"""

import re
from fractions import Fraction

_BOX = re.compile(r"\\(?:boxed|fbox)")
# words that follow a number as its unit ("5 cm", "12 dollars"): dropped before comparing
_UNITS = (
    "cm|m|km|mm|inch|inches|foot|feet|yard|yards|mile|miles|meter|meters|metre|metres|degree|degrees|dollar|dollars|"
    "cent|cents|unit|units|hour|hours|minute|minutes|second|seconds|day|days|year|years|kg|g|pound|pounds|mph"
)
_TRAILING_UNIT = re.compile(rf"^(-?[\d.,]+)\s*(?:{_UNITS})$")


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}) in `text`, braces balanced; None when there is none."""
    found = list(_BOX.finditer(text))
    if not found:
        return None
    rest = text[found[-1].end() :]
    if not rest.lstrip().startswith("{"):
        plain = re.match(r"\s+([^\s$]+)", rest)  # `\boxed 5`: up to the next space or `$`
        return plain.group(1) if plain else None
    start = rest.index("{")
    depth = 0
    for i in range(start, len(rest)):
        depth += {"{": 1, "}": -1}.get(rest[i], 0)
        if depth == 0:
            return rest[start + 1 : i]
    return None  # never closed: a cut-off response has no answer


def normalise(answer: str) -> str:
    """`answer` in a canonical spelling: '\\dfrac12' -> '\\frac{1}{2}', '$1,234.00' -> '1234', 'x = 5' -> '5'."""
    s = answer.replace("\n", "").strip().rstrip(".")
    for old, new in (("\\!", ""), ("\\$", ""), ("$", ""), ("\\%", ""), ("%", ""), ("tfrac", "frac"), ("dfrac", "frac")):
        s = s.replace(old, new)
    for noise in ("\\left", "\\right", "^{\\circ}", "^\\circ"):
        s = s.replace(noise, "")
    s = re.sub(r"\\(?:text|textbf|mbox|mathrm)\{(.*?)\}", r"\1", s).strip()
    s = _TRAILING_UNIT.sub(r"\1", s)
    s = re.sub(r"^[a-zA-Z]\s*=\s*", "", s)  # "x = 5": the value is the answer
    while re.search(r"\d,\d{3}(?!\d)", s):  # thousands separators, not the commas of a tuple
        s = re.sub(r"(\d),(\d{3})(?!\d)", r"\1\2", s)
    s = re.sub(r"(\d+)\.0+(?!\d)", r"\1", s)  # 18.00 -> 18
    s = re.sub(r"(^|[^\d])\.(\d)", r"\g<1>0.\2", s)  # .5 -> 0.5
    s = s.replace(" ", "")
    s = re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", s)
    s = re.sub(r"\\frac(\w)(\w)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\{([^{}]*)\}(\w)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac(\w)\{", r"\\frac{\1}{", s)
    s = re.sub(r"^(-?\d+)/(\d+)$", r"\\frac{\1}{\2}", s)
    if len(s) > 1 and (s[0], s[-1]) in (("{", "}"), ("(", ")")) and _balanced(s[1:-1]):
        s = s[1:-1]
    return s


def value(answer: str) -> Fraction | None:
    """The exact number a normalised answer spells ('0.5', '-3', '\\frac{1}{2}'); None when it is no number."""
    frac = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(\d+)\}", answer)
    try:
        if frac:
            number = Fraction(int(frac.group(2)), int(frac.group(3)))
            return -number if frac.group(1) else number
        return Fraction(answer) if re.fullmatch(r"-?\d+(?:\.\d+)?", answer) else None
    except ZeroDivisionError:
        return None


def equivalent(answer: str | None, truth: str | None) -> bool:
    """Whether two answers are the same after normalisation: the same text, or the same number."""
    if answer is None or truth is None:
        return False
    a, b = normalise(answer), normalise(truth)
    if a == b:
        return bool(a)
    va, vb = value(a), value(b)
    return va is not None and va == vb


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "(": 1, "}": -1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0
