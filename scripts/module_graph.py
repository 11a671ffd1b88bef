#!/usr/bin/env python3
"""The module graph of src/ and the layering src/layers.txt writes down.

  scripts/module_graph.py           prints each module's layer and what it includes, then every
                                    include that crosses the layering (debt or not)
  scripts/module_graph.py --dot     the graph in Graphviz dot (debt edges dashed, red)
  scripts/module_graph.py --check   exits 1 naming each include that crosses the layering and is
                                    not listed as debt, each debt edge that no longer exists, and
                                    each directory whose SQL statements exceed their ceiling

A module is a directory of src/; an edge is an `#include "<other>/..."` in any of its files, or
a library of another module named in its CMakeLists.txt's target_link_libraries (the build gives a
target the headers of what it links and nothing else, so the two agree once it compiles).
"""
import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SRC = os.path.join(ROOT, "src")  # --src replaces it (the script's own test checks a made-up tree)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"')
SQL = re.compile(r"\btx\.(query_one|query|exec)\(")
TABLE_DEF = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?([a-z_]+)")
TABLE_USE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+([a-z_]+)", re.IGNORECASE)
ADD_LIBRARY = re.compile(r"\badd_library\(\s*(gp_[a-z_]+)")
LINK = re.compile(r"\btarget_link_libraries\(\s*([a-z_]+)([^)]*)\)", re.S)


