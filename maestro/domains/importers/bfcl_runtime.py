"""BFCL's API classes and checker, run inside the sandbox child. The host never imports this.

The child imports this module (and the API-class modules a package names) before any
untrusted code runs, because the host vetted them (``load_sandboxed_domain(vetted=...)``).
Everything it does then runs under the sandbox's serving-phase layers.

- :func:`call_api` is what an imported package's tools call: it rebuilds the class instance
  from the session's records (one table per class, one record per attribute; see
  :mod:`maestro.domains.importers.objstate`), calls the method, and writes back the attributes
  that changed. The text it returns is what BFCL's executor shows a model: a string as is, a
  dict as ``json.dumps``, anything else as ``str``, an exception as
  ``"Error during execution: ..."`` with whatever the method changed before it raised kept,
  as BFCL keeps it. Only public methods of the vetted classes can be reached.
- :func:`describe_classes`, :func:`initial_records`, :func:`execute_calls` and
  :func:`run_checker` serve the importer and the checker (the "service" package).

BFCL's checker evaluates call strings with ``eval``. Here its module's ``eval`` is replaced by
:func:`call_expression`, which accepts exactly ``instance.method(literal, name=literal, ...)``
on the checker's own instances: BFCL's calls all have that shape, and a model's tool name can
no longer smuggle an expression into ``eval``.
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import json
import sys
from typing import Any

from bfcl_eval.constants import default_prompts, executable_backend_config
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker, multi_turn_utils

from maestro.domains.errors import ToolError
from maestro.domains.importers.objstate import encode_attributes, restore
from maestro.domains.store import Session, canonical_json

#: Where BFCL's API classes live; only classes of these modules are built or called.
API_PACKAGE = executable_backend_config.BACKEND_PATH_PREFIX + "."
MAX_DETAIL_CHARS = 4000

_checks = itertools.count()


def _signatures() -> dict[str, dict[str, list[str]]]:
    """Parameter names of each loaded API class's public methods. Computed when this module
    loads (the child imports it after the API modules the host vetted): inspecting a function
    reads its ``__code__``, which the sandbox refuses once it serves calls."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, module in executable_backend_config.CLASS_FILE_PATH_MAPPING.items():
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            out[name] = {
                m: [p for p in inspect.signature(f).parameters if p != "self"]
                for m, f in inspect.getmembers(cls, inspect.isfunction)
                if not m.startswith("_")
            }
    return out


SIGNATURES = _signatures()


def _warm_typing_cache() -> None:
    """Evaluate the annotations of functions nested in the API modules' functions, now.

    Python evaluates them each time the outer function runs (``def get_size(item:
    Union[File, Directory])`` inside ``GorillaFileSystem.du``). The first evaluation of a new
    typing alias reads a frame (typing_extensions patches typing to), which the sandbox
    refuses once it serves calls; evaluated here, while the child loads, they come from
    typing's cache later. These are the expressions Python itself would evaluate.
    """
    for module_name in executable_backend_config.CLASS_FILE_PATH_MAPPING.values():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        tree = ast.parse(inspect.getsource(module))
        for outer in ast.walk(tree):
            if not isinstance(outer, ast.FunctionDef):
                continue
            for node in ast.walk(outer):
                if node is outer or not isinstance(node, ast.FunctionDef):
                    continue
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                for expr in [*(a.annotation for a in args), node.returns]:
                    if expr is None:
                        continue
                    code = compile(ast.Expression(expr), str(module.__file__), "eval")
                    try:
                        eval(code, vars(module))
                    except Exception:  # an annotation naming the outer function's locals
                        continue


_warm_typing_cache()


# ----- classes ---------------------------------------------------------------------------------


def _vetted_type(cls: type) -> bool:
    return cls.__module__.startswith(API_PACKAGE)


class _ApiObjects:
    """Objects of BFCL's API modules, written as ``gorilla_file_system:Directory``."""

    def allowed(self, cls: type) -> bool:
        return _vetted_type(cls)

    def name(self, cls: type) -> str:
        return f"{cls.__module__.removeprefix(API_PACKAGE)}:{cls.__qualname__}"

    def resolve(self, name: str) -> type:
        module_name, _, qualname = name.partition(":")
        module = sys.modules.get(API_PACKAGE + module_name)
        cls = getattr(module, qualname, None) if "." not in qualname else None
        if not isinstance(cls, type) or not _vetted_type(cls):
            raise ToolError(f"the state names a class this sandbox cannot build: {name}")
        return cls


OBJECTS = _ApiObjects()


def api_class(class_ref: str) -> type:
    """The API class BFCL names ``class_ref`` (``"GorillaFileSystem"``), loaded in this child."""
    module = executable_backend_config.CLASS_FILE_PATH_MAPPING.get(class_ref)
    if module is None:
        raise ToolError(f"BFCL has no API class {class_ref!r}")
    if module not in sys.modules:
        raise ToolError(f"the API class {class_ref} was not loaded in this sandbox ({module})")
    return OBJECTS.resolve(f"{module.removeprefix(API_PACKAGE)}:{class_ref}")


# ----- the tools -------------------------------------------------------------------------------


