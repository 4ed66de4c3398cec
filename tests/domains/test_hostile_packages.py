"""Generated hostile packages through ``maestro domains validate``: copies of the toy package
with one file mutated (sizes, nesting depths, unicode with lone surrogates and control
characters, forged values and keys). Each is a verdict, exit 0, 1 or 2, never a traceback, and
the host's peak memory stays under a bound (issue 23, point 7)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maestro.domains import inspect_package

TOY = Path(__file__).parents[1] / "fixtures" / "toy"
MAESTRO = str(Path(sys.executable).with_name("maestro"))
#: What one ``domains validate`` of a mutated toy may hold at its peak (a clean run holds some
#: 150 MB; the largest allowed db.json, 64 MB, would be refused long before this).
PEAK_BYTES = 1536 * 1024 * 1024

# ----- what a hostile package holds ------------------------------------------------------------

_ODD = [
    "\x00",
    "\x1b]52;c;aGk=\x07",  # OSC 52: writes the clipboard
    "\x1b[2J",
    "\u202e",  # right-to-left override
    "\ufeff",
    "\ud800",  # a lone surrogate
    "\udfff",
    "\U0001f600",
    "e\u0301",
    "１２３",  # fullwidth digits
    "\r\n",
    "\x85",
    "\u2028",
]
#: Short texts of odd pieces and any code point, the surrogates included.
texts = st.lists(
    st.one_of(st.sampled_from([*_ODD, "R1 ", "C1"]), st.characters()), max_size=12
).map("".join)


@dataclass(frozen=True)
class Huge:
    """A long string: ``unit`` repeated (an emoji costs CPython 4 bytes a character)."""

    unit: str
    times: int


@dataclass(frozen=True)
class Deep:
    """Lists or objects nested ``depth`` levels (written by hand: json.dumps would recurse)."""

    depth: int
    objects: bool


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is (a number past float range, a huge integer, NaN)."""

    text: str


Value = Any
values: st.SearchStrategy[Value] = st.one_of(
    texts,
    st.builds(
        Huge,
        st.sampled_from(["a", "R1 ", "\U0001f600", "a-b.", "Your id is C1. ", "\x1b"]),
        st.sampled_from([1_000, 9_000, 50_000, 200_000, 2_000_000]),
    ),
    st.builds(Deep, st.sampled_from([10, 60, 65, 300, 5_000]), st.booleans()),
    st.builds(Raw, st.sampled_from(["1e400", "-1e400", "9" * 5000, "NaN", "-0", "1.5e-400", "[]"])),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    st.booleans(),
    st.lists(texts, max_size=5),
    st.dictionaries(texts, texts, max_size=4),
)


def _json(value: Value) -> str:
    """``value`` as JSON text, lone surrogates kept as escapes (the reader must refuse them)."""
    if isinstance(value, Huge):
        return json.dumps(value.unit * value.times)
    if isinstance(value, Deep):
        opener, closer = ('{"a":', "}") if value.objects else ("[", "]")
        return opener * value.depth + "1" + closer * value.depth
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_json(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


#: Where in a toy file a generated value goes: (file, the JSON text it replaces).
SLOTS = [
    ("domain.json", '"Toy shop"'),
    ("domain.json", '"A tiny shop for runtime tests."'),
    ("domain.json", '"2026-03-15T10:00:00"'),
    ("domain.json", '["maestro tests"]'),
    ("db.json", '"Ada"'),
    ("db.json", '"C1": {"customer_id": "C1"'),  # a forged key: the value is the new key
    ("db.json", '"shipped"'),
    ("db.json", "8.5"),
    ("db.json", '["P2"]'),
    ("tasks.jsonl", '"Your customer id is C1."'),
    ("tasks.jsonl", '"You want to cancel order O1."'),
    ("tasks.jsonl", '"Answer the assistant\'s questions."'),
    ("tasks.jsonl", '"A regular customer."'),
    ("tasks.jsonl", '["shipped"]'),
    ("tasks.jsonl", '["The assistant confirms the cancellation."]'),
    ("tasks.jsonl", '"changed my mind"'),
    ("tasks.jsonl", '"toy_cancel"'),
    ("tasks.jsonl", '{"order_id": "O2"}'),
    ("tasks.jsonl", '["order_id"]'),
]


def _put(folder: Path, slot: int, value: Value) -> None:
    name, old = SLOTS[slot]
    path = folder / name
    text = path.read_text(encoding="utf-8")
    if old.startswith('"C1": '):
        key = value if isinstance(value, str) else _json(value)
        new = f'{json.dumps(key)}: {{"customer_id": "C1"'
    else:
        new = _json(value)
    path.write_bytes(_replace(text, old, new).encode("utf-8", "surrogatepass"))


def _policy(folder: Path, value: Value) -> None:
    text = value.unit * value.times if isinstance(value, Huge) else str(value)
    (folder / "policy.md").write_bytes(text.encode("utf-8", "surrogatepass"))


mutations = st.one_of(
    st.tuples(st.just("slot"), st.integers(0, len(SLOTS) - 1), values),
    st.tuples(st.just("policy"), st.just(0), st.one_of(texts, values)),
    st.tuples(st.just("line"), st.just(0), values),  # a whole tasks.jsonl line
)


def hostile_copy(tmp: Path, mutation: tuple[str, int, Value]) -> Path:
    """A copy of the toy package under ``tmp`` with ``mutation`` applied."""
    folder = tmp / "pkg"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(TOY, folder, ignore=shutil.ignore_patterns("__pycache__"))
    kind, slot, value = mutation
    if kind == "slot":
        _put(folder, slot, value)
    elif kind == "policy":
        _policy(folder, value)
    else:
        with (folder / "tasks.jsonl").open("ab") as out:
            out.write(_json(value).encode("utf-8", "surrogatepass") + b"\n")
    return folder


# ----- the checks ------------------------------------------------------------------------------


def _validate(folder: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """``maestro domains validate PKG --json`` in a child, and the peak memory of the children
    run so far (ru_maxrss: the largest of them)."""
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [MAESTRO, "domains", "validate", str(folder), "--json"],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        env=env,
    )
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return proc, peak_kb * 1024


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1, 2), out[-3000:]
    assert "Traceback" not in out, out[-3000:]


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mutation=mutations)
def test_a_hostile_package_loads_or_is_refused_with_located_problems(
    mutation: tuple[str, int, Value], tmp_path: Path
) -> None:
    """In process (the subprocess' start costs seconds): the load lists problems or a domain,
    never raises; the sandbox runs the copy's code, as for every package outside the library."""
    folder = hostile_copy(tmp_path, mutation)
    domain, problems = inspect_package(folder, check_gold=True)
    try:
        assert domain is not None or problems
        for p in problems:
            assert p.file and isinstance(p.message, str) and p.message
    finally:
        if domain is not None:
            domain.close()


