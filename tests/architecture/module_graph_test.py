#!/usr/bin/env python3
"""scripts/module_graph.py --check against made-up source trees: it passes a tree that follows
its layers, and fails, naming the file and line, on each way a tree can break them."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "module_graph.py")

LAYERS = """layer 0: common, store
layer 1: core pure
layer 2: service
layer 3: api
debt: service -> api: kept for the test
sql-ceiling: src/api 1
env-source: common/env.cpp
env-root: api
tables service: things,
  others
"""


class ModuleGraphCheck(unittest.TestCase):
    def tree(self, files, layers=LAYERS):
        root = tempfile.mkdtemp()
        src = os.path.join(root, "src")
        os.makedirs(src)
        with open(os.path.join(src, "layers.txt"), "w") as f:
            f.write(layers)
        for m in ("common", "core", "store", "service", "api"):
            os.makedirs(os.path.join(src, m))
        for path, text in files.items():
            with open(os.path.join(src, path), "w") as f:
                f.write(text)
        return src

    def check(self, src):
        r = subprocess.run([sys.executable, SCRIPT, "--check", "--src", src],
                           capture_output=True, text=True)
        return r.returncode, r.stdout

    def following(self):
        return {
            "core/core.h": '#include "common/x.h"\n',
            "store/store.h": '#include "common/x.h"\n',
            "service/service.cpp": '#include "store/store.h"\n#include "core/core.h"\n'
                                   '#include "api/api.h"\n',
            "api/api.cpp": '#include "service/service.h"\nvoid f() { tx.query("SELECT 1"); }\n',
            "store/migrations.cpp": "CREATE TABLE things (id TEXT);\nCREATE TABLE others (x INT);\n",
            "service/things.cpp": 'void t() { tx.exec("INSERT INTO things VALUES (1)"); }\n',
        }

    def test_a_tree_that_follows_its_layers_passes(self):
        rc, out = self.check(self.tree(self.following()))
        self.assertEqual(rc, 0, out)

    def test_an_include_of_a_higher_layer_fails_naming_file_and_line(self):
        files = self.following()
        files["store/store.h"] += '#include "service/service.h"\n'
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 1)
        self.assertIn("store (layer 0) includes service (layer 2)", out)
        self.assertIn("src/store/store.h:2", out)

    def test_a_pure_module_including_an_impure_one_fails(self):
        files = self.following()
        files["core/core.h"] += '#include "store/store.h"\n'
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 1)
        self.assertIn("core is pure and includes store", out)

    def test_debt_that_was_paid_must_be_struck(self):
        files = self.following()
        files["service/service.cpp"] = '#include "store/store.h"\n'
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 1)
        self.assertIn("debt service -> api no longer crosses", out)

    def test_sql_beyond_its_ceiling_fails_and_below_it_asks_to_lower_it(self):
        files = self.following()
        files["api/more.cpp"] = 'void g() { tx.exec("DELETE FROM t"); }\n'
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 1)
        self.assertIn("src/api has 2 SQL statements, more than its ceiling of 1", out)
        files = self.following()
        files["api/api.cpp"] = '#include "service/service.h"\n'
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 1)
        self.assertIn("lower the ceiling in src/layers.txt to 0", out)

    def test_a_link_to_a_higher_layer_fails_naming_the_cmake_file(self):
        files = self.following()
        files["service/CMakeLists.txt"] = "add_library(gp_service service.cpp)\n"
        files["store/CMakeLists.txt"] = ("add_library(gp_store store.cpp)\n"
                                         "target_link_libraries(gp_store PUBLIC gp_common\n"
                                         "  gp_service fmt::fmt)\n")
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 1)
        self.assertIn("store (layer 0) includes service (layer 2)", out)
        self.assertIn("src/store/CMakeLists.txt:2", out)

    def test_a_direct_read_of_the_clock_or_random_source_fails_naming_file_and_line(self):
        for read in ("std::chrono::system_clock::now()", "RAND_bytes(p, 8)", "std::random_device r",
                     "random_bytes(16)", "::time(nullptr)"):
            files = self.following()
            files["common/env.cpp"] = "auto t = std::chrono::system_clock::now();\n"  # a source
            files["service/service.cpp"] += f"// {read} in a comment is fine\nvoid h() {{ {read}; }}\n"
            rc, out = self.check(self.tree(files))
            self.assertEqual(rc, 1, read)
            self.assertIn("src/service/service.cpp:5: reads", out)
            self.assertNotIn("service.cpp:4", out)
            self.assertNotIn("common/env.cpp", out)

    def test_the_system_environment_is_named_only_in_the_composition_root(self):
        files = self.following()
        files["api/main.cpp"] = "Env env = system_env(); SystemClock c;\n"
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 0, out)
        files["service/service.cpp"] += "void k() { SystemClock clock; }\n"
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 1)
        self.assertIn("src/service/service.cpp:4: names SystemClock outside the composition root", out)

    def test_sql_naming_another_modules_table_fails_unless_it_is_listed_as_debt(self):
        files = self.following()
        files["api/api.cpp"] = ('#include "service/service.h"\n'
                                'void f() { tx.query("SELECT id FROM things"); }\n')
        rc, out = self.check(self.tree(files))
        self.assertEqual(rc, 1)
        self.assertIn("api names table things, which service owns", out)
        self.assertIn("src/api/api.cpp:2", out)
        rc, out = self.check(self.tree(files, LAYERS + "table-debt: things api: into service\n"))
        self.assertEqual(rc, 0, out)

    def test_paid_table_debt_must_be_struck_and_every_table_needs_one_owner(self):
        rc, out = self.check(self.tree(self.following(),
                                       LAYERS + "table-debt: things api: into service\n"))
        self.assertEqual(rc, 1)
        self.assertIn("table-debt things api is paid", out)
        rc, out = self.check(self.tree(self.following(), LAYERS.replace(",\n  others", "")))
        self.assertEqual(rc, 1)
        self.assertIn("table others has no owners", out)
        rc, out = self.check(self.tree(self.following(), LAYERS + "tables api: things\n"))
        self.assertEqual(rc, 1)
        self.assertIn("table things has 2 owners service api", out)

    def test_a_module_in_no_layer_fails(self):
        src = self.tree(self.following())
        os.makedirs(os.path.join(src, "stray"))
        rc, out = self.check(src)
        self.assertEqual(rc, 1)
        self.assertIn("src/stray/ is in no layer", out)


if __name__ == "__main__":
    unittest.main()
