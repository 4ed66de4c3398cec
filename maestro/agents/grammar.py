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
"""

from __future__ import annotations

import hashlib
import json
import logging
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


class _Located(Exception):
    """A converter failure and the schema path (a rule name) where it happened."""

    def __init__(self, where: str, cause: BaseException) -> None:
        super().__init__(where, cause)
        self.where = where
        self.cause = cause

    def message(self) -> str:
        text = str(self.cause) or type(self.cause).__name__
        if len(text) > 300:
            text = text[:300] + "..."
        return f"at {self.where}: {text}"


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


def _anchored(schema: Any) -> Any:
    """A copy whose string ``pattern``s the converter takes: shorthand classes spelled out, and
    anchored at both ends.

    JSON Schema patterns match anywhere (pydantic's ``Field(pattern=...)`` often omits ``^``/``$``);
    the converter only takes anchored ones, so ``abc`` becomes ``^.*abc.*$``, its meaning.
    """
    if isinstance(schema, list):
        return [_anchored(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str):
            value = _spelled_out(value)
            head = "" if value.startswith("^") else "^.*"
            tail = "" if value.endswith("$") and not value.endswith("\\$") else ".*$"
            out[key] = f"{head}{value}{tail}" if head or tail else value
        else:
            out[key] = _anchored(value)
    return out


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
        container["answer"], answer_defs = _namespaced(_prepared(answer), "a_")
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


class GrammarCache:
    """Grammars by request shape, each converted and checked once.

    An assistant sends the same tools and a stage the same schema with every call, so each is
    converted (a blueprint schema: about 2 ms here) and checked by llama.cpp (about 1 ms) once.
    llama.cpp still parses the GBNF text into a fresh sampler for every completion, as
    llama-cpp-python builds one per call. At most ``capacity`` grammars are kept, least recently
    used first out.
    """

    def __init__(self, check: Callable[[str], None], capacity: int = 64) -> None:
        self._check = check
        self._capacity = capacity
        self._items: OrderedDict[str, LlamaGrammar] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Any, build: Callable[[], str]) -> LlamaGrammar:
        """The grammar for ``key`` (any JSON value), built by ``build`` the first time."""
        digest = hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()
        found = self._items.get(digest)
        if found is not None:
            self.hits += 1
            self._items.move_to_end(digest)
            return found
        self.misses += 1
        gbnf = build()
        self._check(gbnf)
        grammar = LlamaGrammar.from_string(gbnf, verbose=False)
        self._items[digest] = grammar
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)
        return grammar


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
    # With a response_format and tools, only the combined grammar lets the model do either.
    if tools and choice != "none" and (tool_calls or answer is not None):
        key = ["tools", tools, choice, answer]
        try:
            return cache.get(key, lambda: tool_call_gbnf(tools, choice, answer))
        except GrammarError as exc:
            if answer is not None:
                raise
            # The caller asked for tools, not for a constraint: it gets an unconstrained
            # answer (parsed from text as before) rather than an error.
            _log.warning("tool calls not constrained: %s", exc)
            return None
    if answer is not None:
        return cache.get(["schema", answer], lambda: schema_gbnf(answer))
    return None
