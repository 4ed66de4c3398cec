"""The world's laws of a package (``laws.json``): typed at load, checked on every record of the
database and after every gold replay, reported by ``domains validate``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from maestro.domains import DomainLoadError, library_ids, library_path, load_domain
from maestro.domains.laws import parse_laws, table_shapes

TOY = Path(__file__).parents[1] / "fixtures" / "toy"


@pytest.mark.parametrize("domain_id", library_ids())
def test_every_library_domain_declares_laws_its_records_and_gold_keep(domain_id: str) -> None:
    domain = load_domain(library_path(domain_id))  # gold replays included
    assert len(domain.laws) >= 20
    check = domain.check_laws()
    assert check.ok, check.lines()
    assert sum(check.checked.values()) > 500


def _copy(tmp_path: Path, source: Path) -> Path:
    target = tmp_path / "pkg"
    shutil.copytree(source, target)
    return target


def test_a_record_that_breaks_a_law_is_a_load_problem_naming_it(tmp_path: Path) -> None:
    pkg = _copy(tmp_path, library_path("hotel"))
    db = json.loads((pkg / "db.json").read_text())
    reservation = db["reservations"]["R30001"]
    reservation["check_out"] = reservation["check_in"]
    (pkg / "db.json").write_text(json.dumps(db))
    with pytest.raises(DomainLoadError) as err:
        load_domain(pkg, check_gold=False, trusted=True)
    text = str(err.value)
    assert "laws.stay_ends_after_it_starts" in text
    assert "broken by 1 of 240 reservations record(s), such as reservations/R30001" in text
    assert f"check_out = '{reservation['check_in']}'" in text


def test_gold_actions_that_break_a_law_are_a_problem_of_their_task(tmp_path: Path) -> None:
    pkg = _copy(tmp_path, library_path("hotel"))
    laws = json.loads((pkg / "laws.json").read_text())
    # A law the data keeps and the desk's own charges break: nothing is posted on the clock's day.
    laws.append(
        {
            "id": "nothing_posted_today",
            "table": "folio_charges",
            "holds": "posted_on < today",
            "says": "No charge is posted today.",
        }
    )
    (pkg / "laws.json").write_text(json.dumps(laws))
    with pytest.raises(DomainLoadError) as err:
        load_domain(pkg, trusted=True)
    problems = [str(p) for p in err.value.problems]
    assert problems
    assert all("the gold actions leave law nothing_posted_today" in p for p in problems), problems
    assert all(p.startswith("tasks.jsonl:line") for p in problems)


def test_laws_that_do_not_type_are_located_and_the_others_kept() -> None:
    domain = load_domain(library_path("hotel"), check_gold=False)
    shapes = table_shapes(domain.tables)
    raw = [
        {"table": "reservations", "holds": "check_out > check_in", "says": "ok"},
        {"table": "reservatons", "holds": "adults > 0", "says": "unknown table"},
        {
            "table": "reservations",
            "holds": "check_in + 'x' > check_out",
            "says": "a date plus text",
        },
        {"table": "reservations", "holds": "adults", "says": "not a condition"},
        {"table": "reservations", "holds": "check_out > check_in", "says": "no id", "extra": 1},
        {"id": "reservations_1", "table": "reservations", "holds": "adults >= 1", "says": "dup"},
    ]
    laws, problems = parse_laws(raw, shapes)
    assert [law.id for law in laws] == ["reservations_1"]
    where = [(p.location, p.message) for p in problems]
    assert where[0][0] == "laws[1]" and "no table 'reservatons'" in where[0][1]
    assert where[1][0] == "laws[2]" and "a date + a str" in where[1][1]
    assert where[2][0] == "laws[3]" and "condition" in where[2][1]
    assert where[3][0] == "laws[4].extra"
    assert where[4] == ("laws[5].id", "the law id 'reservations_1' repeats")
    assert parse_laws({"not": "a list"}, shapes)[1][0].message == "must be a list of laws"


def test_a_package_without_laws_loads_as_before() -> None:
    domain = load_domain(TOY, trusted=True)
    assert domain.laws == []
    assert domain.check_laws().ok


def test_a_law_whose_counts_scan_their_table_stops_at_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from maestro.domains import laws as laws_module

    domain = load_domain(library_path("hotel"), check_gold=False)
    shapes = table_shapes(domain.tables)
    scanning = {
        "id": "scans",
        "table": "reservations",
        "holds": "count(reservations where status = 'confirmed') >= 0",
        "says": "Every record counts the whole table.",
    }
    (law,), problems = parse_laws([scanning], shapes)
    assert problems == []
    monkeypatch.setattr(laws_module, "STEP_BUDGET", 20_000)
    domain.laws, domain.law_check = [law], None
    domain.law_budget = laws_module.new_budget()
    check = domain.check_laws()
    assert not check.ok and check.broken == {}
    (error,) = check.errors["scans"]  # said once, not once per record
    assert "the evaluation budget is spent" in error
    # Selecting by a reference reads a handful per record: within the same budget.
    (by_ref,), _ = parse_laws(
        [
            {
                **scanning,
                "id": "by_ref",
                "holds": "count(folio_charges where reservation_id = self) >= 0",
            }
        ],
        shapes,
    )
    domain.laws, domain.law_check = [by_ref], None
    domain.law_budget = laws_module.new_budget()
    assert domain.check_laws().ok


def test_a_count_inside_a_counts_where_is_refused() -> None:
    domain = load_domain(library_path("hotel"), check_gold=False)
    nested = {
        "table": "guests",
        "holds": "count(reservations where count(folio_charges where reservation_id = self) > 0) >= 0",
        "says": "x",
    }
    _, problems = parse_laws([nested], table_shapes(domain.tables))
    assert "inside another's where is not allowed" in problems[0].message
