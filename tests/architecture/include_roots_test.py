#!/usr/bin/env python3
"""The build gives a module's targets the headers of the modules they link and no others
(src/CMakeLists.txt, "gp_<module>_headers"): a source file of the pure scheduler, compiled with
its own command from compile_commands.json (the target's first entry: a unity batch in the
release build, a file in others), finds the vocabulary's header and not the store's.

  include_roots_test.py BUILD_DIR"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else "build"


def command_of(target):
    with open(os.path.join(BUILD, "compile_commands.json")) as f:
        for entry in json.load(f):
            if f"/{target}.dir/" in entry.get("output", "") + entry["command"]:
                return entry
    raise AssertionError(f"{target} has no entry in {BUILD}/compile_commands.json")


class IncludeRoots(unittest.TestCase):
    def compile_with_flags_of(self, target, text):
        entry = command_of(target)
        args = shlex.split(entry["command"]) if "command" in entry else entry["arguments"]
        # Keep the compiler and its flags; compile `text` instead of the file, to no output.
        keep, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
                skip = a != "-c"
                continue
            if a == entry["file"] or a in ("-MD", "-MMD"):
                continue
            keep.append(a)
        with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
            f.write(text)
        try:
            return subprocess.run(keep + ["-fsyntax-only", f.name], cwd=entry["directory"],
                                  capture_output=True, text=True)
        finally:
            os.unlink(f.name)

    def test_the_scheduler_sees_what_it_links(self):
        r = self.compile_with_flags_of("gp_sched", '#include "vocab/vocab.h"\n')
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_scheduler_cannot_include_the_store(self):
        r = self.compile_with_flags_of("gp_sched", '#include "store/store.h"\n')
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("store/store.h", r.stderr)

    def test_the_vocabulary_cannot_include_the_scheduler(self):
        r = self.compile_with_flags_of("gp_vocab", '#include "sched/sched.h"\n')
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("sched/sched.h", r.stderr)


if __name__ == "__main__":
    unittest.main()
