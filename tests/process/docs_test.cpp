// Every `gpuplane ...` example in the docs' code blocks runs against a live server (or, for the
// few that start processes, read local files or ask for a password, is checked against the
// binary's own --help), so a doc that stops matching the product fails the build.
//
// An example runs in the order the docs are read (the operator guide first: it makes the tenant
// the others use) against a server with the demo fleet imported. It passes when the CLI accepts
// it (no usage error) and the server accepts its arguments: exit 0, or an HTTP 404/409 that
// placeholder ids (`alc_...`) and the fleet's state explain. A 400, an unknown endpoint or a
// CLI usage error fails it.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "process/process_util.h"

namespace gp::proc {
namespace {

namespace fs = std::filesystem;

struct Example {
  std::string file;
  int line = 0;
  std::string text;                                       // as written, continuations joined
  std::vector<std::string> args;                          // after `gpuplane`
  std::optional<std::string> stdin;                       // a here-string (<<<'...')
  std::map<std::string, std::optional<std::string>> env;  // VAR=value prefixes
};

// Shell words: quotes group, a `#` after blank space starts a comment, `> FILE` is dropped.
std::vector<std::string> shell_words(const std::string& line, std::optional<std::string>* here) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quote) {
      if (ch == quote) {
        quote = 0;
      } else {
        cur += ch;
      }
      continue;
    }
    if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
      continue;
    }
    if (ch == ' ' || ch == '\t') {
      if (in_word) words.push_back(cur);
      cur.clear();
      in_word = false;
      continue;
    }
    if (ch == '#' && !in_word) break;
    cur += ch;
    in_word = true;
  }
  if (in_word) words.push_back(cur);
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == ">" && i + 1 < words.size()) {
      ++i;
    } else if (words[i].starts_with("<<<")) {
      *here = words[i].substr(3) + "\n";
    } else {
      out.push_back(words[i]);
    }
  }
  return out;
}

std::vector<Example> examples_in(const fs::path& path) {
  std::vector<Example> out;
  std::ifstream in(path);
  std::string line, joined;
  bool block = false;
  int n = 0, start = 0;
  static const std::regex kExample(R"(^\s*(\$ )?([A-Z_]+=\S+ )*gpuplane )");
  while (std::getline(in, line)) {
    ++n;
    if (line.starts_with("```")) {
      block = !block;
      joined.clear();
      continue;
    }
    if (!block) continue;
    if (joined.empty()) {
      if (!std::regex_search(line, kExample)) continue;
      start = n;
    }
    joined += line;
    if (!joined.empty() && joined.back() == '\\') {
      joined.pop_back();
      joined += ' ';
      continue;
    }
    Example e{path.filename().string(), start, joined, {}, std::nullopt, {}};
    joined.clear();
    auto words = shell_words(e.text, &e.stdin);
    size_t i = words.empty() || words[0] != "$" ? 0 : 1;
    for (; i < words.size() && words[i].find('=') != std::string::npos; ++i) {
      const auto eq = words[i].find('=');
      e.env[words[i].substr(0, eq)] = words[i].substr(eq + 1);
    }
    if (i >= words.size() || words[i] != "gpuplane") continue;
    e.args.assign(words.begin() + static_cast<long>(i) + 1, words.end());
    // A synopsis ("gpuplane posture TENANT [--json]") is not an example.
    if (std::ranges::any_of(e.args, [](const std::string& w) { return w.starts_with("["); }))
      continue;
    out.push_back(std::move(e));
  }
  return out;
}

// What is only checked against --help, and why.
std::optional<std::string> help_only(const Example& e) {
  const std::string first = e.args.empty() ? "" : e.args[0];
  const std::string two = e.args.size() > 1 ? first + " " + e.args[1] : first;
  if (first == "serve" || first == "agent") return "starts a long-running process";
  if (first == "login" || two == "user set-password") return "asks for a password on a terminal";
  if (first == "backup" || first == "restore" || two == "audit verify" || two == "storage audit")
    return "reads a data directory or a host path of its own";
  if (first == "simulate") return "replays a trace (bench/ and the simulate tests run it)";
  if (two == "job run" || two == "job logs" || two == "vm console")
    return "follows a running workload";
  for (const auto& a : e.args)
    if (a.ends_with(".json") || a.ends_with(".yaml") || a.ends_with(".pub") || a.ends_with(".csv"))
      return "reads a file the example assumes";
  return std::nullopt;
}

