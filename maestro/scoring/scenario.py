"""A task's user scenario read against the user simulator's rules (``agents/roles.py``).

The simulator is told to give what it knows (``known_info``) only when the agent asks, and to
open with its reason for calling. A task whose ``task_instructions`` tell it to volunteer a known
fact the reason does not already state gives it two contradicting orders; a small model then
follows either, and the same task plays out two ways. The fix is in the task: put the fact in
``reason_for_call`` when the customer should say it up front, or say "when the agent asks".
"""

from __future__ import annotations

import re

from maestro.domains.models import Task

#: Identifiers, amounts, dates, phone numbers and e-mail addresses: tokens holding a digit or an @.
_TOKEN = re.compile(r"[\w.+-]*[\d@][\w.+@-]*")
#: Names: two or more capitalised words ("Kevin Marsh").
_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+\b")
#: Capitalised words that start a sentence rather than a name ("Your Visa", "The Amex").
_NOT_NAME = {"Your", "The", "You", "His", "Her", "Their", "My", "It", "This", "A", "An"}
#: A sentence that waits for the agent: "when asked", "until the agent asks", "if they ask".
_WAITS = re.compile(
    r"\b(?:when|if|once|until|unless|after|only when)\s+(?:asked|(?:the agent|they|he|she)\s+"
    r"(?:asks?|requests?|needs?|wants?))\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def known_facts(text: str) -> set[str]:
    """The identifiers and names a piece of scenario text states."""
    facts = {t.strip(".,;:") for t in _TOKEN.findall(text)}
    for name in _NAME.findall(text):
        words = name.split()
        while words and words[0] in _NOT_NAME:
            words.pop(0)
        if len(words) >= 2:
            facts.add(" ".join(words))
    return {f for f in facts if len(f) >= 3}


def _states(sentence: str, fact: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(fact)}(?![\w-])", sentence) is not None


def volunteered_known_facts(task: Task) -> list[str]:
    """One line per instruction sentence that has the customer volunteer a known fact (one the
    simulator must give only when asked) that its reason for calling does not already state."""
    ins = task.user_scenario.instructions
    facts = known_facts(ins.known_info or "")
    facts -= {f for f in facts if _states(ins.reason_for_call, f)}
    out = []
    for sentence in _SENTENCE.split(ins.task_instructions):
        if _WAITS.search(sentence):
            continue
        said = sorted(f for f in facts if _states(sentence, f))
        if said:
            out.append(
                f"task_instructions say to give {', '.join(said)} unasked ({sentence.strip()!r}),"
                " but known_info is given only when the agent asks: state it in reason_for_call,"
                " or say 'when the agent asks'"
            )
    return out
