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
#: A token is a whole run of these characters (``[\w.+-]*[\d@][\w.+@-]*`` finds the same, but
#: backtracks over every run without a digit: 40 KB of letters took 20 s, issue 23).
_RUN = re.compile(r"[\w.+@-]+")
_MARK = re.compile(r"[\d@]")
_WORD = re.compile(r"\w+")
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
    facts = {t.strip(".,;:") for t in _RUN.findall(text) if _MARK.search(t)}
    for name in _NAME.findall(text):
        words = name.split()
        while words and words[0] in _NOT_NAME:
            words.pop(0)
        if len(words) >= 2:
            facts.add(" ".join(words))
    return {f for f in facts if len(f) >= 3}


def _bounded(ch: str) -> bool:
    """Whether ``ch`` may stand next to a stated fact (not ``[\\w-]``)."""
    return not (ch.isalnum() or ch in "_-")


def _states(sentence: str, fact: str) -> bool:
    """Whether ``fact`` is in ``sentence`` with neither a word character nor a hyphen either
    side; one scan of the sentence, no pattern compiled per fact."""
    at = sentence.find(fact)
    while at >= 0:
        end = at + len(fact)
        if (at == 0 or _bounded(sentence[at - 1])) and (
            end == len(sentence) or _bounded(sentence[end])
        ):
            return True
        at = sentence.find(fact, at + 1)
    return False


class _Facts:
    """Known facts indexed by their first word: a text is searched only for the facts whose
    every word it holds (a stated fact's words are words of the text), so that linting costs
    the texts' length and the facts they mention, not facts times sentences."""

    def __init__(self, facts: set[str]) -> None:
        self.unworded: list[str] = []
        self.by_word: dict[str, list[tuple[str, set[str]]]] = {}
        for fact in facts:
            words = _WORD.findall(fact)
            if not words:
                self.unworded.append(fact)
                continue
            self.by_word.setdefault(words[0], []).append((fact, set(words)))

    def stated(self, text: str) -> set[str]:
        """The facts ``text`` states."""
        words = set(_WORD.findall(text))
        found = {f for f in self.unworded if _states(text, f)}
        for word in words:
            for fact, needs in self.by_word.get(word, ()):
                if needs <= words and _states(text, fact):
                    found.add(fact)
        return found


def volunteered_known_facts(task: Task) -> list[str]:
    """One line per instruction sentence that has the customer volunteer a known fact (one the
    simulator must give only when asked) that its reason for calling does not already state."""
    ins = task.user_scenario.instructions
    facts = known_facts(ins.known_info or "")
    facts -= _Facts(facts).stated(ins.reason_for_call)
    index = _Facts(facts)
    out = []
    for sentence in _SENTENCE.split(ins.task_instructions):
        if _WAITS.search(sentence):
            continue
        said = sorted(index.stated(sentence))
        if said:
            out.append(
                f"task_instructions say to give {', '.join(said)} unasked ({sentence.strip()!r}),"
                " but known_info is given only when the agent asks: state it in reason_for_call,"
                " or say 'when the agent asks'"
            )
    return out
