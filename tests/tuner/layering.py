#!/usr/bin/env python3
"""The tuner's units and the one way their includes point (docs/design.md, "The tuner's units"):
db <- measure <- search, plan <- lookup <- run (the files at tuner/'s top). A file may include its
own unit and the units below it, never one above it or beside it (search and plan are beside each
other). Prints each include that breaks the rule; exit 1 when there is one.

    tests/tuner/layering.py [SOURCE_DIR]
"""
import pathlib
import re
import sys

RANK = {"db": 0, "measure": 1, "search": 2, "plan": 2, "lookup": 3, "run": 4}


def unit(path: pathlib.PurePosixPath) -> str:
    """The unit of a path under tuner/: its first folder, or "run" for the top."""
    parts = path.parts
    return parts[1] if len(parts) > 2 and parts[1] in RANK else "run"


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    include = re.compile(r'^\s*#\s*include\s+"(tuner/[^"]+)"', re.M)
    bad = []
    files = sorted(p for p in (root / "tuner").rglob("*") if p.suffix in (".h", ".cpp"))
    for f in files:
        rel = pathlib.PurePosixPath(f.relative_to(root).as_posix())
        mine = unit(rel)
        for target in include.findall(f.read_text(encoding="utf-8", errors="replace")):
            theirs = unit(pathlib.PurePosixPath(target))
            if theirs != mine and RANK[theirs] >= RANK[mine]:
                bad.append(f"{rel}: includes {target}: the {mine} unit may not depend on the {theirs} unit")
    for line in bad:
        print(line)
    print(f"{len(files)} files of tuner/ checked, {len(bad)} include(s) against the units' order")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