def render(result: Any) -> str:
    """A method's return value as BFCL's executor renders it for the model."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


def _load(db: Session, table: str) -> dict[str, Any]:
    return {key: (db.get(table, key) or {}).get("value") for key in db.keys(table)}


def save(db: Session, table: str, instance: Any, before: dict[str, Any]) -> None:
    """Write the attributes whose encoding changed, and delete the ones that went away."""
    after = encode_attributes(instance, OBJECTS)
    for name, value in after.items():
        if name not in before or canonical_json(before[name]) != canonical_json(value):
            db.put(table, {"name": name, "value": value})
    for name in before.keys() - after.keys():
        db.delete(table, name)


def call_api(db: Session, class_ref: str, method: str, arguments: dict[str, Any]) -> str:
    """Call ``class_ref.method(**arguments)`` on the instance the session holds."""
    cls = api_class(class_ref)
    if method.startswith("_") or not inspect.isfunction(getattr(cls, method, None)):
        raise ToolError(f"{class_ref} has no public method {method!r}")
    before = _load(db, class_ref)
    instance = restore(cls, before, OBJECTS)
    try:
        text = render(getattr(instance, method)(**arguments))
    except Exception as exc:  # BFCL shows the model the error and keeps the state as it is
        text = f"Error during execution: {exc}"
    save(db, class_ref, instance, before)
    return text


# ----- the service: what the importer and the checker ask of BFCL's code ------------------------


def describe_classes() -> dict[str, Any]:
    """BFCL's class table (module, function-doc file, stateless or not), each loaded class's
    method signatures, and the user message BFCL sends when a turn adds functions."""
    cfg = executable_backend_config
    classic = default_prompts.PROMPT_STYLE_TEMPLATES["classic"]
    return {
        "modules": dict(cfg.CLASS_FILE_PATH_MAPPING),
        "func_doc_files": dict(cfg.MULTI_TURN_FUNC_DOC_FILE_MAPPING),
        "stateless": list(cfg.STATELESS_CLASSES),
        "signatures": SIGNATURES,
        "added_functions_prompt": default_prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
        "instructions": {
            "task": classic["task"],
            "behavior": classic["multiturn_behavior"],
        },
    }


def _fresh(class_ref: str, config: dict[str, Any], long_context: bool) -> Any:
    """An instance as BFCL's executor builds it for a test entry."""
    instance = api_class(class_ref)()
    if class_ref not in executable_backend_config.STATELESS_CLASSES:
        instance._load_scenario(copy.deepcopy(config), long_context=long_context)
    return instance


def initial_records(class_ref: str, config: dict[str, Any], long_context: bool) -> dict[str, Any]:
    """The attributes of a freshly loaded instance, as the session stores them."""
    return encode_attributes(_fresh(class_ref, config, long_context), OBJECTS)


def execute_calls(
    entry: dict[str, Any], turns: list[list[str]], long_context: bool
) -> dict[str, Any]:
    """BFCL's own executor on call strings, turn by turn: each call's result text and the
    instances' final attributes (encoded), to compare with what maestro's tools did."""
    name = f"maestro_exec_{next(_checks)}"
    results: list[list[str]] = []
    instances: dict[str, Any] = {}
    try:
        for turn in turns:
            out, instances = multi_turn_utils.execute_multi_turn_func_call(
                turn,
                entry["initial_config"],
                entry["involved_classes"],
                name,
                entry["id"],
                long_context=long_context,
            )
            results.append(out)
    finally:
        _forget(name)
    return {
        "results": results,
        "state": {c: encode_attributes(i, OBJECTS) for c, i in instances.items()},
    }


def run_checker(
    entry: dict[str, Any],
    ground_truth: list[list[str]],
    model_turns: list[list[list[str]]],
    category: str,
) -> dict[str, Any]:
    """BFCL's ``multi_turn_checker`` on one test entry; its verdict, as plain JSON."""
    name = f"maestro_check_{next(_checks)}"
    try:
        verdict = multi_turn_checker.multi_turn_checker(
            model_turns, ground_truth, entry, category, name
        )
    except Exception as exc:  # BFCL's eval runner would stop here; maestro records an error
        return {"valid": None, "error_type": "checker_exception", "error_message": repr(exc)}
    finally:
        _forget(name)
    details = verdict.get("details")
    return {
        "valid": bool(verdict.get("valid")),
        "error_type": verdict.get("error_type"),
        "error_message": verdict.get("error_message"),
        "details": None if details is None else str(details)[:MAX_DETAIL_CHARS],
    }


def _forget(model_name: str) -> None:
    """BFCL's executor keeps instances in its module globals by model name: drop this run's,
    so that the next check of the same entry starts from the initial state."""
    registry = vars(multi_turn_utils)
    for key in [k for k in registry if k.startswith(model_name + "_")]:
        del registry[key]


# ----- BFCL's eval, narrowed -------------------------------------------------------------------


def call_expression(text: str) -> Any:
    """Evaluate ``instance.method(literal, ..., name=literal, ...)`` as ``eval`` would.

    The instance must be one BFCL's executor registered in its module globals; arguments must
    be literals (BFCL writes them with ``repr``). Anything else raises, and BFCL's executor
    turns that into the call's ``"Error during execution: ..."`` result.
    """
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call):
        raise SyntaxError(f"not a function call: {text[:200]}")
    func = node.func
    if isinstance(func, ast.Name):
        raise NameError(f"name {func.id!r} is not defined")
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        raise SyntaxError(f"not a method call on an API instance: {text[:200]}")
    instance = vars(multi_turn_utils).get(func.value.id)
    if instance is None or not _vetted_type(type(instance)) or func.attr.startswith("_"):
        raise NameError(f"name {func.value.id!r} is not defined")
    if any(k.arg is None for k in node.keywords) or any(
        isinstance(a, ast.Starred) for a in node.args
    ):
        raise SyntaxError("argument unpacking is not supported in a call")
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}
    return getattr(instance, func.attr)(*args, **kwargs)


# The executor resolves ``eval`` through its module's globals before the builtins.
multi_turn_utils.eval = call_expression

__all__ = [
    "api_class",
    "call_api",
    "call_expression",
    "describe_classes",
    "execute_calls",
    "initial_records",
    "render",
    "run_checker",
]
