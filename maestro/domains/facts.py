"""What a task's ``communicate_info`` holds: facts, and when a message states one.

An item is a fact a careful agent says in its own words: a number, an amount, a date, a name, a
limit ("2 checked bags", "$45", "2026-02-16", "Riverside"). A message states it when the item's
words appear in it in order, side by side, with case, punctuation and number formatting set
aside: "$1,510.94" is stated by "1510.94 dollars", "150.00" by "$150", "basic-economy" by "Basic
Economy", "R30133" by "room R30133." A sentence is not a fact: a careful agent never repeats a
policy's sentence word for word, so ``communicate_info`` refuses one (at synthesis and at load).
"""

from __future__ import annotations

import re

__all__ = ["MAX_FACT_WORDS", "fact_problem", "fact_tokens", "states_fact"]

#: The most words a fact may have ("at most 3 checked bags per booking" is 7).
MAX_FACT_WORDS = 7

_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_WORD_HYPHEN = re.compile(r"(?<!\d)-|-(?!\d)")
_TOKEN = re.compile(r"\d+(?:[.:/-]\d+)*|[^\W_]+")
_DECIMAL = re.compile(r"\d+\.\d+")


def _number(token: str) -> str:
    if _DECIMAL.fullmatch(token):
        whole, _, frac = token.partition(".")
        frac = frac.rstrip("0")
        return f"{whole}.{frac}" if frac else whole
    return token


def fact_tokens(text: str) -> list[str]:
    """The words and numbers of ``text``, case folded, thousands separators and trailing zeros
    of decimals dropped ("$1,510.90" -> ["1510.9"]), hyphens between words read as spaces."""
    folded = _WORD_HYPHEN.sub(" ", _DIGIT_COMMA.sub("", text.casefold()))
    return [_number(t) for t in _TOKEN.findall(folded)]


def states_fact(text: str, item: str) -> bool:
    """Whether ``text`` states ``item``: the item's tokens appear in it in order, side by side."""
    want = fact_tokens(item)
    if not want:
        return False
    have = fact_tokens(text)
    n = len(want)
    return any(have[i : i + n] == want for i in range(len(have) - n + 1))


def fact_problem(item: str) -> str | None:
    """Why ``item`` is not a fact to communicate, or None."""
    words = fact_tokens(item)
    if not words:
        return f"communicate_info item {item!r} holds no word or number"
    stripped = item.strip()
    sentence = stripped.endswith((".", "!", "?")) and not _DECIMAL.search(stripped[-4:])
    if len(words) > MAX_FACT_WORDS or (sentence and len(words) >= 4):
        return (
            f"communicate_info item {item!r} is a sentence: write the fact a careful agent would "
            f"say in its own words (a number, an amount, a date, a name or a limit, at most "
            f"{MAX_FACT_WORDS} words, such as '2 checked bags' or '$45')"
        )
    return None