#: (mutation, exit code): refused with located problems (1), or allowed and passing (0).
CLI_CASES = [
    (("slot", 9, Huge("Your id is C1. ", 2_700)), 1),  # a 40 KB known_info
    (("slot", 13, [f"item {i}" for i in range(50_000)]), 1),  # 50k communicate_info
    (("slot", 4, Deep(300, True)), 1),
    (("slot", 5, "\x1b]0;title\x07\ud800"), 1),
    (("slot", 1, Huge("\U0001f600", 15_000)), 1),
    (("policy", 0, Huge("\U0001f600", 300_000)), 1),
    (("line", 0, Raw("9" * 5000)), 1),
    # 90,000 emoji in an argument the task does not compare: allowed, and the gold passes.
    (("slot", 15, Huge("\U0001f600", 90_000)), 0),
]
CLI_IDS = [
    "known_info-40KB",
    "communicate_info-50k",
    "db-nested-300",
    "db-osc-surrogate",
    "description-emoji",
    "policy-1.2MB-emoji",
    "line-huge-integer",
    "argument-emoji-allowed",
]


@pytest.mark.parametrize(("mutation", "code"), CLI_CASES, ids=CLI_IDS)
def test_validate_gives_a_verdict_within_bounds(
    mutation: tuple[str, int, Value], code: int, tmp_path: Path
) -> None:
    folder = hostile_copy(tmp_path, mutation)
    proc, peak = _validate(folder)
    _no_traceback(proc)
    assert proc.returncode == code, proc.stdout[-2000:]
    assert bool(json.loads(proc.stdout.strip().splitlines()[-1])["problems"]) == bool(code)
    assert peak < PEAK_BYTES, f"{peak / 2**20:.0f} MB"


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mutation=mutations)
def test_generated_packages_through_the_command(
    mutation: tuple[str, int, Value], tmp_path: Path
) -> None:
    proc, peak = _validate(hostile_copy(tmp_path, mutation))
    _no_traceback(proc)
    assert peak < PEAK_BYTES, f"{peak / 2**20:.0f} MB"


def test_a_float_with_min_length_is_a_problem_naming_the_field(tmp_path: Path) -> None:
    """Pydantic builds the record type, then raises TypeError (not a ValidationError) on every
    value; the host's model of the child's schema refuses the constraint instead."""
    folder = hostile_copy(tmp_path, ("policy", 0, "Be kind."))
    models = folder / "models.py"
    source = models.read_text().replace(
        "    stock: int\n",
        "    stock: int\n    weight: float = Field(default_factory=float, min_length=1)\n",
    )
    models.write_text("from pydantic import Field\n" + source)
    proc, _ = _validate(folder)
    _no_traceback(proc)
    assert proc.returncode == 1
    assert json.loads(proc.stdout.strip().splitlines()[-1])["problems"] == [
        "pkg: models.py:Product: record schema not supported: properties.weight: minLength does"
        " not apply to number"
    ]
