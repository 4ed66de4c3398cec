"""What a task's ``communicate_info`` holds: facts, and when a message states one.

An item is a fact a careful agent says in its own words: a number, an amount, a date, a name, a
limit ("2 checked bags", "$45", "2026-02-16", "Riverside"). A message states it when the item's
words appear in it in order, side by side, with case, punctuation and number formatting set
aside: "$1,510.94" is stated by "1510.94 dollars", "150.00" by "$150", "basic-economy" by "Basic
Economy", "R30133" by "room R30133.", "the current limit" by "your current limit" (one
determiner for another), "basic fare" by "basic fares", "late fee 175.0" by "a late fee of
$175.00", "2025-12-28T14:45:00" by "December 28, 2025 at 2:45 PM" (dates and times read in one
form, and up to two connectors such as "of" or "at" before a number), "2 checked bags" by "two
checked bags" (a number from zero to twenty written as a word), "at most twice by phone" by
"at most two changes by phone" (a count of times). A sentence is not a
fact: a careful agent never repeats a policy's sentence word for word, so ``communicate_info``
refuses one (at synthesis and at load).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "MAX_FACTS",
    "MAX_FACT_WORDS",
    "fact_problem",
    "fact_tokens",
    "states_fact",
    "states_tokens",
]

#: The most words a fact may have ("at most 3 checked bags per booking" is 7).
MAX_FACT_WORDS = 7

#: The most facts one task may ask to be communicated.
MAX_FACTS = 20

#: A number a careful agent writes as a word ("two checked bags"), read as its digits.
_NUMBER_WORDS = {
    word: str(i)
    for i, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}

#: "once", "twice", "thrice": a count of times, stated by the word or by the number and the
#: thing counted ("at most twice by phone" by "at most two changes by phone").
_TIMES = {"once": "1x", "twice": "2x", "thrice": "3x"}

_DECIMAL = re.compile(r"\d+\.\d+")
_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_JOINERS = ".:/-"


def _word_char(ch: str) -> bool:
    # Letters, digits and the marks that belong to them (a Devanagari vowel sign, a combining
    # accent left after normalisation).
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


def _number(token: str) -> str:
    sign, body = ("-", token[1:]) if token.startswith("-") else ("", token)
    if body.count(".") == 1 and all(part.isdigit() for part in body.split(".")):
        whole, _, frac = body.partition(".")
        frac = frac.rstrip("0")
        body = f"{whole}.{frac}" if frac else whole
    return sign + body


_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
#: "december 28, 2025", "dec. 28th 2025"; "28 december 2025".
_MONTH_FIRST = re.compile(rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b")
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? ({_MONTH})\.?,? (\d{{4}})\b")
#: An ISO datetime's "t" between its date and time ("2025-12-28t14:45:00", case folded).
_ISO_T = re.compile(r"(\d{4}-\d{2}-\d{2})t(\d{1,2}:\d{2})")
#: "2:45 pm", "2 p.m.", "11:05am".
_TWELVE = re.compile(r"\b(\d{1,2})(?::(\d{2}))? ?([ap])\.?m\b\.?")
#: A time's zero seconds and its hour's leading zero ("09:30:00" is "9:30").
_SECONDS = re.compile(r"\b(\d{1,2}:\d{2}):00\b")
_HOUR_ZERO = re.compile(r"\b0(\d:\d{2})\b")


def _calendar(text: str) -> str:
    """Dates and times as one form: month names to ISO dates, a datetime's ``T`` to a space,
    12-hour times to 24-hour ones, zero seconds and an hour's leading zero dropped, so
    "December 28, 2025 at 2:45 PM" and "2025-12-28T14:45:00" say the same (case folded)."""

    def iso(year: str, month: str, day: str) -> str:
        return f"{year}-{_MONTHS[month]:02d}-{int(day):02d}"

    def twelve(m: re.Match[str]) -> str:
        hour, minute = int(m.group(1)), m.group(2) or "00"
        if not 1 <= hour <= 12:
            return m.group(0)
        hour = hour % 12 + (12 if m.group(3) == "p" else 0)
        return f"{hour}:{minute}"

    text = _MONTH_FIRST.sub(lambda m: iso(m.group(3), m.group(1), m.group(2)), text)
    text = _DAY_FIRST.sub(lambda m: iso(m.group(3), m.group(2), m.group(1)), text)
    text = _ISO_T.sub(r"\1 \2", text)
    text = _TWELVE.sub(twelve, text)
    text = _SECONDS.sub(r"\1", text)
    return _HOUR_ZERO.sub(r"\1", text)


def fact_tokens(text: str) -> list[str]:
    """The words and numbers of ``text``, in compatibility form (NFKC: fullwidth and other
    digits as 0-9) and case folded; thousands separators and trailing zeros of decimals
    dropped ("$1,510.90" -> ["1510.9"]); the words zero to twenty as their digits ("two" ->
    "2"); a minus sign before a number kept ("-5"); hyphens
    between words read as spaces; a number keeps its inner . : / - ("2026-02-16", "9:30")."""
    folded = _DIGIT_COMMA.sub("", unicodedata.normalize("NFKC", text).casefold())
    folded = _calendar(unicodedata.normalize("NFKC", folded))
    out: list[str] = []
    i, n = 0, len(folded)
    while i < n:
        ch = folded[i]
        signed = ch == "-" and i + 1 < n and folded[i + 1].isdigit()
        if signed and (i == 0 or not _word_char(folded[i - 1])):
            j = i + 1
        elif ch.isdigit():
            j = i
        elif _word_char(ch):
            j = i + 1
            while j < n and _word_char(folded[j]):
                j += 1
            word = folded[i:j]
            out.append(_NUMBER_WORDS.get(word) or _TIMES.get(word, word))
            i = j
            continue
        else:
            i += 1
            continue
        # a number: digits, and digits joined by . : / - (a date, a time, a decimal)
        while j < n and (
            folded[j].isdigit()
            or (
                folded[j] in _JOINERS
                and j + 1 < n
                and folded[j + 1].isdigit()
                and folded[j - 1].isdigit()
            )
        ):
            j += 1
        while j < n and _word_char(folded[j]):  # a code that starts with digits: 4b, 12th
            j += 1
        out.append(_number(folded[i:j]))
        i = j
    return out


def states_fact(text: str, item: str) -> bool:
    """Whether ``text`` states ``item``: the item's tokens appear in it in order, side by side."""
    return states_tokens(fact_tokens(text), item)


