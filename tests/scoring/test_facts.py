"""COMMUNICATE's items are facts: stated in any case, punctuation and number format, refused
when they are sentences, and the paraphrased yardstick restates them in other words."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from maestro.domains import inspect_package, load_domain
from maestro.domains.facts import fact_problem, states_fact
from maestro.domains.library import library_path
from maestro.scoring import Scorer
from maestro.scoring.criteria import stated_facts
from maestro.simulation.scripted import gold_trajectory, paraphrased_trajectory, restated_summary

TOY = Path(__file__).parents[1] / "fixtures" / "toy"


@pytest.mark.parametrize(
    ("text", "item"),
    [
        ("The total comes to $1,510.94, charged today.", "1510.94"),
        ("That is 150 dollars.", "150.00"),
        ("A refund of $150.00 is on its way", "$150"),
        ("Your BASIC ECONOMY fare includes none.", "basic-economy"),
        ("I found room r30133.", "R30133"),
        ("It leaves on 2026-02-16 at 9:30.", "9:30"),
        ("You may hold (2 checked bags) at most.", "2 checked bags"),
        # A careful agent's own determiner (a capable agent scored 0 for "your" in place of
        # "the" on a bank's limit refusal).
        (
            "Phone requests are limited to 1.5 times your current limit.",
            "1.5 times the current limit",
        ),
        # Words alone, side by side in another order (a pharmacy's careful agent said "you
        # have a pending refill" for "a refill pending" and scored 0).
        ("You have a pending refill, so no change today.", "a refill pending"),
        # A careful agent's own words for a capable model's facts (2026-12-03 checks): the
        # plural, connectors before a number, and dates and times as people write them.
        ("Seats on basic fares are assigned at check-in.", "basic fare"),
        ("There is a late fee of $175.00 on that return.", "late fee 175.0"),
        ("It was returned on December 28, 2025 at 2:45 PM.", "2025-12-28T14:45:00"),
        ("Returned 28 Dec 2025, 2:45 p.m.", "2025-12-28 14:45"),
        ("Your pickup is at 09:30:00 on 2026-01-06.", "9:30"),
        ("The flight leaves Jan. 6th, 2026 at 7 am.", "2026-01-06 7:00"),
        # A small number as a word, either side (limits were said "two checked bags").
        ("Basic economy holds at most two checked bags.", "2 checked bags"),
        ("You have 3 refills left.", "three refills"),
        ("Twelve days remain.", "12 days"),
        # A count of times, by the word or by the number and what it counts (a careful
        # airline agent said "at most two changes by phone" and scored 0).
        ("Our policy allows at most two changes by phone.", "at most twice by phone"),
        ("It may be changed twice by phone.", "twice by phone"),
        # Content words in order, a few words between (careful agents' refusals that scored
        # 0, 2026-12-04): "new contract at the branch", "schedule II to V drugs".
        (
            "Rentals longer than that need a new contract, and only a branch can write one.",
            "new contract at the branch",
        ),
        (
            "Our policy doesn't allow refills of controlled substances (Schedule II to V) by phone.",
            "schedule II to V drugs",
        ),
        ("Bring a photo ID, please, when you come to pick it up.", "photo ID when you pick it up"),
    ],
)
def test_a_fact_is_stated_in_any_case_punctuation_and_number_format(text: str, item: str) -> None:
    assert states_fact(text, item)
    # COMMUNICATE's reading agrees (its n-grams once missed the connectors and plurals).
    assert stated_facts(["Hello.", text], [item]) == [True]


@pytest.mark.parametrize(
    ("text", "item"),
    [
        ("I spoke with Kimberly.", "Kim"),
        ("The fee is $450.", "45"),
        ("You have 12 checked bags.", "2 checked bags"),
        ("It leaves on 2026-02-17.", "2026-02-16"),
        ("checked 2 bags", "2 checked bags"),
        ("anything", "..."),
        # A determiner stands for another, not for a word or a letter that names something.
        ("Limited to 1.5 times current limit.", "1.5 times the current limit"),
        ("You are on plan B.", "plan A"),
        ("That is 2 times the old limit.", "2 times the current limit"),
        ("A refill was pending last week.", "a refill pending"),  # not side by side
        ("The team pharmacy specialty desk", "specialty pharmacy team desk now"),  # 5 words
        ("There is a late fee of $75.00 on that return.", "late fee 175.0"),
        ("It was returned on December 27, 2025 at 2:45 PM.", "2025-12-28T14:45:00"),
        ("It was returned on December 28, 2025 at 2:45 AM.", "2025-12-28T14:45:00"),
        ("The fee is not of 175.", "late fee 175"),
        ("The fee is waived: of it, at most 175 is due.", "fee 175"),  # three connectors
        ("A bus is due.", "bu"),  # a plural is of a word of three letters or more
        ("Codes AB12s apply.", "AB12"),  # a code has no plural
        ("You may hold three checked bags.", "2 checked bags"),
        ("Twenty-one days remain.", "21 days"),  # compound number words are not read
        ("Only once per booking.", "1 per booking"),  # "once" is not a number word
        ("At most three changes by phone.", "at most twice by phone"),
        ("At most 2 by phone.", "at most twice by phone"),  # the thing counted is a word
        # Gapped words keep their order and their span, and only a word may go unsaid.
        ("The branch will need a new contract.", "new contract at the branch"),
        (
            "A new car, and a contract you sign at home, later, at the branch.",
            "new contract at the branch",
        ),
        ("A new contract by phone.", "new contract at the branch"),
        ("Controlled substances (Schedule II to III) by phone.", "schedule II to V drugs"),
        ("Schedule II drugs cannot be refilled by phone.", "schedule II to V drugs"),
    ],
)
def test_a_fact_is_not_stated_by_a_part_of_a_word_or_another_number(text: str, item: str) -> None:
    assert not states_fact(text, item)
    assert stated_facts(["Hello.", text], [item]) == [False]


def test_a_sentence_is_not_a_fact() -> None:
    sentence = "Basic-economy bookings can hold at most 2 checked bags."
    problem = fact_problem(sentence)
    assert problem is not None and f"{sentence!r} is a sentence" in problem
    assert fact_problem("one two three four five six seven eight") is not None
    for fact in ("2 checked bags", "$45.00", "at most 3 checked bags per booking", "Okafor"):
        assert fact_problem(fact) is None, fact
    assert fact_problem("...") is not None


def _toy_asking(tmp_path: Path, facts: list[str]) -> tuple[str, list[str]]:
    """The toy package with one task's communicate_info set to ``facts``: that task's id, and
    the load problems."""
    root = tmp_path / "toy"
    shutil.copytree(TOY, root)
    lines = (root / "tasks.jsonl").read_text().splitlines()
    tasks = [json.loads(line) for line in lines if line.strip()]
    with_info = next(t for t in tasks if t["evaluation_criteria"].get("communicate_info"))
    with_info["evaluation_criteria"]["communicate_info"] = facts
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    _, problems = inspect_package(str(root))
    return with_info["id"], [str(p) for p in problems]


def test_a_task_asking_for_a_sentence_is_a_load_problem(tmp_path: Path) -> None:
    task_id, problems = _toy_asking(tmp_path, ["Only pending orders can be cancelled."])
    text = "\n".join(problems)
    assert task_id in text
    assert "'Only pending orders can be cancelled.' is a sentence" in text


@pytest.mark.parametrize("domain_id", ["hotel", "vetclinic", "energy"])
def test_facts_restated_in_other_words_still_score_one_and_a_missing_one_fails(
    domain_id: str,
) -> None:
    domain = load_domain(library_path(domain_id), trusted=True)
    scorer = Scorer(domain)
    tasks = [t for t in domain.tasks if t.evaluation_criteria.communicate_info]
    assert tasks
    for task in tasks:
        restated = paraphrased_trajectory(domain, task)
        assert restated is not None
        said = restated.assistant_texts()[-1]
        gold_said = gold_trajectory(domain, task).assistant_texts()[-1]
        assert said == restated_summary(task) and said != gold_said
        card = scorer.score(task, restated, None)
        assert card.criteria["COMMUNICATE"].status == "pass", (task.id, said)
        short = task.model_copy(deep=True)
        short.evaluation_criteria.communicate_info.append("a fact never said 7919")
        failing = scorer.score(short, restated, None)  # what was said lacks it
        assert failing.criteria["COMMUNICATE"].status == "fail"


def test_a_fact_of_five_thousand_digits_is_restated_not_a_crash() -> None:
    from maestro.simulation.scripted import restate

    digits = "9" * 5000  # past Python's int() limit of 4,300 digits
    assert fact_problem(digits) is None
    said = restate(digits, upper=True)
    assert states_fact(f"It is {said}.", digits)
    assert restate("1510.9") == "(1,510.90)" and restate("0800 111 999") == "(0800 111 999)"


# ----- what a red team proved (each failed before its fix) ---------------------------------------


@pytest.mark.parametrize(
    ("text", "item", "stated"),
    [
        ("Jose\u0301 booked it.", "Jos\u00e9", True),  # decomposed accents are the same letters
        ("It is 336.38.", "\uff13\uff13\uff16.\uff13\uff18", True),  # fullwidth digits are digits
        ("It is -5 degrees.", "-5", True),
        ("That is 5 dollars.", "-5", False),  # a minus sign is part of the number
        ("A refund of $1,000.50.", "$-1,000.50", False),
        (
            "\u0930\u094b\u092e",
            "\u0930\u093e\u092e",
            False,
        ),  # Rome is not Ram: vowel signs are letters
    ],
)
def test_unicode_and_signs_are_read_as_a_person_reads_them(
    text: str, item: str, stated: bool
) -> None:
    assert states_fact(text, item) is stated


@pytest.mark.parametrize(
    "fact",
    [
        "0.125",
        "12,345.678",
        "Y\u0131ld\u0131z",
        "\u0663\u0663\u0666\u0668",
        "\uff13\uff13\uff16.\uff13\uff18",
    ],
)
def test_a_restated_fact_is_still_the_fact(fact: str) -> None:
    from maestro.simulation.scripted import restate

    for upper in (True, False):
        assert states_fact(f"So: {restate(fact, upper)}.", fact), restate(fact, upper)


def test_many_facts_cost_one_reading_of_the_messages_and_are_bounded(tmp_path: Path) -> None:
    _, problems = _toy_asking(tmp_path, [f"R{i}" for i in range(5000)])
    assert any(
        "communicate_info holds 5000 facts; a task may ask for at most 20" in str(p)
        for p in problems
    )
