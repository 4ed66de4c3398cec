"""JSON Schemas and tool calls as llama.cpp grammars: the embedded model's constrained decoding.

A ``response_format`` (``{"type": "json_schema", "json_schema": {"schema": ...}}`` or
``{"type": "json_object"}``) becomes a GBNF grammar through llama-cpp-python's JSON-Schema
converter, so the model can only write JSON that fits the schema. Offered ``tools`` become a
grammar whose language is a plain message, or one call ``{"name": ..., "arguments": ...}`` of an
offered tool whose arguments fit that tool's parameter schema (tagged ``<tool_call>`` or bare,
after some text or alone). The plain message may not hold ``{``, ``<`` or a backtick: the model
starting to write JSON or a tag is thereby steered into a valid call instead of a broken one.

The grammar makes an answer parse; it does not make it right. What the converter does not
enforce (``minimum``/``maximum``, ``minProperties``, ``uniqueItems``, string formats it does not
know) stays the stage parser's job. Properties are written required ones first, then the
optional ones, each group in the schema's order. A schema it cannot turn into a grammar is a
:class:`GrammarError` naming the problem and where; the embedded server answers it with 400.

The converter is outside code that a request's schema drives: its pattern parser loops forever
on a stray ``]`` or ``}``, and a long optional repetition crashes llama.cpp's grammar parser.
Patterns and repetition counts are therefore checked before it runs, and the embedded server
converts in a :class:`GrammarWorker` process that is killed past a deadline.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from llama_cpp.llama_grammar import LlamaGrammar, SchemaConverter

_log = logging.getLogger(__name__)

#: The free text an assistant may write instead of (or before) a call.
_TEXT_RULES = r"""mx-text ::= [^{<` \t\r\n] [^{<`]*
mx-call ::= "<tool_call>" mx-nl call mx-nl "</tool_call>" | call
mx-nl ::= "\n"?"""


class GrammarError(ValueError):
    """A response_format or a tool schema that cannot become a grammar."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` fit for one line of a log or an error: control characters escaped, cut at
    ``limit`` characters (a request's schema writes what ends up in these messages)."""
    text = _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode(), text)
    return text if len(text) <= limit else text[:limit] + "..."


class _Located(Exception):
    """A converter failure and the schema path (a rule name) where it happened."""

    def __init__(self, where: str, cause: BaseException) -> None:
        super().__init__(where, cause)
        self.where = where
        self.cause = cause

    def message(self) -> str:
        text = str(self.cause) or type(self.cause).__name__
        return one_line(f"at {one_line(self.where, 80)}: {text}")


class _Converter(SchemaConverter):
    """llama-cpp-python's converter, failing with the rule name (the schema path) it was at."""

    def __init__(self) -> None:
        super().__init__(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)

    def visit(self, schema: Any, name: str) -> str:
        try:
            if not isinstance(schema, dict):
                raise TypeError(f"a schema must be a JSON object, not {json.dumps(schema)[:80]}")
            return str(super().visit(schema, name))
        except _Located:
            raise
        except Exception as exc:  # the converter asserts and trips over odd shapes
            raise _Located(name or "the top level", exc) from None

    def resolve(self, schema: dict[str, Any], url: str) -> None:
        try:
            self.resolve_refs(schema, url)
        except Exception as exc:
            raise _Located("a $ref", exc) from None


# ----- schema clean-up --------------------------------------------------------------------------


#: Shorthand classes the converter passes through verbatim, which llama.cpp then refuses.
_SHORTHANDS = {"d": "0-9", "w": "A-Za-z0-9_", "s": " \\t\\n\\r"}


def _spelled_out(pattern: str) -> str:
    r"""``\d``, ``\w``, ``\s`` and their negations as bracket classes (``\d{4}`` as
    ``[0-9]{4}``). Inside a bracket class the positive ones are spelled out; a negated one there
    is left for the converter to refuse."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            esc = pattern[i + 1]
            body = _SHORTHANDS.get(esc.lower())
            if body is None or (in_class and esc.isupper()):
                out.append(pattern[i : i + 2])
            elif in_class:
                out.append(body)
            else:
                out.append(f"[{'^' if esc.isupper() else ''}{body}]")
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


#: The largest repetition count (``{n}``, ``minLength``, ``maxItems``) made into a grammar: the
#: converter writes a count out item by item (``a{99999999}`` took 8 s and 100 MB here).
_MAX_REPEAT = 10_000
#: The most optional repetitions (``{m,n}``'s n - m, a ``maxLength``) one grammar may hold. The
#: converter nests one group per repetition; llama.cpp refuses more than 1,000, and from about
#: 20,000 its recursive parser overflows the stack (the whole server crashed, measured here).
_MAX_OPTIONAL = 1_000
#: The longest pattern made into a grammar: the converter takes time growing with the square of
#: a pattern's length (1 MB: 8 s, 3 MB: 96 s here).
_MAX_PATTERN_CHARS = 20_000
_QUANTIFIER = re.compile(r"\{(\d*)(,(\d*))?\}")
_UNSUPPORTED_ESCAPES = {
    **dict.fromkeys("bB", "a word boundary"),
    **dict.fromkeys("AZzG", "an anchor"),
    **dict.fromkeys("pP", "a Unicode property class"),
}


def _repeat_problem(low: int, high: int | None) -> str | None:
    if max(low, high or 0) > _MAX_REPEAT:
        return f"more than the {_MAX_REPEAT} repetitions a grammar is made for"
    if high is not None and high < low:
        return "a maximum below its minimum"
    if high is not None and high - low > _MAX_OPTIONAL:
        return (
            f"{high - low} optional repetitions, more than the {_MAX_OPTIONAL} a llama.cpp "
            "grammar holds"
        )
    return None


def _count(digits: str) -> int:
    return int(digits) if len(digits) <= 9 else _MAX_REPEAT + 1


def _quantifier_problem(pattern: str, i: int) -> tuple[str | None, int]:
    """What is wrong with the ``{...}`` at ``i`` (None: nothing) and the index after it."""
    m = _QUANTIFIER.match(pattern, i)
    if m is None or m.group(0) == "{}":
        return f"a {{ at {i} that is not a repetition {{n}}, {{n,}} or {{n,m}} (write \\{{)", i
    problem = _repeat_problem(*_bounds(m.group(0)))
    return (f"{m.group(0)} at {i} asks for {problem}" if problem else None), m.end()


def _pattern_problem(pattern: str) -> str | None:
    """Why llama-cpp-python's converter cannot take ``pattern`` (its anchors stripped), or None.

    Its pattern parser never advances past a ``]`` or ``}`` it does not expect (a class
    ``[]a]`` ends at the first ``]``, leaving one): the request hung the server. So this walks
    the pattern as that parser does and refuses what it would loop on, crash on, or silently
    write as something else. It refuses too what llama.cpp would crash or stall on while it
    decodes: a NUL the pattern requires (no token makes one: llama.cpp aborts the server), and
    a group holding a variable repetition repeated again (``(a{0,9}){0,9}``, ``(a+)+``): each
    is a grammar whose parses multiply with every token, and the grammar check of one token took
    from 0.02 s to over a minute within a few tokens.
    """
    depth, i, n = 0, 0, len(pattern)
    varied = [False]  # per open group: whether it holds a variable repetition
    closed: bool | None = None  # just after a ")": whether that group held one
    if n > _MAX_PATTERN_CHARS:
        return (
            f"it is {n} characters long, more than the {_MAX_PATTERN_CHARS} a grammar is made for"
        )
    last = "start"  # what a quantifier would apply to: start, item, quantified or lazy
    while i < n:
        c, was, group_varied = pattern[i], last, closed
        last, closed = "item", None
        if c == "\\":
            if i + 1 == n:
                return "it ends in a lone \\"
            esc = pattern[i + 1]
            nul = _NUL_ESCAPE.match(pattern, i)
            if nul:
                return f"a NUL character ({nul.group(0)}) at {i}, which no token can make"
            if esc.isdigit():
                return f"a backreference \\{esc} at {i}, which a grammar cannot express"
            if esc in _UNSUPPORTED_ESCAPES:
                return f"\\{esc} at {i} is {_UNSUPPORTED_ESCAPES[esc]}, which is not supported"
            i += 2
        elif c == "[":
            j = i + 1 + pattern.startswith("^", i + 1)
            if pattern.startswith("]", j):
                return f"the class at {i} starts with ] (write \\] inside a class)"
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            if j >= n:
                return f"the [ at {i} is not closed"
            if pattern[i + 1] != "^" and _NUL_ESCAPE.fullmatch(pattern, i + 1, j):
                return f"the class at {i} holds only a NUL character, which no token can make"
            i = j + 1
        elif c in "]}":
            return f"a lone {c} at {i} (write \\{c} for the character)"
        elif c == "(":
            if pattern.startswith("?", i + 1):
                return (
                    f"the (? at {i}: lookarounds, non-capturing and named groups are not supported"
                )
            depth, last, i = depth + 1, "start", i + 1
            varied.append(False)
        elif c == ")":
            if depth == 0:
                return f"the ) at {i} closes no group"
            depth, i = depth - 1, i + 1
            closed = varied.pop()
            varied[-1] = varied[-1] or closed
        elif c == "|":
            last, i = "start", i + 1
        elif c in "*+?{":
            end = i + 1
            if c == "{":
                problem, end = _quantifier_problem(pattern, i)
                if problem:
                    return problem
            if was == "start":
                return f"the {pattern[i:end]} at {i} has nothing to repeat"
            low, high = _bounds(pattern[i:end])
            if low != high:
                if group_varied and (high is None or high > 1):
                    return (
                        f"the {pattern[i:end]} at {i} repeats a group that holds a repetition "
                        "of its own: llama.cpp's grammar check slows exponentially on it"
                    )
                varied[-1] = True
            if was == "quantified" and c == "?" and pattern[i - 1] in "*+?":
                last = "lazy"  # x*? is x* to a grammar: the same language
            elif was != "item":
                return f"the {pattern[i:end]} at {i} repeats a repetition (group it first)"
            else:
                last = "quantified"
            i = end
        elif c == "\x00":
            return f"a NUL character at {i}"
        else:
            i += 1
    return "a ( is not closed" if depth else None


_NUL_ESCAPE = re.compile(r"\\(?:0(?![0-9])|x00|u0000|U00000000|c@)")


def _bounds(quantifier: str) -> tuple[int, int | None]:
    """The least and most repetitions of ``*``, ``+``, ``?`` or ``{...}`` (None: unbounded)."""
    if quantifier in ("*", "+", "?"):
        return {"*": (0, None), "+": (1, None), "?": (0, 1)}[quantifier]
    m = _QUANTIFIER.fullmatch(quantifier)
    assert m is not None  # a quantifier _QUANTIFIER matched
    low = _count(m.group(1)) if m.group(1) else 0
    return low, low if m.group(2) is None else (_count(m.group(3)) if m.group(3) else None)


def _pattern_body(pattern: str) -> str:
    """The pattern without the anchors the converter strips."""
    return pattern[pattern.startswith("^") : len(pattern) - _anchored_end(pattern)]


def _anchored_end(pattern: str) -> bool:
    return pattern.endswith("$") and not pattern.endswith("\\$")


def _anchored(schema: Any, where: str = "") -> Any:
    """A copy whose string ``pattern``s the converter takes: shorthand classes spelled out, and
    anchored at both ends; a pattern or a repetition count it cannot take is a
    :class:`_Located` error naming where (a JSON pointer).

    JSON Schema patterns match anywhere (pydantic's ``Field(pattern=...)`` often omits ``^``/``$``);
    the converter only takes anchored ones, so ``abc`` becomes ``^.*abc.*$``, its meaning.
    """
    if isinstance(schema, list):
        return [_anchored(s, f"{where}/{i}") for i, s in enumerate(schema)]
    if not isinstance(schema, dict):
        return schema
    for low_key, high_key in (("minLength", "maxLength"), ("minItems", "maxItems")):
        low, high = schema.get(low_key, 0), schema.get(high_key)
        if _is_int(low) and (high is None or _is_int(high)):
            problem = _repeat_problem(low, high)
            if problem:
                bounds = ", ".join(f"{k} {schema[k]}" for k in (low_key, high_key) if k in schema)
                raise _Located(where or "/", ValueError(f"{bounds} asks for {problem}"))
    out = {}
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str):
            value = _spelled_out(value)
            problem = _pattern_problem(_pattern_body(value))
            if problem:
                shown = value if len(value) <= 80 else value[:80] + "..."
                raise _Located(where or "/", ValueError(f"pattern {shown!r}: {problem}"))
            head = "" if value.startswith("^") else "^.*"
            tail = "" if _anchored_end(value) else ".*$"
            out[key] = f"{head}{value}{tail}" if head or tail else value
        else:  # data too (a const, examples): a $ref may point into it
            if key in ("const", "enum"):
                problem = _literal_problem(value)
                if problem:
                    raise _Located(f"{where}/{key}", ValueError(problem))
            out[key] = _anchored(value, f"{where}/{key}")
    return out


#: What a JSON string holds only escaped; the converter writes it into the grammar raw (a NUL
#: no token makes, so llama.cpp aborts the server; a control character, JSON that does not
#: parse), or a lone surrogate, which is no UTF-8 at all.
_UNWRITABLE = re.compile(r"[\x00-\x1f\ud800-\udfff]")


def _literal_problem(value: Any, depth: int = 0) -> str | None:
    """Why a ``const`` or ``enum`` value cannot be decoded with a grammar, or None."""
    if isinstance(value, str):
        m = _UNWRITABLE.search(value)
        if m:
            what = "a NUL" if m.group(0) == "\x00" else f"the character {m.group(0)!a}"
            return f"a string value holds {what}, which a grammar cannot make as JSON"
    elif isinstance(value, list | dict) and depth < 64:
        items = value.values() if isinstance(value, dict) else value
        keys = list(value) if isinstance(value, dict) else []
        for item in [*keys, *items]:
            problem = _literal_problem(item, depth + 1)
            if problem:
                return problem
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _prepared(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy the converter takes: patterns anchored, and a root that is a ``$ref`` (pydantic
    writes a recursive model as ``{"$ref": "#/$defs/M", "$defs": ...}``) replaced by what it
    names, since the converter resolves no reference inside ``$defs`` under such a root."""
    out: dict[str, Any] = _anchored(schema)
    ref, defs = out.get("$ref"), out.get("$defs")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict):
            out = {**target, **{k: v for k, v in out.items() if k != "$ref"}}
    return out


