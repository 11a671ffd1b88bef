#!/usr/bin/env python3
"""The module graph of src/ and the layering src/layers.txt writes down.

  scripts/module_graph.py           prints each module's layer and what it includes, then every
                                    include that crosses the layering (debt or not)
  scripts/module_graph.py --dot     the graph in Graphviz dot (debt edges dashed, red)
  scripts/module_graph.py --check   exits 1 naming each include that crosses the layering and is
                                    not listed as debt, each debt edge that no longer exists,
                                    each directory whose SQL statements exceed their ceiling,
                                    each table without one owner or named by another module's
                                    SQL (unless listed as table debt), and each read of the wall
                                    clock or the system random source outside the environment
                                    (common/env.h)

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
# Reading the wall clock or the system random source directly; only the files that implement the
# environment's system sources (env-source in layers.txt) may.
ENV_READ = re.compile(r"\bsystem_clock::now\b|\bRAND_(?:priv_)?bytes\b|\brandom_device\b|"
                      r"\bgetrandom\s*\(|/dev/u?random|\btime\(\s*(?:nullptr|NULL|0)\s*\)|"
                      r"\bgettimeofday\s*\(|\bCLOCK_REALTIME\b|\brandom_bytes\s*\(")
# Naming the system environment itself; only the composition root (env-root) and the sources may.
ENV_MAKE = re.compile(r"\b(?:system_env|system_random|host_root)\s*\(|"
                      r"\b(?:SystemClock|SystemRandom|RandomIdSource)\b")
ADD_LIBRARY = re.compile(r"\badd_library\(\s*(gp_[a-z_]+)")
LINK = re.compile(r"\btarget_link_libraries\(\s*([a-z_]+)([^)]*)\)", re.S)


def parse_layers(path):
    layer, pure, debt, ceilings, env = {}, set(), {}, {}, {"source": set(), "root": set()}
    tables = {"owner": defaultdict(list), "debt": {}}
    lines, last_key = [], None
    for n, raw in enumerate(open(path), 1):  # an indented line continues a `tables` line
        line = raw.split("#", 1)[0]
        if line.strip() and line[0] in " \t" and lines and lines[-1][1].startswith("tables "):
            lines[-1] = (lines[-1][0], lines[-1][1] + " " + line.strip(), lines[-1][2])
        elif line.strip():
            lines.append((n, line.strip(), raw))
    for n, line, raw in lines:
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
        elif key in ("env-source", "env-root"):
            env[key[4:]].update(rest.split())
        elif key.startswith("tables "):
            for t in (t.strip() for t in rest.split(",")):
                if t:
                    tables["owner"][t].append(key.split()[1])
        elif key == "table-debt":
            what, _, why = rest.partition(":")
            if len(what.split()) != 2 or not why.strip():
                sys.exit(f"{path}:{n}: expected 'table-debt: <table> <module>: <why>'")
            tables["debt"][tuple(what.split())] = why.strip()
        else:
            sys.exit(f"{path}:{n}: unknown line '{raw.strip()}'")
    return layer, pure, debt, ceilings, env, tables


def scan(src, env):
    """Edges {(from, to): [file:line, ...]}, SQL statements per module ("src/<module>"), and the
    reads of the environment that bypass it (["src/<file>:<line>: <what>", ...])."""
    edges, sql, bypass = defaultdict(list), defaultdict(int), []
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
                inside = os.path.relpath(path, src)
                source = inside in env["source"]
                for n, line in enumerate(open(path, errors="replace"), 1):
                    code = line.split("//", 1)[0]
                    if not source:
                        for hit in ENV_READ.findall(code):
                            bypass.append(f"{rel}:{n}: reads {hit.strip()} directly: take it from "
                                          "the Env the code is given (common/env.h)")
                        if module not in env["root"]:
                            for hit in ENV_MAKE.findall(code):
                                bypass.append(f"{rel}:{n}: names {hit.strip(' (')} outside the "
                                              "composition root: take the Env the code is given")
                    m = INCLUDE.match(line)
                    if m and m.group(1) != module and os.path.isdir(os.path.join(src, m.group(1))):
                        edges[(module, m.group(1))].append(f"{rel}:{n}")
                    sql[f"src/{module}"] += len(SQL.findall(line))
    modules = sorted(m for m in os.listdir(src) if os.path.isdir(os.path.join(src, m)))
    for (a, b), where in link_edges(src, modules).items():
        edges[(a, b)] += where
    return modules, edges, sql, bypass


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
    """{table: {module: ["src/<file>:<line>", ...]}} for the tables the migrations create, the
    modules whose SQL names them (store's own SQL, the migrations and the engines, left out). A
    rough reading of the SQL text."""
    migrations = os.path.join(src, "store", "migrations.cpp")
    if not os.path.exists(migrations):
        return {}
    tables = set(TABLE_DEF.findall(open(migrations).read()))
    users = defaultdict(lambda: defaultdict(list))
    for module in sorted(os.listdir(src)):
        d = os.path.join(src, module)
        if module == "store" or not os.path.isdir(d):
            continue
        for dirpath, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith(".cpp"):
                    path = os.path.join(dirpath, f)
                    rel = os.path.relpath(path, os.path.dirname(src))
                    for n, line in enumerate(open(path, errors="replace"), 1):
                        for t in TABLE_USE.findall(line):
                            if t in tables:
                                users[t][module].append(f"{rel}:{n}")
    return {t: users.get(t, {}) for t in tables}


def table_problems(src, tables):
    """The tables without exactly one owner, SQL naming another module's table that is not
    listed as table debt, and table debt that was paid; and the debt still owed."""
    users = table_users(src)
    owner, debt = tables["owner"], tables["debt"]
    problems, owed = [], []
    if not users:
        return problems, owed
    for t in sorted(users):
        if len(owner.get(t, [])) != 1:
            problems.append(f"table {t} has {len(owner.get(t, [])) or 'no'} owners "
                            f"{' '.join(owner.get(t, []))}: give it one in src/layers.txt")
            continue
        for m, where in sorted(users[t].items()):
            if m == owner[t][0]:
                continue
            if (t, m) in debt:
                owed.append(f"{t} in {m} (owner {owner[t][0]}): {', '.join(where[:3])}")
            else:
                problems.append(f"{m} names table {t}, which {owner[t][0]} owns: call "
                                f"{owner[t][0]}'s functions instead ({', '.join(where)})")
    for t in sorted(set(owner) - set(users)):
        problems.append(f"src/layers.txt names table {t}, which the migrations do not create")
    for (t, m) in sorted(debt):
        if m not in users.get(t, {}):
            problems.append(f"table-debt {t} {m} is paid ({m} no longer names {t}): strike it "
                            "from src/layers.txt")
    return problems, owed


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

    layer, pure, debt, ceilings, env, tables = parse_layers(os.path.join(src, "layers.txt"))
    modules, edges, sql, bypass = scan(src, env)
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
        print(f"  reads of the clock or the random source outside the environment: {len(bypass)}")
        for b in bypass:
            print(f"    {b}")
        users = table_users(src)
        problems, owed = table_problems(src, tables)
        if users:
            shared = sorted(t for t, m in users.items() if len(m) > 1)
            print(f"\n{len(shared)} of {len(users)} tables are named in the SQL of more than one "
                  f"module (the goal is none); {len(owed)} table debts:")
            for o in owed:
                print(f"  {o}")
            for p in problems:
                print(f"  [NEW] {p}")
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
    failures += bypass
    failures += table_problems(src, tables)[0]
    for f in failures:
        print(f"module_graph: {f}")
    if not failures:
        print(f"module_graph: {len(modules)} modules follow src/layers.txt "
              f"({len(debt)} debt edges, {len(tables['debt'])} table debts, "
              f"SQL ceilings {ceilings})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
