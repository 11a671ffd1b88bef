#!/usr/bin/env python3
"""clang's static checks over every source file under src/, from the compile commands of a g++
build (BUILD/compile_commands.json), with clang 16:

  --thread-safety  the thread-safety analysis (-Wthread-safety as errors, -fsyntax-only): data
                   marked GP_GUARDED_BY is touched only under its lock (common/thread_safety.h);
  --tidy           clang-tidy-16 with the checked-in .clang-tidy (every finding an error), and
                   the same thread-safety analysis in the same parse (clang-tidy reports it as
                   clang-diagnostic-thread-safety-*), which is how `make test` runs both.

A unity build's compile commands name its Unity/unity_N_cxx.cxx files; the sources they include
are what is checked. Prints each finding and exits 1 when there is any, 2 when it cannot run. Progress shows on a
terminal only.

    scripts/clang_checks.py --thread-safety|--tidy [BUILD [FILE...]]
        BUILD: default build; FILE: only these sources (e.g. the ones a change touched);
        env CHECK_JOBS: parallel jobs (default: every core)
"""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLANG = "clang++-16"
TIDY = "clang-tidy-16"


def clang_args(entry):
    """The preprocessor and language flags of a g++ compile command, for clang 16."""
    words = shlex.split(entry["command"])
    out = []
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-isystem", "-I", "-D") and i + 1 < len(words):
            out += [w, words[i + 1]]
            i += 2
            continue
        if w.startswith("-std="):
            out.append("-std=gnu++2b")  # clang 16 names C++23 so
        elif w.startswith(("-D", "-I", "-isystem")):
            out.append(w)
        i += 1
    # Boost 1.74 looks for clang's coroutines in <experimental/coroutine>, which libstdc++ lacks;
    # libstdc++ 12 hides std::expected from clang 16 without the __cpp_concepts fix.
    return out + ["-DBOOST_ASIO_HAS_CO_AWAIT", "-DBOOST_ASIO_HAS_STD_COROUTINE",
                  "-U__cpp_concepts", "-D__cpp_concepts=202002L"]


def unity_sources(entry):
    """The sources a CMake unity file (Unity/unity_N_cxx.cxx) includes, or None for a plain one."""
    path = entry["file"]
    if os.sep + "Unity" + os.sep not in path or not os.path.basename(path).startswith("unity_"):
        return None
    with open(path) as f:
        return [line.split('"')[1] for line in f if line.startswith('#include "')]


def check_units(mode, entries, src, only):
    """What to run the tool on: every source under src/ (or only those named). Checking the whole
    tree, both tools take a unity file whole, which parses the shared headers once per batch of
    eight sources instead of once per source (clang-tidy then reports what it finds in the
    included sources as it does in headers: see command()). Named sources are checked one by
    one."""
    units = []
    for e in entries:
        sources = unity_sources(e)
        if sources is None:
            sources = [e["file"]]
        mine = [f for f in sources if f.startswith(src) and (not only or f in only)]
        if not mine:
            continue
        if not only and len(sources) > 1:
            units.append((e, mine))
        else:
            units += [(dict(e, file=f), [f]) for f in mine]
    return units


def command(mode, entry):
    if mode == "--thread-safety":
        return [CLANG, *clang_args(entry), "-fsyntax-only", "-Wno-everything", "-Wthread-safety",
                "-Werror=thread-safety", entry["file"]]
    # The thread-safety analysis rides on clang-tidy's parse: a second parse of every file
    # would cost the tree's header parsing once more.
    checks = "clang-diagnostic-thread-safety*"
    extra = []
    if unity_sources(entry) is not None:
        # A unity file's findings are in the sources it includes, which clang-tidy treats as
        # headers: the filter takes in src/'s sources too. Including .cpp files is what a unity
        # file is for, so that one check is off for it.
        extra = [f"--header-filter={ROOT}/src/.*\\.(h|cpp)$"]
        checks += ",-bugprone-suspicious-include"
    return [TIDY, "--quiet", f"--config-file={ROOT}/.clang-tidy", f"--checks={checks}", *extra,
            entry["file"], "--", *clang_args(entry), "-Wthread-safety"]


def timed_run(cmd, cwd):
    start = time.monotonic()
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return r, time.monotonic() - start


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("--thread-safety", "--tidy"):
        print(__doc__, file=sys.stderr)
        return 2
    mode = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else "build"
    tool = CLANG if mode == "--thread-safety" else TIDY
    db = os.path.join(ROOT, build, "compile_commands.json")
    if not shutil.which(tool):
        print(f"{mode[2:]}: {tool} not found (scripts/setup.sh installs it)", file=sys.stderr)
        return 2
    if not os.path.exists(db):
        print(f"{mode[2:]}: {db} is missing: build the tree first (make build)", file=sys.stderr)
        return 2
    src = os.path.join(ROOT, "src") + os.sep
    only = {os.path.abspath(f) for f in sys.argv[3:]}
    units = check_units(mode, json.load(open(db)), src, only)
    files = sum(len(names) for _, names in units)
    tty = sys.stdout.isatty()
    failures = []
    jobs = int(os.environ.get("CHECK_JOBS", os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(timed_run, command(mode, e), e["directory"]): names
                   for e, names in units}
        done = 0
        took = []
        for f in concurrent.futures.as_completed(futures):
            r, seconds = f.result()
            took.append((seconds, futures[f]))
            done += len(futures[f])
            if r.returncode != 0:
                failures.append((", ".join(os.path.relpath(p, ROOT) for p in futures[f]),
                                 r.stdout + r.stderr))
            if tty:
                print(f"\r{mode[2:]}: {done}/{files} files, {len(failures)} with findings",
                      end="", flush=True)
    if tty:
        print()
    for names, text in sorted(failures):
        print(f"--- {names}\n{text}")
    # The slowest runs, so that a file that starts to cost minutes is seen where it happens.
    for seconds, names in sorted(took, key=lambda t: t[0], reverse=True)[:3]:
        shown = ", ".join(os.path.relpath(p, ROOT) for p in names[:3])
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        print(f"{mode[2:]}: {seconds:.0f} s for {shown}{more}")
    print(f"{mode[2:]}: {files} files checked in {len(units)} runs, {len(failures)} with findings")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