def parse_layers(path):
    layer, pure, debt, ceilings = {}, set(), {}, {}
    for n, raw in enumerate(open(path), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, rest = line.partition(":")
        key, rest = key.strip(), rest.strip()
        if key.startswith("layer "):
            level = int(key.split()[1])
            for item in rest.split(","):
                words = item.split()
                if not words or len(words) > 2 or (len(words) == 2 and words[1] != "pure"):
                    sys.exit(f"{path}:{n}: expected '<module> [pure]', got '{item.strip()}'")
                if words[0] in layer:
                    sys.exit(f"{path}:{n}: module {words[0]} is in two layers")
                layer[words[0]] = level
                if len(words) == 2:
                    pure.add(words[0])
        elif key == "debt":
            edge, _, why = rest.partition(":")
            a, arrow, b = edge.partition("->")
            if not arrow or not why.strip():
                sys.exit(f"{path}:{n}: expected 'debt: <from> -> <to>: <why>'")
            debt[(a.strip(), b.strip())] = why.strip()
        elif key == "sql-ceiling":
            d, count = rest.split()
            ceilings[d] = int(count)
        else:
            sys.exit(f"{path}:{n}: unknown line '{raw.strip()}'")
    return layer, pure, debt, ceilings


def scan(src):
    """Edges {(from, to): [file:line, ...]} and SQL statements per module ("src/<module>")."""
    edges, sql = defaultdict(list), defaultdict(int)
    for module in sorted(os.listdir(src)):
        d = os.path.join(src, module)
        if not os.path.isdir(d):
            continue
        for dirpath, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(src))
                for n, line in enumerate(open(path, errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if m and m.group(1) != module and os.path.isdir(os.path.join(src, m.group(1))):
                        edges[(module, m.group(1))].append(f"{rel}:{n}")
                    sql[f"src/{module}"] += len(SQL.findall(line))
    modules = sorted(m for m in os.listdir(src) if os.path.isdir(os.path.join(src, m)))
    for (a, b), where in link_edges(src, modules).items():
        edges[(a, b)] += where
    return modules, edges, sql


def link_edges(src, modules):
    """{(from, to): ["src/<from>/CMakeLists.txt:<line>", ...]}: each library of another module a
    module's targets link."""
    cmake = {m: os.path.join(src, m, "CMakeLists.txt") for m in modules}
    texts = {m: open(p).read() for m, p in cmake.items() if os.path.exists(p)}
    owner = {lib: m for m, text in texts.items() for lib in ADD_LIBRARY.findall(text)}
    edges = defaultdict(list)
    for m, text in texts.items():
        for link in LINK.finditer(text):
            line = text.count("\n", 0, link.start()) + 1
            for lib in re.findall(r"\bgp_[a-z_]+", link.group(2)):
                if owner.get(lib, m) != m:
                    edges[(m, owner[lib])].append(f"src/{m}/CMakeLists.txt:{line}")
    return edges


def table_users(src):
    """{table: modules whose SQL names it}, for the tables the migrations create (store's own
    SQL, the migrations and the engines, left out). A rough reading of the SQL text."""
    migrations = os.path.join(src, "store", "migrations.cpp")
    if not os.path.exists(migrations):
        return {}
    tables = set(TABLE_DEF.findall(open(migrations).read()))
    users = defaultdict(set)
    for module in os.listdir(src):
        d = os.path.join(src, module)
        if module == "store" or not os.path.isdir(d):
            continue
        for dirpath, _, files in os.walk(d):
            for f in files:
                if f.endswith(".cpp"):
                    for t in TABLE_USE.findall(open(os.path.join(dirpath, f), errors="replace").read()):
                        if t in tables:
                            users[t].add(module)
    return {t: users.get(t, set()) for t in tables}


def why_crossing(a, b, layer, pure):
    if b == "common":  # everything may use it
        return None
    if layer[b] >= layer[a]:
        return f"{a} (layer {layer[a]}) includes {b} (layer {layer[b]}), not below it"
    if a in pure and b not in pure:
        return f"{a} is pure and includes {b}, which is not"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--dot", action="store_true")
    ap.add_argument("--src", default=SRC, help="the source tree (default: this repository's src/)")
    args = ap.parse_args()
    src = os.path.abspath(args.src)

    layer, pure, debt, ceilings = parse_layers(os.path.join(src, "layers.txt"))
    modules, edges, sql = scan(src)
    problems = [f"src/{m}/ is in no layer of src/layers.txt" for m in modules if m not in layer]
    problems += [f"src/layers.txt names {m}, which is not a directory of src/"
                 for m in layer if m not in modules]
    if problems:
        print("\n".join(problems))
        return 1

    crossing = {e: why_crossing(*e, layer, pure) for e in edges}
    crossing = {e: w for e, w in crossing.items() if w}

    if args.dot:
        print("digraph modules {\n  rankdir=BT;\n  node [shape=box];")
        for level in sorted(set(layer.values())):
            names = " ".join(f'"{m}"' for m in modules if layer[m] == level)
            print(f"  {{ rank=same; {names} }}")
        for (a, b) in sorted(edges):
            if b == "common":
                continue
            style = ' [color=red, style=dashed]' if (a, b) in crossing else ""
            print(f'  "{a}" -> "{b}"{style};')
        print("}")
        return 0

    if not args.check:
        width = max(len(m) for m in modules)
        print(f"{'layer':>5}  {'module':<{width}}  includes (besides common)")
        for m in sorted(modules, key=lambda m: (layer[m], m)):
            deps = sorted(b for (a, b) in edges if a == m and b != "common")
            mark = " pure" if m in pure else ""
            print(f"{layer[m]:>5}  {m:<{width}}  {' '.join(deps) or '-'}{mark and '   (pure)'}")
        print(f"\n{len(modules)} modules, {sum(1 for (a, b) in edges if b != 'common')} edges "
              f"between them (besides common), {len(crossing)} crossing the layering")
        for (a, b), why in sorted(crossing.items()):
            tag = "debt" if (a, b) in debt else "NEW"
            print(f"  [{tag}] {why}: {', '.join(edges[(a, b)][:3])}")
        for d, limit in sorted(ceilings.items()):
            print(f"  SQL statements in {d}: {sql.get(d, 0)} (ceiling {limit}; the goal is 0)")
        users = table_users(src)
        shared = {t: sorted(m) for t, m in users.items() if len(m) > 1}
        if users:
            print(f"\n{len(shared)} of {len(users)} tables are named in the SQL of more than one "
                  "module (the goal is none):")
            for t in sorted(shared):
                print(f"  {t}: {' '.join(shared[t])}")
        return 0

    failures = []
    for (a, b), why in sorted(crossing.items()):
        if (a, b) not in debt:
            failures.append(f"{why}: {', '.join(edges[(a, b)])}")
    for (a, b) in sorted(debt):
        if (a, b) not in crossing:
            failures.append(f"debt {a} -> {b} no longer crosses the layering: strike it from "
                            "src/layers.txt")
    for d, limit in sorted(ceilings.items()):
        n = sql.get(d, 0)
        if n > limit:
            failures.append(f"{d} has {n} SQL statements, more than its ceiling of {limit}: "
                            "call the owning module's functions instead")
        elif n < limit:
            failures.append(f"{d} has {n} SQL statements, fewer than its ceiling of {limit}: "
                            f"lower the ceiling in src/layers.txt to {n}")
    for f in failures:
        print(f"module_graph: {f}")
    if not failures:
        print(f"module_graph: {len(modules)} modules follow src/layers.txt "
              f"({len(debt)} debt edges, SQL ceilings {ceilings})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
