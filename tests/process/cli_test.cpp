// The CLI end to end: the real binary against a real server, configured the ways a user would
// (GPUPLANE_ENDPOINT/GPUPLANE_TOKEN, flags, or the config file `login` writes). Reads as a
// transcript of one tenant's onboarding.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "process/process_util.h"
#include "store/store.h"

namespace gp::proc {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// A failed command: exit code 1 and exactly one line on stderr, starting "error: ".
::testing::AssertionResult fails_with(const RunResult& r, std::string_view fragment) {
  auto err = lines(r.err);
  if (r.exit_code != 1)
    return ::testing::AssertionFailure()
           << "exit code " << r.exit_code << ", want 1; stderr: " << r.err;
  if (err.size() != 1 || !err[0].starts_with("error: "))
    return ::testing::AssertionFailure() << "want one 'error: ...' line on stderr, got: " << r.err;
  if (!contains(err[0], fragment))
    return ::testing::AssertionFailure() << "stderr lacks '" << fragment << "': " << r.err;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult succeeds(const RunResult& r) {
  if (r.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "exit code " << r.exit_code << (r.timed_out ? " (timed out)" : "")
         << "\nstdout: " << r.out << "\nstderr: " << r.err;
}

Json parse(const RunResult& r) {
  Json j = Json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
  return j.is_discarded() ? Json::object() : j;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start()); }
  void TearDown() override { EXPECT_EQ(server_.terminate(), 0) << server_.log(); }

  // The platform admin, configured through the environment.
  RunResult admin(const std::vector<std::string>& args,
                  std::optional<std::string> stdin_data = std::nullopt) {
    return run_gpuplane(
        args,
        {{"GPUPLANE_ENDPOINT", server_.endpoint()}, {"GPUPLANE_TOKEN", server_.admin().api_key}},
        std::move(stdin_data));
  }

  // Publishes the rate card `default` (H200 at 3.50 an hour) through the CLI.
  RunResult publish_default_card(const std::string& currency) {
    const fs::path card = tmp_.path() / "card.json";
    std::ofstream(card)
        << Json{{"id", "default"},
                {"currency", currency},
                {"effective_from", "2020-01-01T00:00:00Z"},
                {"prices", {{{"resource_key", "gpu/H200"}, {"unit_price_micros", 3'500'000}}}}}
               .dump();
    return admin({"ratecard", "create", card.string()});
  }

  TempDir tmp_;
  Server server_{tmp_.path() / "data"};
};

TEST_F(Cli, OnboardsATenantEndToEnd) {
  // A tenant with a class and a first admin.
  auto created = admin({"tenant", "create", "acme", "--class", "sensitive", "--admin", "alice"});
  ASSERT_TRUE(succeeds(created));
  EXPECT_TRUE(contains(created.out, "acme")) << created.out;

  auto tenants = admin({"-o", "json", "tenant", "list"});
  ASSERT_TRUE(succeeds(tenants));
  Json acme, listed = parse(tenants);
  for (const auto& t : listed["items"])
    if (t["name"] == "acme") acme = t;
  ASSERT_TRUE(acme.is_object()) << tenants.out;
  EXPECT_EQ(acme["isolation_class"], std::string("sensitive")) << "--class was not sent";
  EXPECT_EQ(acme["state"], std::string("active"));
  auto alice = server_.admin_request("GET", "/v1/tenants/acme/users/alice");
  ASSERT_TRUE(alice);
  EXPECT_EQ(alice->status, 200) << "--admin alice was not created: " << alice->body;

  // A project, listed as a table.
  ASSERT_TRUE(succeeds(admin({"project", "create", "ml", "--tenant", "acme"})));
  auto projects = admin({"project", "list", "--tenant", "acme"});
  ASSERT_TRUE(succeeds(projects));
  auto rows = lines(projects.out);
  ASSERT_EQ(rows.size(), 2u) << projects.out;
  EXPECT_TRUE(rows[0].starts_with("ID")) << rows[0];
  EXPECT_TRUE(contains(rows[1], " ml ")) << rows[1];

  // A user whose initial password comes from stdin.
  const std::string password = "bob-secret-password-42";
  auto bob = admin({"-o", "json", "user", "create", "bob", "--tenant", "acme", "--password-stdin"},
                   password + "\n");
  ASSERT_TRUE(succeeds(bob));
  std::string bob_id = parse(bob).value("id", "");
  ASSERT_TRUE(bob_id.starts_with("usr_")) << bob.out;
  EXPECT_FALSE(contains(bob.out, password));

  // bob logs in; the session token goes to a private config file, which alone is enough after.
  fs::path config = tmp_.path() / "bob" / "config.json";
  auto login = run_gpuplane(
      {"login", "-u", "acme/bob", "--password-stdin"},
      {{"GPUPLANE_CONFIG", config.string()}, {"GPUPLANE_ENDPOINT", server_.endpoint()}},
      password + "\n");
  ASSERT_TRUE(succeeds(login));
  EXPECT_TRUE(contains(login.out, "logged in as acme/bob")) << login.out;
  struct stat st {};
  ASSERT_EQ(::stat(config.c_str(), &st), 0) << "no config file at " << config;
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
  Json saved = Json::parse(read_file(config), nullptr, false);
  EXPECT_EQ(saved.value("endpoint", ""), server_.endpoint());
  EXPECT_FALSE(saved.value("token", "").empty()) << saved.dump();

  auto as_bob = [&](const std::vector<std::string>& args) {
    return run_gpuplane(args, {{"GPUPLANE_CONFIG", config.string()}});
  };
  auto whoami = as_bob({"-o", "json", "whoami"});
  ASSERT_TRUE(succeeds(whoami));
  EXPECT_EQ(parse(whoami).value("id", ""), bob_id) << whoami.out;

  // bob makes himself an API key; its secret is shown once, with a warning.
  auto key = as_bob({"-o", "json", "api-key", "create", "--tenant", "acme"});
  ASSERT_TRUE(succeeds(key));
  std::string token = parse(key).value("token", "");
  EXPECT_TRUE(token.starts_with("key_")) << key.out;
  EXPECT_TRUE(contains(key.err, "shown only once")) << key.err;
  auto by_key = run_gpuplane({"--endpoint", server_.endpoint(), "--token", token, "whoami"});
  ASSERT_TRUE(succeeds(by_key));
  EXPECT_TRUE(contains(by_key.out, bob_id)) << by_key.out;

  // bob becomes a member of project ml.
  auto binding =
      admin({"-o", "json", "role-binding", "create", "--tenant", "acme", "--role", "project-member",
             "--subject-kind", "user", "--subject-id", bob_id, "--project", "ml"});
  ASSERT_TRUE(succeeds(binding));
  Json b = parse(binding);
  EXPECT_EQ(b.value("role", ""), "project-member") << binding.out;
  EXPECT_EQ(b.value("subject_id", ""), bob_id) << binding.out;
  EXPECT_TRUE(b.value("project_id", "").starts_with("prj_")) << binding.out;
  auto roles = as_bob({"-o", "json", "whoami"});
  ASSERT_TRUE(succeeds(roles));
  EXPECT_TRUE(contains(roles.out, "project-member")) << roles.out;

  // Suspension, with the flags instead of the environment; nothing more can be created.
  auto suspend = run_gpuplane({"--endpoint", server_.endpoint(), "--token", server_.admin().api_key,
                               "tenant", "suspend", "acme"});
  ASSERT_TRUE(succeeds(suspend));
  EXPECT_TRUE(contains(suspend.out, "suspended")) << suspend.out;
  auto refused = admin({"project", "create", "ml2", "--tenant", "acme"});
  EXPECT_TRUE(fails_with(refused, "tenant_suspended"));
  EXPECT_TRUE(refused.out.empty()) << refused.out;

  // The trail shows all of it.
  auto audit = admin({"audit", "list", "--limit", "1000"});
  ASSERT_TRUE(succeeds(audit));
  EXPECT_TRUE(audit.out.starts_with("SEQ")) << audit.out;
  for (std::string_view action :
       {"tenant.create", "project.create", "user.create", "session.create", "api_key.create",
        "role_binding.create", "tenant.update"})
    EXPECT_TRUE(contains(audit.out, action)) << action << " missing from:\n" << audit.out;
  EXPECT_TRUE(contains(audit.out, "denied")) << "the suspended create is not audited";
}

// A new tenant's first admin gets a key on a line of its own, sets a password with it and logs
// in; offboarding is confirmed, says what it did, and happens once.
TEST_F(Cli, TheFirstAdminLogsInAndOffboardingIsConfirmedAndFinal) {
  auto created = admin({"tenant", "create", "acme", "--admin", "alice"});
  ASSERT_TRUE(succeeds(created));
  // No card is published yet: the account says its usage cannot be invoiced.
  auto unpriced = admin({"billing-account", "get", "acme"});
  ASSERT_TRUE(succeeds(unpriced));
  EXPECT_TRUE(contains(unpriced.out, "cannot be invoiced")) << unpriced.out;
  // A published default card, so offboarding drafts the final invoice.
  ASSERT_TRUE(succeeds(publish_default_card("USD")));
  auto priced = admin({"-o", "json", "billing-account", "get", "acme"});
  ASSERT_TRUE(succeeds(priced));
  EXPECT_EQ(parse(priced).value("rate_card_in_force", false), true) << priced.out;
  std::string key;
  for (const auto& line : lines(created.out))
    if (line.starts_with("key_")) key = line;
  ASSERT_FALSE(key.empty()) << "no line holds the key alone:\n" << created.out;
  EXPECT_TRUE(contains(created.out, "first admin acme/alice")) << created.out;
  EXPECT_TRUE(contains(created.err, "shown only once")) << created.err;
  EXPECT_TRUE(contains(created.err, "gpuplane user set-password alice --tenant acme"))
      << created.err;

  const std::string password = "alice-first-password-7";
  auto as_key = [&](const std::vector<std::string>& args, std::optional<std::string> in) {
    return run_gpuplane(args, {{"GPUPLANE_ENDPOINT", server_.endpoint()}, {"GPUPLANE_TOKEN", key}},
                        std::move(in));
  };
  // Without a terminal the password must come through --password-stdin: nothing is guessed.
  auto no_tty = as_key({"user", "set-password", "alice", "--tenant", "acme"}, password + "\n");
  EXPECT_EQ(no_tty.exit_code, 2) << no_tty.err;
  EXPECT_TRUE(contains(no_tty.err, "--password-stdin")) << no_tty.err;
  auto set = as_key({"user", "set-password", "alice", "--tenant", "acme", "--password-stdin"},
                    password + "\n");
  ASSERT_TRUE(succeeds(set));
  EXPECT_TRUE(contains(set.out, "password set for acme/alice")) << set.out;

  const fs::path config = tmp_.path() / "alice" / "config.json";
  const std::map<std::string, std::optional<std::string>> alice_env = {
      {"GPUPLANE_CONFIG", config.string()}, {"GPUPLANE_ENDPOINT", server_.endpoint()}};
  auto blind = run_gpuplane({"login", "-u", "acme/alice"}, alice_env, "");
  EXPECT_EQ(blind.exit_code, 2) << "a login without a terminal must not send an empty password";
  EXPECT_TRUE(contains(blind.err, "not a terminal")) << blind.err;
  auto login =
      run_gpuplane({"login", "-u", "acme/alice", "--password-stdin"}, alice_env, password + "\n");
  ASSERT_TRUE(succeeds(login));
  EXPECT_TRUE(contains(login.out, "logged in as acme/alice")) << login.out;

  // Offboarding cannot be undone: without a terminal to confirm it, --yes is required.
  auto unconfirmed = admin({"tenant", "delete", "acme"});
  EXPECT_EQ(unconfirmed.exit_code, 2);
  EXPECT_TRUE(contains(unconfirmed.err, "--yes")) << unconfirmed.err;
  auto still = server_.admin_request("GET", "/v1/tenants/acme");
  ASSERT_TRUE(still);
  EXPECT_TRUE(contains(still->body, "\"active\"")) << still->body;

  auto deleted = admin({"tenant", "delete", "acme", "--yes"});
  ASSERT_TRUE(succeeds(deleted));
  for (std::string_view said : {"tenant acme", "is offboarding", "credentials", "revoked",
                                "0 released", "data keys", "destroyed", "final invoice"})
    EXPECT_TRUE(contains(deleted.out, said)) << said << " missing from:\n" << deleted.out;
  EXPECT_TRUE(fails_with(admin({"tenant", "delete", "acme", "--yes"}), "already offboarding"));
  EXPECT_TRUE(fails_with(admin({"tenant", "resume", "acme"}), "offboarding is final"));
  EXPECT_TRUE(fails_with(as_key({"whoami"}, std::nullopt), "HTTP 401"));

  // The final invoice is a draft, and verify checks it as it was rated, in its currency.
  auto listed = admin({"-o", "json", "invoice", "list", "acme"});
  ASSERT_TRUE(succeeds(listed));
  const Json invoices = parse(listed);
  ASSERT_EQ(invoices["items"].size(), 1u) << listed.out << deleted.out;
  auto verified = admin({"invoice", "verify", "acme", invoices["items"][0].value("id", "")});
  ASSERT_TRUE(succeeds(verified));
  EXPECT_TRUE(contains(verified.out, "matches raw usage")) << verified.out;
  EXPECT_TRUE(contains(verified.out, "subtotal (USD)")) << verified.out;
  EXPECT_FALSE(contains(verified.out, "_micros")) << verified.out;
}

TEST_F(Cli, FailuresExitOneWithOneErrorLine) {
  auto bad_token = run_gpuplane(
      {"--endpoint", server_.endpoint(), "--token", "key_not_a_real_key", "tenant", "list"});
  EXPECT_TRUE(fails_with(bad_token, "HTTP 401"));

  EXPECT_TRUE(fails_with(admin({"tenant", "get", "no-such-tenant"}), "HTTP 404"));
  EXPECT_TRUE(fails_with(admin({"tenant", "create", "Not_A_Dns_Label"}), "HTTP 400"));

  // Nothing listens on port 1.
  auto unreachable =
      run_gpuplane({"--endpoint", "http://127.0.0.1:1", "--token", "x", "tenant", "list"});
  EXPECT_TRUE(fails_with(unreachable, "cannot reach 127.0.0.1:1"));

  // A config file that cannot be written (its directory is a regular file) is an error too,
  // not a crash.
  fs::path not_a_dir = tmp_.path() / "not-a-dir";
  std::ofstream(not_a_dir) << "x";
  auto unwritable = run_gpuplane({"login", "-u", server_.admin().username, "--password-stdin"},
                                 {{"GPUPLANE_CONFIG", (not_a_dir / "config.json").string()},
                                  {"GPUPLANE_ENDPOINT", server_.endpoint()}},
                                 server_.admin().password + "\n");
  EXPECT_TRUE(fails_with(unwritable, not_a_dir.string()));

  // Without any token the error comes with a hint on what to do.
  auto anonymous = run_gpuplane({"--endpoint", server_.endpoint(), "tenant", "list"});
  EXPECT_EQ(anonymous.exit_code, 1);
  auto err = lines(anonymous.err);
  ASSERT_EQ(err.size(), 2u) << anonymous.err;
  EXPECT_TRUE(err[0].starts_with("error: ")) << err[0];
  EXPECT_TRUE(err[1].starts_with("hint: ")) << err[1];
}

// `node drain --deadline` says when what still runs is evicted; a deadline that is no duration
// is refused before anything is sent.
TEST_F(Cli, ADrainWithADeadlineSaysWhenWorkIsEvicted) {
  Json inv = {{"node", {{"name", "n1"}, {"cpu_millis", 1000}, {"memory_bytes", 1 << 30}}},
              {"gpus", Json::array()}};
  auto imported =
      server_.admin_request("POST", "/v1/fleet/import", {{"nodes", {{{"inventory", inv}}}}});
  ASSERT_TRUE(imported && imported->status == 201) << (imported ? imported->body : "");
  EXPECT_TRUE(fails_with(admin({"node", "drain", "n1", "--deadline", "soon"}), "--deadline"));
  auto drained = admin({"node", "drain", "n1", "--deadline", "30m", "--reason", "BIOS"});
  ASSERT_TRUE(succeeds(drained));
  // Nothing runs there: drained at once, and the deadline went with the drain.
  EXPECT_TRUE(contains(drained.out, "node n1: maintenance")) << drained.out;
  // Only a drain takes one: anything else is a usage error.
  auto cordon = admin({"node", "cordon", "n1", "--deadline", "30m"});
  EXPECT_NE(cordon.exit_code, 0);
  EXPECT_TRUE(contains(cordon.err, "--deadline")) << cordon.err;
}

// Budgets and the billing account are set in currency units and percent, and shown the same
// way, money with its currency; JSON keeps the API's micro-units and basis points.
TEST_F(Cli, BudgetsReadInTheUnitsTheyAreSetIn) {
  ASSERT_TRUE(succeeds(admin({"tenant", "create", "acme"})));
  ASSERT_TRUE(succeeds(admin({"project", "create", "ml", "--tenant", "acme"})));
  ASSERT_TRUE(succeeds(publish_default_card("EUR")));
  auto set = admin({"budget", "set", "acme", "ml", "--amount", "250", "--thresholds", "50,80.5"});
  ASSERT_TRUE(succeeds(set));
  EXPECT_TRUE(contains(set.out, "250.00 EUR")) << set.out;
  EXPECT_TRUE(contains(set.out, "50%, 80.5%")) << set.out;
  EXPECT_FALSE(contains(set.out, "micros")) << set.out;
  ASSERT_TRUE(succeeds(admin({"budget", "set", "acme", "--amount", "1000.5"})));
  auto list = admin({"budget", "list", "acme"});
  ASSERT_TRUE(succeeds(list));
  auto rows = lines(list.out);
  ASSERT_EQ(rows.size(), 3u) << list.out;
  EXPECT_TRUE(rows[0].starts_with("PROJECT")) << rows[0];
  EXPECT_TRUE(contains(rows[0], "HARD STOP")) << rows[0];
  EXPECT_TRUE(contains(list.out, "(whole tenant)")) << list.out;
  EXPECT_TRUE(contains(list.out, "1000.50 EUR")) << list.out;
  EXPECT_TRUE(contains(list.out, "0.00 EUR")) << list.out;
  EXPECT_TRUE(contains(list.out, "ml ")) << list.out;
  auto json = admin({"-o", "json", "budget", "get", "acme", "ml"});
  ASSERT_TRUE(succeeds(json));
  EXPECT_EQ(parse(json).value("amount_micros", 0), 250'000'000) << json.out;
  EXPECT_EQ(parse(json)["thresholds_bps"], Json::parse("[5000, 8050]")) << json.out;
  EXPECT_EQ(parse(json).value("project", ""), "ml") << json.out;

  // The billing account too: tax in percent, prepaid credit in the card's currency.
  auto account = admin({"billing-account", "set", "acme", "--tax", "8.25", "--prepaid", "500"});
  ASSERT_TRUE(succeeds(account));
  EXPECT_TRUE(contains(account.out, "8.25%")) << account.out;
  EXPECT_TRUE(contains(account.out, "500.00 EUR")) << account.out;
  auto stored = admin({"-o", "json", "billing-account", "get", "acme"});
  ASSERT_TRUE(succeeds(stored));
  EXPECT_EQ(parse(stored).value("tax_bps", 0), 825) << stored.out;
  EXPECT_EQ(parse(stored).value("prepaid_credit_micros", 0), 500'000'000) << stored.out;
  EXPECT_TRUE(fails_with(admin({"billing-account", "set", "acme", "--tax", "8.255"}), "--tax"));
}

// A tenant's admin checks a YAML stream before deploying it, with its own key: one verdict per
// document, exit 0 allowed, 1 denied, 2 an error.
TEST_F(Cli, ATenantChecksItsManifestsBeforeDeploying) {
  auto created = admin({"tenant", "create", "acme", "--admin", "alice"});
  ASSERT_TRUE(succeeds(created));
  ASSERT_TRUE(succeeds(admin({"project", "create", "ml", "--tenant", "acme"})));
  std::string key;
  for (const auto& line : lines(created.out))
    if (line.starts_with("key_")) key = line;
  ASSERT_FALSE(key.empty()) << created.out;
  auto alice = [&](const std::vector<std::string>& args) {
    return run_gpuplane(args, {{"GPUPLANE_ENDPOINT", server_.endpoint()}, {"GPUPLANE_TOKEN", key}});
  };
  const std::string pod = R"(apiVersion: v1
kind: Pod
metadata:
  name: NAME
  namespace: acme-ml
spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: main
    image: registry.example.com/acme/train:1
    securityContext:
      allowPrivilegeEscalation: false
      privileged: PRIVILEGED
      capabilities: {drop: [ALL]}
)";
  auto manifest = [&](const std::string& name, bool privileged) {
    std::string m = pod;
    m.replace(m.find("NAME"), 4, name);
    m.replace(m.find("PRIVILEGED"), 10, privileged ? "true" : "false");
    return m;
  };
  const fs::path good = tmp_.path() / "good.yaml", mixed = tmp_.path() / "mixed.yaml",
                 broken = tmp_.path() / "broken.yaml";
  std::ofstream(good) << manifest("trainer", false);
  std::ofstream(mixed) << manifest("trainer", false) << "---\n" << manifest("rooted", true);
  std::ofstream(broken) << "kind: Pod\nspec: [unclosed\n";

