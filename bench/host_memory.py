"""The host's peak memory for ``maestro domains validate`` on a package with a large db.json.

Copies the toy fixture, grows its customers table to about ``--mib`` MiB of db.json (64 MiB is
the largest db.json a package may have), and runs ``maestro domains validate`` on it in a child
process; prints the child's peak RSS (``ru_maxrss`` of the waited-for process tree: the host and
its sandbox children, the largest of them), the wall time and the ratio of peak to db.json size.

    .venv/bin/python bench/host_memory.py [--mib 59]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOY = Path(__file__).parents[1] / "tests" / "fixtures" / "toy"


def make_package(root: Path, mib: float) -> Path:
    pkg = root / "toy"
    shutil.copytree(TOY, pkg)
    db = json.loads((pkg / "db.json").read_text())
    # One customer is about 89 bytes of JSON.
    for i in range(int(mib * 2**20 / 89)):
        key = f"C{i + 10}"
        db["customers"][key] = {"customer_id": key, "name": f"N{i}", "email": f"u{i}@example.com"}
    (pkg / "db.json").write_text(json.dumps(db))
    return pkg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=59.0, help="db.json size in MiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pkg = make_package(Path(tmp), args.mib)
        size = (pkg / "db.json").stat().st_size
        started = time.perf_counter()
        proc = subprocess.run(
            [str(Path(sys.executable).with_name("maestro")), "domains", "validate", str(pkg)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else proc.stderr[-500:])
    print(
        json.dumps(
            {
                "db_json_mib": round(size / 2**20, 1),
                "exit": proc.returncode,
                "peak_rss_mib": round(peak / 2**20),
                "peak_over_db": round(peak / size, 1),
                "wall_s": round(wall, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
