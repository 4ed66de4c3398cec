"""The tau2 export against a hostile package and a hostile target folder: text of the package
never becomes code in what is generated, and a package file linked after the load is not read
(red-team finding 16; the target swapped for a link mid-export is in test_export_target.py)."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from maestro.domains import load_domain
from maestro.domains.tau2_export import Tau2ExportError, export_tau2

#: A docstring in ''' that holds """: pasted between """ quotes, its middle became code.
INJECTED = '''    \'\'\'Look up one order.
    """
    import os; os.system("touch {marker}")
    """

    Args:
        order_id: The order's id.
    \'\'\'
'''


def _generated_tools(out: Path) -> ast.Module:
    return ast.parse((out / "src" / "tau2" / "domains" / "toy" / "tools.py").read_text())


def test_a_docstring_holding_triple_quotes_stays_a_docstring(
    toy_copy: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    tools = (toy_copy / "tools.py").read_text()
    start = tools.index('    """', tools.index("def get_order"))
    end = tools.index('    """', start + 7) + len('    """\n')
    (toy_copy / "tools.py").write_text(tools[:start] + INJECTED.format(marker=marker) + tools[end:])
    manifest = json.loads((toy_copy / "domain.json").read_text())
    manifest["name"] = 'Toy """ + __import__("os").system("touch x") + """'
    (toy_copy / "domain.json").write_text(json.dumps(manifest))
    domain = load_domain(toy_copy, trusted=True, check_gold=False)
    out = tmp_path / "out"
    export_tau2(domain, out)
    tree = _generated_tools(out)
    (toolkit,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    method = next(
        n for n in toolkit.body if isinstance(n, ast.FunctionDef) and n.name == "get_order"
    )
    assert ast.get_docstring(method) == ast.get_docstring(
        next(
            n
            for n in ast.parse((toy_copy / "tools.py").read_text()).body
            if isinstance(n, ast.FunctionDef) and n.name == "get_order"
        )
    )
    assert [type(s).__name__ for s in method.body] == ["Expr", "Return"]  # nothing added
    assert not any(isinstance(n, ast.Import) for n in ast.walk(toolkit))
    init = ast.parse((out / "src" / "tau2" / "domains" / "toy" / "__init__.py").read_text())
    assert ast.get_docstring(init) == f"{manifest['name']} (exported from maestro)."
    assert len(init.body) == 1


def test_a_package_file_linked_after_the_load_is_not_exported(
    toy_copy: Path, tmp_path: Path
) -> None:
    domain = load_domain(toy_copy, trusted=True, check_gold=False)
    secret = tmp_path / "secret.py"
    secret.write_text("S3CRET = 1\n")
    (toy_copy / "models.py").unlink()
    os.link(secret, toy_copy / "models.py")
    out = tmp_path / "out"
    try:
        export_tau2(domain, out)
        raise AssertionError("exported a hard-linked models.py")
    except Tau2ExportError as exc:
        assert "models.py: has 2 names" in str(exc)
    assert not any("S3CRET" in p.read_text() for p in out.rglob("*") if p.is_file())
