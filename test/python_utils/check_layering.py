#!/usr/bin/env python3
"""Checks that lib/ and include/masformer/ keep the layering of docs/design.md.

Every #include "masformer/..." between two folders must be allowed by
ALLOWED below (the same table as docs/design.md, "Where things live"); the
table itself must have no cycle. Prints one line per violation and exits 1.

    check_layering.py SOURCE_ROOT
"""
import pathlib
import re
import sys

# Folder -> the project folders it may include. Folders are paths under lib/
# (and include/masformer/); "InitAllPasses" is include/masformer/InitAllPasses.h.
ALLOWED = {
    "Utils": set(),
    "Dialect/MASFormer/IR": set(),
    "Dialect/MASFormer/Analysis": {"Dialect/MASFormer/IR"},
    "Dialect/MASFormer/Utils": {"Dialect/MASFormer/IR", "Utils"},
    "Dialect/MASFormer/Transforms": {"Dialect/MASFormer/IR",
                                     "Dialect/MASFormer/Analysis",
                                     "Dialect/MASFormer/Utils", "Utils"},
    "Conversion": {"Dialect/MASFormer/IR", "Dialect/MASFormer/Utils", "Utils"},
    "Codegen/Common": {"Dialect/MASFormer/IR", "Utils"},
    "Codegen/CPU": {"Dialect/MASFormer/IR", "Dialect/MASFormer/Utils",
                    "Utils"},
    "Codegen/GPU": {"Dialect/MASFormer/IR", "Utils"},
    "InitAllPasses": {"Dialect/MASFormer/Transforms", "Conversion",
                      "Codegen/Common", "Codegen/CPU", "Codegen/GPU"},
    "Pipelines": {"InitAllPasses", "Dialect/MASFormer/Transforms",
                  "Conversion", "Codegen/Common", "Codegen/CPU",
                  "Codegen/GPU"},
    "Import": {"Dialect/MASFormer/IR", "Utils"},
    "Export": {"Dialect/MASFormer/IR", "Utils"},
    "Frontend": {"Import", "Dialect/MASFormer/IR",
                 "Dialect/MASFormer/Transforms"},
    "Runtime": set(),
    "Target": {"Runtime", "Utils"},
    "API": {"Frontend", "Import", "Export", "Pipelines", "InitAllPasses",
            "Target", "Runtime", "Dialect/MASFormer/Analysis",
            "Dialect/MASFormer/Transforms",
            "Dialect/MASFormer/IR", "Codegen/Common", "Utils"},
}


def folder(rel):
    parts = rel.split("/")
    if parts[0] == "Dialect":
        return "/".join(parts[:3])
    if parts[0] == "Codegen":
        return "/".join(parts[:2])
    if len(parts) == 1:
        return parts[0].rsplit(".", 1)[0]
    return parts[0]


def has_cycle(graph):
    state = {}

    def visit(n):
        if state.get(n) == 1:
            return True
        if state.get(n) == 2:
            return False
        state[n] = 1
        if any(visit(m) for m in graph.get(n, ())):
            return True
        state[n] = 2
        return False

    return any(visit(n) for n in graph)


def main():
    root = pathlib.Path(sys.argv[1])
    errors = []
    if has_cycle(ALLOWED):
        errors.append("the ALLOWED table has a cycle")
    files = [(p, p.relative_to(root / "lib"))
             for p in (root / "lib").rglob("*") if p.suffix in (".cpp", ".h", ".c")]
    files += [(p, p.relative_to(root / "include" / "masformer"))
              for p in (root / "include" / "masformer").rglob("*")
              if p.suffix in (".h",)]
    for path, rel in files:
        src = folder(str(rel))
        if src not in ALLOWED:
            errors.append(f"{path}: folder '{src}' is not in the layering "
                          "table (docs/design.md)")
            continue
        for m in re.finditer(r'#include "masformer/([^"]+)"',
                             path.read_text()):
            dst = folder(m.group(1))
            if dst != src and dst not in ALLOWED[src]:
                errors.append(f"{path}: {src} may not include {m.group(1)} "
                              f"({dst})")
    for e in errors:
        print(e)
    print(f"layering: {len(files)} files, {len(errors)} violations")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