// The subcommand's --help, and every --option the example uses found in it.
::testing::AssertionResult matches_help(const Example& e) {
  std::vector<std::string> words;
  for (const auto& a : e.args) {
    if (a.starts_with("-")) break;
    words.push_back(a);
  }
  auto help = words;
  help.push_back("--help");
  auto r = run_gpuplane(help);
  if (r.exit_code != 0)
    return ::testing::AssertionFailure() << "`gpuplane " << fmt::format("{}", fmt::join(help, " "))
                                         << "` exits " << r.exit_code << ": " << r.err;
  for (const auto& a : e.args) {
    if (a == "--") break;
    if (!a.starts_with("--")) continue;
    const std::string flag = a.substr(0, a.find('='));
    if (r.out.find(flag) == std::string::npos)
      return ::testing::AssertionFailure() << flag << " is not an option of `gpuplane "
                                           << fmt::format("{}", fmt::join(words, " ")) << "`";
  }
  return ::testing::AssertionSuccess();
}

// The id a placeholder stands for, from what the examples before it made: `usr_...` is acme's
// bob, `sva_...` a service account of acme, `<id>` the webhook's service account.
std::string resolve(const Server& s, const std::string& word) {
  auto id_of = [&](const std::string& target, const std::string& name) -> std::string {
    auto r = s.admin_request("GET", target);
    if (!r || r->status != 200) return word;
    Json j = Json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return word;
    const Json items = j.contains("items") ? j["items"] : Json::array({j});
    for (const auto& i : items)
      if (i.value("name", i.value("username", "")) == name) return i.value("id", word);
    return word;
  };
  if (word == "usr_...") return id_of("/v1/tenants/acme/users/bob", "bob");
  if (word == "sva_...") {
    (void)s.admin_request("POST", "/v1/tenants/acme/service-accounts", {{"name", "deploy"}});
    return id_of("/v1/tenants/acme/service-accounts", "deploy");
  }
  if (word == "<id>") return id_of("/v1/service-accounts", "cluster-prod-webhook");
  return word;
}

TEST(Docs, EveryCliExampleRunsAgainstALiveServer) {
  if (GP_INSTRUMENTED) GTEST_SKIP() << "the release build runs the docs' examples";
  const char* src = std::getenv("GP_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  const fs::path docs = fs::path(src) / "docs";
  // The order a reader follows: the operator guide makes the tenant and project the rest use.
  std::vector<fs::path> files = {docs / "operator-guide.md", docs / "fleet.md",
                                 docs / "scheduling.md"};
  std::vector<fs::path> rest;
  for (const auto& f : fs::directory_iterator(docs))
    if (f.path().extension() == ".md" && std::ranges::find(files, f.path()) == files.end())
      rest.push_back(f.path());
  std::ranges::sort(rest);
  files.insert(files.end(), rest.begin(), rest.end());
  files.push_back(fs::path(src) / "README.md");

  TempDir tmp;
  Server server(tmp.path() / "data");
  ASSERT_TRUE(server.start());
  Json nodes = Json::array();
  for (const auto& f : fs::directory_iterator(fs::path(src) / "deploy" / "demo")) {
    Json inv = Json::parse(read_file(f.path()), nullptr, false);
    ASSERT_FALSE(inv.is_discarded()) << f.path();
    inv.erase("samples");  // what the simulated agent reports with its heartbeats
    nodes.push_back({{"inventory", inv}});
  }
  auto imported = server.admin_request("POST", "/v1/fleet/import", {{"nodes", nodes}});
  ASSERT_TRUE(imported && imported->status == 201) << (imported ? imported->body : "");
  // Files an example writes (fleet.svg) land in the test's directory.
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.path());

  int ran = 0, checked = 0;
  for (const auto& f : files) {
    for (Example& e : examples_in(f)) {
      SCOPED_TRACE(fmt::format("{}:{}: {}", e.file, e.line, e.text));
      if (help_only(e)) {
        EXPECT_TRUE(matches_help(e)) << "(checked against --help: " << *help_only(e) << ")";
        ++checked;
        continue;
      }
      e.env.try_emplace("GPUPLANE_ENDPOINT", server.endpoint());
      e.env.try_emplace("GPUPLANE_TOKEN", server.admin().api_key);
      // A placeholder token in the example (`key_...`) is the admin's here.
      if (e.env["GPUPLANE_TOKEN"]->ends_with("..."))
        e.env["GPUPLANE_TOKEN"] = server.admin().api_key;
      for (auto& a : e.args) a = resolve(server, a);
      auto r = run_gpuplane(e.args, e.env, e.stdin);
      ++ran;
      if (r.exit_code == 0) continue;
      const bool state = r.err.find("HTTP 404") != std::string::npos ||
                         r.err.find("HTTP 409") != std::string::npos;
      const bool no_route = r.err.find("no such endpoint") != std::string::npos;
      EXPECT_TRUE(r.exit_code == 1 && state && !no_route)
          << "exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err;
    }
  }
  fs::current_path(cwd);
  std::cout << "[ docs     ] " << ran << " examples ran against the server, " << checked
            << " checked against --help\n";
  EXPECT_GE(ran, 40) << "the docs' examples were not found";
  EXPECT_TRUE(server.terminate() == 0) << server.log();
}

}  // namespace
}  // namespace gp::proc