def _namespaced(schema: dict[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema without its ``$defs`` and those definitions, renamed with ``prefix``, so that
    several schemas (one per tool) share one grammar without their definitions colliding."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            defs[f"{prefix}{name}"] = sub

    def rename(node: Any) -> Any:
        if isinstance(node, list):
            return [rename(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for k, v in node.items():
            if k in ("$defs", "definitions"):
                continue
            if k == "$ref" and isinstance(v, str):
                for key in ("$defs", "definitions"):
                    if v.startswith(f"#/{key}/"):
                        v = f"#/$defs/{prefix}{v[len(key) + 3 :]}"
            out[k] = rename(v)
        return out

    return rename(schema), {k: rename(v) for k, v in defs.items()}


# ----- grammars ---------------------------------------------------------------------------------


def response_format_schema(response_format: Any) -> dict[str, Any] | None:
    """The JSON Schema a ``response_format`` asks for; None for plain text.

    ``{"type": "json_object"}`` is any JSON object (with llama.cpp server's ``"schema"``
    extension honoured); ``{"type": "json_schema", "json_schema": {"schema": ...}}`` is OpenAI's
    structured output, also spoken by vLLM and SGLang.
    """
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise GrammarError("response_format must be a JSON object")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema")
        return schema if isinstance(schema, dict) else {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise GrammarError("response_format.json_schema.schema is missing or not an object")
        return schema
    raise GrammarError(
        f"response_format.type {kind!r} is not one of 'text', 'json_object', 'json_schema'"
    )


def schema_gbnf(schema: dict[str, Any], what: str = "response_format schema") -> str:
    """The grammar of the JSON documents valid against ``schema``."""
    conv = _Converter()
    try:
        root = _prepared(schema)
        conv.resolve(root, "schema")
        conv.visit(root, "")
    except _Located as exc:
        raise GrammarError(f"{what} cannot be decoded with a grammar {exc.message()}") from None
    return str(conv.format_grammar())


def _parameters(tool: Any, i: int) -> tuple[str, dict[str, Any]]:
    fn = tool.get("function") if isinstance(tool, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str) or not name:
        raise GrammarError(f"tools[{i}] has no function.name")
    params = fn.get("parameters")  # type: ignore[union-attr]
    if params is None:
        params = {"type": "object", "properties": {}}
    if not isinstance(params, dict):
        raise GrammarError(f"tool {name!r}: parameters must be a JSON object")
    schema_gbnf(params, f"tool {name!r} parameters")  # fails here with the tool named
    return name, params


def tool_call_gbnf(
    tools: Sequence[Any], tool_choice: Any = None, answer: dict[str, Any] | None = None
) -> str:
    """The grammar of an answer to a request offering ``tools``: one valid call of an offered
    tool, or instead a message (plain text, or JSON fitting ``answer`` when a response_format
    asks for one). ``tool_choice`` ``"required"`` or a named function allows only calls;
    ``"none"`` is the caller's to handle (no tools offered)."""
    offered = [_parameters(t, i) for i, t in enumerate(tools)]
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        offered = [(n, p) for n, p in offered if n == wanted]
        if not offered:
            raise GrammarError(f"tool_choice names {wanted!r}, which is not an offered tool")
    if not offered:
        raise GrammarError("tools is empty")
    defs: dict[str, Any] = {}
    calls = []
    for i, (name, params) in enumerate(offered):
        args, tool_defs = _namespaced(_prepared(params), f"t{i}_")
        defs.update(tool_defs)
        calls.append(
            {
                "type": "object",
                "properties": {"name": {"const": name}, "arguments": args},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    container: dict[str, Any] = {"calls": {"anyOf": calls}}
    if answer is not None:
        try:
            container["answer"], answer_defs = _namespaced(_prepared(answer), "a_")
        except _Located as exc:
            raise GrammarError(
                f"response_format schema cannot be decoded with a grammar {exc.message()}"
            ) from None
        defs.update(answer_defs)
    container["$defs"] = defs
    conv = _Converter()
    try:
        conv.resolve(container, "request")
        conv.visit(container["calls"], "call")
        answer_rule = conv.visit(container["answer"], "answer") if answer is not None else None
    except _Located as exc:
        raise GrammarError(f"tools cannot be decoded with a grammar {exc.message()}") from None
    if tool_choice == "required" or isinstance(tool_choice, dict):
        root = "root ::= mx-call"
    elif answer_rule is not None:
        root = f"root ::= mx-call | {answer_rule}"
    else:
        root = "root ::= mx-call | mx-text mx-call?"
    return "\n".join([root, _TEXT_RULES, conv.format_grammar()])


# ----- compiled grammars ------------------------------------------------------------------------


def vocab_check(model: Any) -> Callable[[str], None]:
    """A check that llama.cpp itself parses a grammar for this model's vocabulary.

    llama-cpp-python adds a grammar that llama.cpp refused (a NULL sampler) to its sampler chain
    unchecked, which crashes the process; checking once up front turns that into a 400.
    ``model`` is a ``Llama`` (a vocabulary-only one will do).
    """
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(model.model)

    def check(gbnf: str) -> None:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
        if not sampler:
            raise GrammarError(
                "llama.cpp could not parse the grammar made from the schema (its reason is in "
                "the embedded model's log)"
            )
        llama_cpp.llama_sampler_free(sampler)

    return check


#: The largest grammar text checked and kept. llama.cpp parses a grammar in the server process
#: (no deadline can stop it) for the check and again for every completion, in time growing with
#: the square of a rule's alternatives (a 20,000-value enum: 190 KB, 0.6 s here); the library's
#: tool grammars are under 15 KB.
_MAX_GRAMMAR_CHARS = 256 * 1024


def build_here(build: Callable[..., str], *args: Any) -> str:
    """Runs a grammar build in this process (tests, and scripts trusting their schemas)."""
    return build(*args)


class GrammarCache:
    """Grammars by request shape, each converted and checked once; failures remembered too.

    An assistant sends the same tools and a stage the same schema with every call, so each is
    converted (a blueprint schema: about 2 ms here) and checked by llama.cpp (about 1 ms) once.
    llama.cpp still parses the GBNF text into a fresh sampler for every completion, as
    llama-cpp-python builds one per call. At most ``capacity`` grammars are kept, least recently
    used first out, and as many failures apart from them, so a schema that cannot become a grammar
    (or took too long to) is refused again without building. ``builder`` runs the conversion:
    here by default, in a :class:`GrammarWorker` in the embedded server. Safe to share between
    threads; concurrent requests for one key build it once.
    """

    def __init__(
        self,
        check: Callable[[str], None],
        capacity: int = 64,
        builder: Callable[..., str] = build_here,
    ) -> None:
        self._check = check
        self._capacity = capacity
        self._builder = builder
        self._items: OrderedDict[str, LlamaGrammar] = OrderedDict()
        self._refused: OrderedDict[str, str] = OrderedDict()
        self._building: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        """The number of grammars kept (failures not counted)."""
        return len(self._items)

    def get(self, key: Any, build: Callable[..., str], *args: Any) -> LlamaGrammar:
        """The grammar for ``key`` (any JSON value), made by ``build(*args)`` the first time.

        A :class:`GrammarWorker` builder takes only module-level ``build`` functions and JSON
        ``args``.
        """
        digest = hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()
        while True:
            with self._lock:
                found = self._items.get(digest)
                if found is not None:
                    self.hits += 1
                    self._items.move_to_end(digest)
                    return found
                refused = self._refused.get(digest)
                if refused is not None:
                    self.hits += 1
                    self._refused.move_to_end(digest)
                    raise GrammarError(refused)
                pending = self._building.get(digest)
                if pending is None:
                    self._building[digest] = threading.Event()
                    self.misses += 1
                    break
            pending.wait()  # the same shape is being built: its result is ours
        try:
            grammar = self._built(build, args)
        except GrammarError as exc:
            self._keep(self._refused, digest, str(exc))
            raise
        else:
            self._keep(self._items, digest, grammar)
            return grammar
        finally:
            with self._lock:
                self._building.pop(digest).set()

    def _built(self, build: Callable[..., str], args: tuple[Any, ...]) -> LlamaGrammar:
        gbnf = self._builder(build, *args)
        if len(gbnf) > _MAX_GRAMMAR_CHARS:
            raise GrammarError(
                f"the grammar made from the schema is {len(gbnf) >> 10} KB, more than the "
                f"{_MAX_GRAMMAR_CHARS >> 10} KB the embedded model takes"
            )
        if "\x00" in gbnf:  # llama.cpp reads the text up to its first NUL
            raise GrammarError("the grammar made from the schema holds a NUL character")
        self._check(gbnf)
        return LlamaGrammar.from_string(gbnf, verbose=False)

    def _keep(self, items: OrderedDict[str, Any], digest: str, value: Any) -> None:
        with self._lock:
            items[digest] = value
            while len(items) > self._capacity:
                items.popitem(last=False)


# ----- the build worker -------------------------------------------------------------------------

_READY = b"maestro grammar worker ready\n"


class GrammarWorker:
    """Runs grammar builds in a child Python process, which is killed past a deadline.

    The converter is outside code, driven by each request's schema, and its pattern parser has
    looped forever; a build it does not finish within ``deadline_s`` kills the child and is a
    :class:`GrammarError` (the next build starts a fresh child). The child is a new interpreter
    (``subprocess``: fork and exec, no Python code run in a forked copy), never a bare fork: the
    server may hold a deltalake (tokio) runtime, which panics in a forked child. It stays up
    between builds, since starting one takes about 0.6 s (imports), while a build costs a pipe
    round trip. It builds one schema at a time; callers wait their turn.

    Called as ``worker(build, *args)`` (a :class:`GrammarCache` builder) with a module-level
    ``build`` function and JSON ``args``; it returns the GBNF text.
    """

    def __init__(self, deadline_s: float, *, start_timeout_s: float = 60.0) -> None:
        self.deadline_s = deadline_s
        self.start_timeout_s = start_timeout_s
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Starts the child now, without waiting for it, so that the first build finds it up."""
        with self._lock:
            self._spawned()

    def _spawned(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._stop()
            # The child imports what this process imports, from the same places (set once it
            # runs, as multiprocessing does: a PYTHONPATH would come before the standard library).
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_MAIN, repr(self.deadline_s), json.dumps(sys.path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            self._ready = False
            self.starts += 1
        return self._proc

    def _started(self) -> subprocess.Popen[bytes]:
        proc = self._spawned()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._ready:
            try:
                line = _read_line(proc, deadline)
            except EOFError:
                line = None
            if line is None:
                code = proc.poll()
                self._stop()
                raise GrammarError(
                    f"the grammar worker did not start within {self.start_timeout_s:g} s "
                    f"(exit status {code})"
                )
            self._ready = line.endswith(_READY)  # what a library wrote while importing comes first
        return proc

    def __call__(self, build: Callable[..., str], *args: Any) -> str:
        name = f"{build.__module__}:{build.__qualname__}"
        if "<" in name:
            raise TypeError(f"a grammar worker runs module-level functions, not {name}")
        request = json.dumps({"build": name, "args": args}).encode() + b"\n"
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None
            deadline = time.monotonic() + self.deadline_s
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
                line = _read_line(proc, deadline)
            except (OSError, EOFError):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=2)  # its pipe closes just before it ends
                code = proc.poll()
                self._stop()
                raise GrammarError(
                    f"the grammar worker ended (exit status {code}) building the grammar"
                ) from None
            except GrammarError:
                self._stop()  # its reply is cut, and the next one would read the rest
                raise
            if line is None:
                self._stop()
                _log.warning("grammar build stopped after %g s (%s)", self.deadline_s, name)
                raise GrammarError(
                    f"the schema took longer than {self.deadline_s:g} s to become a grammar; "
                    "its build was stopped"
                )
        reply = json.loads(line)
        if "error" in reply:
            raise GrammarError(reply["error"])
        return str(reply["gbnf"])

    def close(self) -> None:
        """Stops the child (a build in progress ends in a GrammarError)."""
        self._stop()

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a request it did not read is lost
                    pipe.close()


#: The longest reply read from the worker: a grammar past the size kept, even JSON-escaped.
_MAX_REPLY_BYTES = 8 * _MAX_GRAMMAR_CHARS


def _read_line(proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
    """One line from the child's stdout, or None when it is not complete by ``deadline``."""
    assert proc.stdout is not None
    fd, line = proc.stdout.fileno(), bytearray()
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise EOFError
        line += chunk
        if len(line) > _MAX_REPLY_BYTES:
            raise GrammarError(
                f"the grammar made from the schema is more than the {_MAX_GRAMMAR_CHARS >> 10} "
                "KB the embedded model takes"
            )
    return bytes(line)


_WORKER_MAIN = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[2]); "
    "from maestro.agents.grammar import serve_builds; serve_builds()"
)


def serve_builds() -> None:
    """The grammar worker's loop, in the child: a JSON request a line on stdin, a JSON reply a
    line on stdout (``{"gbnf": ...}`` or ``{"error": ...}``), until stdin closes."""
    deadline_s = float(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the server's to handle
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not break a reply
    try:
        _reply(out, _READY)
        for line in sys.stdin.buffer:
            _reply(out, json.dumps(_build_one(line, deadline_s)).encode() + b"\n")
    except BrokenPipeError:  # the server is gone
        pass


def _reply(out: Any, data: bytes) -> None:
    out.write(data)
    out.flush()


def _build_one(line: bytes, deadline_s: float) -> dict[str, str]:
    """One request's reply. The interval timer's signal, left at its default, ends the child a
    while after the deadline, so a child whose server died mid-build does not spin on."""
    signal.setitimer(signal.ITIMER_REAL, deadline_s + 5.0)
    try:
        request = json.loads(line)
        module, _, qualname = request["build"].partition(":")
        build = getattr(importlib.import_module(module), qualname)
        return {"gbnf": str(build(*request["args"]))}
    except GrammarError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # the converter trips over odd shapes in odd ways
        text = one_line(f"{type(exc).__name__}: {exc}")
        return {"error": f"the schema cannot be decoded with a grammar: {text}"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


#: The most JSON values (objects, lists, strings, numbers) a request's schemas may hold: a
#: blueprint's schema holds 301 and the library domains' tool lists 384-451 (measured).
MAX_SCHEMA_NODES = 50_000


def _nodes_over(value: Any, limit: int) -> bool:
    """Whether ``value`` holds more than ``limit`` JSON values (counted without recursion)."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def request_grammar(
    body: dict[str, Any], cache: GrammarCache, *, schemas: bool = True, tool_calls: bool = True
) -> LlamaGrammar | None:
    """The grammar one chat request is decoded with, or None (free text).

    ``schemas`` honours ``response_format``; ``tool_calls`` constrains answers to requests with
    ``tools`` (settings of the embedded model, so either can be measured off).
    """
    answer = response_format_schema(body.get("response_format")) if schemas else None
    tools = body.get("tools") or None
    choice = body.get("tool_choice")
    for name, value in (("response_format", answer), ("tools", tools)):
        if value is not None and _nodes_over(value, MAX_SCHEMA_NODES):
            raise GrammarError(
                f"the {name} schema holds more than the {MAX_SCHEMA_NODES} values a grammar is "
                "made for"
            )
    # With a response_format and tools, only the combined grammar lets the model do either.
    if tools and choice != "none" and (tool_calls or answer is not None):
        key = ["tools", tools, choice, answer]
        try:
            return cache.get(key, tool_call_gbnf, tools, choice, answer)
        except GrammarError as exc:
            if answer is not None:
                raise
            # The caller asked for tools, not for a constraint: it gets an unconstrained
            # answer (parsed from text as before) rather than an error.
            _log.warning("tool calls not constrained: %s", one_line(str(exc)))
            return None
    if answer is not None:
        return cache.get(["schema", answer], schema_gbnf, answer)
    return None