  auto ok = alice({"admission", "check", good.string(), "--tenant", "acme"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(ok.out, "allowed\n");
  auto no = alice({"admission", "check", mixed.string(), "--tenant", "acme"});
  EXPECT_EQ(no.exit_code, 1) << no.out << no.err;
  EXPECT_TRUE(contains(no.out, "Pod/trainer: allowed")) << no.out;
  EXPECT_TRUE(contains(no.out, "Pod/rooted: denied")) << no.out;
  EXPECT_TRUE(contains(no.out, "privileged")) << no.out;
  auto bad = alice({"admission", "check", broken.string(), "--tenant", "acme"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_TRUE(contains(bad.err, "YAML")) << bad.err;
  // Without --tenant it is the webhook's route, which a tenant's key may not call.
  auto webhook = alice({"admission", "check", good.string()});
  EXPECT_EQ(webhook.exit_code, 2) << webhook.out << webhook.err;
  EXPECT_TRUE(contains(webhook.err, "--tenant")) << webhook.err;
}

// A MIG GPU's instances are in the tables, not only in JSON; a node's pool is named.
TEST_F(Cli, NodeAndGpuTablesShowMigInstancesAndPoolNames) {
  Json gpu = {{"uuid", "GPU-m-0"},
              {"index", 0},
              {"model", "NVIDIA H200"},
              {"memory_bytes", int64_t{150} << 30},
              {"mig_capable", true},
              {"mode", "mig"},
              {"mig_instances",
               {{{"profile", "3g.71gb"}, {"start", 0}}, {{"profile", "1g.18gb"}, {"start", 6}}}}};
  Json inv = {{"node", {{"name", "m1"}, {"cpu_millis", 1000}, {"memory_bytes", 1 << 30}}},
              {"gpus", {gpu}}};
  auto pool = server_.admin_request("POST", "/v1/pools", {{"name", "train-pool"}});
  ASSERT_TRUE(pool && pool->status == 201) << (pool ? pool->body : "");
  auto imported = server_.admin_request(
      "POST", "/v1/fleet/import", {{"pool", "train-pool"}, {"nodes", {{{"inventory", inv}}}}});
  ASSERT_TRUE(imported && imported->status == 201) << (imported ? imported->body : "");
  // The node's pool by name.
  auto nodes = admin({"node", "list"});
  ASSERT_TRUE(succeeds(nodes));
  EXPECT_TRUE(contains(nodes.out, " POOL ")) << nodes.out;
  EXPECT_TRUE(contains(nodes.out, "train-pool")) << nodes.out;
  for (auto args : {std::vector<std::string>{"node", "get", "m1"},
                    std::vector<std::string>{"gpu", "list", "--node", "m1"}}) {
    auto r = admin(args);
    ASSERT_TRUE(succeeds(r));
    EXPECT_TRUE(contains(r.out, "MIG INSTANCES")) << r.out;
    EXPECT_TRUE(contains(r.out, "3g.71gb at slice 0, 1g.18gb at slice 6")) << r.out;
  }
  // Where a request would go is said by node name.
  ASSERT_TRUE(succeeds(admin({"tenant", "create", "acme"})));
  ASSERT_TRUE(succeeds(admin({"project", "create", "ml", "--tenant", "acme"})));
  ASSERT_TRUE(
      succeeds(admin({"quota", "set", "--tenant", "acme", "--model", "H200", "--nominal", "1"})));
  auto dry = admin({"allocation", "create", "--tenant", "acme", "--project", "ml", "--tier", "mig",
                    "--mig-profile", "1g.18gb", "--count", "1", "--dry-run"});
  ASSERT_TRUE(succeeds(dry));
  EXPECT_TRUE(contains(dry.out, "would be placed on 1 x H200 (m1)")) << dry.out;
}

// gp_test() hands every test the binary's path in GP_BINARY; the fallback in
// gpuplane_binary() must not hide it going missing.
// A secret stored before names became one path segment ("team/registry") cannot be named in a
// path; `secret delete` names it in the query instead.
TEST_F(Cli, DeletesASecretStoredWithASlashInItsName) {
  ASSERT_TRUE(succeeds(admin({"tenant", "create", "acme", "--admin", "alice"})));
  ASSERT_TRUE(succeeds(admin({"secret", "create", "acme", "kept", "--from-file", "-"}, "value\n")));
  EXPECT_TRUE(fails_with(
      admin({"secret", "create", "acme", "team/registry", "--from-file", "-"}, "value\n"), "-_.:"));
  // The row as it was written then: stop the server, copy the stored secret under the old name.
  ASSERT_EQ(server_.terminate(), 0) << server_.log();
  {
    auto st = store::open_sqlite({.path = (server_.data_dir() / "gpuplane.db").string()});
    ASSERT_TRUE(st) << st.error().message;
    auto copied = (*st)->write([](store::Tx& tx) -> Result<void> {
      GP_TRY(
          tx.exec("INSERT INTO tenant_secrets (tenant_id, name, key_version, sealed, created_by, "
                  "created_at) SELECT tenant_id, 'team/registry', key_version, sealed, created_by, "
                  "created_at FROM tenant_secrets WHERE name = 'kept'"));
      return ok();
    });
    ASSERT_TRUE(copied) << copied.error().message;
  }
  ASSERT_TRUE(server_.start());
  ASSERT_TRUE(succeeds(admin({"secret", "delete", "acme", "team/registry"})));
  auto left = admin({"--output", "json", "secret", "list", "acme"});
  ASSERT_TRUE(succeeds(left));
  EXPECT_FALSE(contains(left.out, "team/registry")) << left.out;
  EXPECT_TRUE(contains(left.out, "kept")) << left.out;
}

TEST(ProcessEnvironment, CtestPassesTheBinaryPath) {
  const char* binary = std::getenv("GP_BINARY");
  ASSERT_NE(binary, nullptr) << "GP_BINARY is not in the test environment (gp_test ENVIRONMENT)";
  EXPECT_TRUE(fs::exists(binary)) << binary;
  EXPECT_NE(std::getenv("GP_SOURCE_DIR"), nullptr);
}

TEST(CliUsage, UsageErrorsExitNonZeroWithoutCallingTheServer) {
  const std::vector<std::vector<std::string>> cases = {
      {},                                    // no command
      {"tenant"},                            // no verb
      {"tenant", "frobnicate"},              // unknown verb
      {"project", "create", "ml"},           // --tenant is required
      {"-o", "yaml", "tenant", "list"},      // not an output format
      {"tenant", "list", "--no-such-flag"},  // unknown flag
      {"audit", "verify"},                   // --data is required
  };
  for (auto args : cases) {
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    SCOPED_TRACE("gpuplane " + shown);
    // An endpoint where nothing listens: a usage error must stop before any request.
    args.insert(args.begin(), {"--endpoint", "http://127.0.0.1:1"});
    auto r = run_gpuplane(args);
    EXPECT_NE(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.exit_code, -1) << "did not run";
    EXPECT_FALSE(contains(r.err, "cannot reach")) << r.err;
    EXPECT_FALSE(r.out.empty() && r.err.empty()) << "no message at all";
  }
}

}  // namespace
}  // namespace gp::proc