#: Words that point at what follows; one stands for another inside a fact ("1.5 times the
#: current limit" is stated by "1.5 times your current limit": a careful agent's own words).
DETERMINERS = frozenset(
    {"the", "a", "an", "your", "my", "our", "their", "his", "her", "its", "this", "that"}
)


#: Words a careful agent puts before a value ("a late fee of $175", "returned on 2025-12-28
#: at 14:45"): in a message, up to two of them may stand before a fact's number.
CONNECTORS = frozenset({"of", "is", "was", "are", "were", "be", "at", "on", "for", "to", "by"})


def _same(have: str, want: str) -> bool:
    if have == want or (have in DETERMINERS and want in DETERMINERS):
        return True
    # One and many of a thing ("basic fare" and "basic fares"): a word, not a number or code.
    short, long_ = sorted((have, want), key=len)
    return len(short) >= 3 and short.isalpha() and long_ in (short + "s", short + "es")


def _take(have: list[str], j: int, want: str) -> int:
    """How many tokens of ``have`` from ``j`` state the fact's token ``want`` (0: none): one
    that is the same, or a number and the thing it counts for a count of times ("2 changes"
    for "twice")."""
    if j >= len(have):
        return 0
    if _same(have[j], want):
        return 1
    times = want in _TIMES.values()
    if times and have[j] == want[:-1] and j + 1 < len(have) and have[j + 1].isalpha():
        return 2
    return 0


def _stated_at(have: list[str], i: int, want: list[str]) -> bool:
    """Whether ``want`` is stated from ``have[i]``: each token next, or (before a number) after
    at most two connectors in all."""
    took = _take(have, i, want[0])
    if not took:
        return False
    j, skips = i + took, 0
    for w in want[1:]:
        number = w[:1].isdigit() or (w[:1] == "-" and w[1:2].isdigit())
        while (
            number
            and j < len(have)
            and skips < 2
            and not _take(have, j, w)
            and have[j] in CONNECTORS
        ):
            j, skips = j + 1, skips + 1
        took = _take(have, j, w)
        if not took:
            return False
        j += took
    return True


#: A fact of words alone, this short, is stated by its words side by side in any order ("a
#: pending refill" states "a refill pending"); a fact with a number keeps its order ("checked 2
#: bags" does not state "2 checked bags").
UNORDERED_WORDS = 4


def _canon(token: str) -> str:
    return "\x00" if token in DETERMINERS else token


def states_tokens(have: list[str], item: str) -> bool:
    """:func:`states_fact` on a text already tokenized (:func:`fact_tokens`), for many facts."""
    want = fact_tokens(item)
    if not want:
        return False
    n = len(want)
    if n > len(have):
        return False
    if any(_stated_at(have, i, want) for i in range(len(have) - n + 1)):
        return True
    if any(ch.isdigit() for w in want for ch in w):
        return False
    if _gapped(have, want):
        return True
    if n > UNORDERED_WORDS or n < 2:
        return False
    bag = sorted(map(_canon, want))
    return any(sorted(map(_canon, have[i : i + n])) == bag for i in range(len(have) - n + 1))


#: A fact of words alone with this many content words (not determiners or connectors) is also
#: stated by them in its order, a few other words between them: "a new contract at the branch"
#: by "need a new contract, and only a branch can write one" (a careful car-rental agent's
#: words that scored 0). Two content words keep to the rules above ("a refill was pending"
#: does not state "a refill pending").
GAPPED_WORDS = 3
#: Other words the span of a gapped fact may hold, beyond its own number of words.
GAP_WORDS = 3
#: With this many content words, the last may be said in other words: the thing a limit is
#: of ("Schedule II to V drugs" by "controlled substances (Schedule II to V)").
HEADLESS_WORDS = 4


def _gapped(have: list[str], want: list[str]) -> bool:
    core = [w for w in want if w not in DETERMINERS and w not in CONNECTORS]
    if len(core) < GAPPED_WORDS:
        return False
    span = len(want) + GAP_WORDS
    # The last word may go unsaid only when it is a word (not a letter, code or number).
    headless = len(core) >= HEADLESS_WORDS and core[-1].isalpha() and len(core[-1]) >= 4
    for i, token in enumerate(have):
        if not _same(token, core[0]):
            continue
        j, end = i, min(len(have), i + span)
        for k, w in enumerate(core[1:], start=1):
            j = next((m for m in range(j + 1, end) if _same(have[m], w)), -1)
            if j < 0:
                if headless and k == len(core) - 1:
                    return True
                break
        else:
            return True
    return False


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
