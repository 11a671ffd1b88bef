// Kubernetes commands: render a tenant's bundle, and check a workload against the admission
// webhook the way a cluster's API server would.
#include <fmt/format.h>
#include <openssl/evp.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/client.h"
#include "render/render.h"

namespace gp::cli {
namespace {

// A Kubernetes object as the request of an AdmissionReview (operation CREATE), so a bare
// manifest can be checked without writing the review around it.
Json wrap_in_review(const Json& object, const std::string& ns) {
  std::string api_version = object.value("apiVersion", "v1");
  auto slash = api_version.find('/');
  std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  Json request = {
      {"uid", "gpuplane-cli-check"},
      {"kind", {{"group", group}, {"version", version}, {"kind", object.value("kind", "")}}},
      {"operation", "CREATE"},
      {"namespace", ns},
      {"object", object}};
  if (object.contains("metadata") && object["metadata"].is_object() &&
      object["metadata"].contains("name"))
    request["name"] = object["metadata"]["name"];
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
}

void add_render(CLI::App& app, ClientConfig& c, int* rc) {
  auto* render = app.add_subcommand("render", "Render artifacts a cluster applies");
  render->require_subcommand(1);
  struct Args {
    std::string tenant, output, webhook_url, ca_file;
  };
  auto a = std::make_shared<Args>();
  auto* k8s = render->add_subcommand("kubernetes", "The tenant's Kubernetes bundle (YAML)");
  k8s->add_option("tenant", a->tenant, "Tenant id or name")->required();
  k8s->add_option("--output,-f", a->output, "Write the YAML to this file instead of stdout");
  k8s->add_option("--webhook-url", a->webhook_url,
                  "Base URL the cluster reaches gpuplane at (https://host[:port])");
  k8s->add_option("--ca-file", a->ca_file,
                  "PEM file of the CA that signed gpuplane's certificate (the webhook's caBundle)")
      ->check(CLI::ExistingFile);
  on_run(k8s, rc, [&c, a] {
    std::string target = "/v1/tenants/" + url_encode(a->tenant) + "/render/kubernetes";
    std::vector<std::string> query;
    if (!a->webhook_url.empty()) query.push_back("webhook_url=" + url_encode(a->webhook_url));
    if (!a->ca_file.empty()) {
      std::ifstream in(a->ca_file, std::ios::binary);
      std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::string b64(4 * ((pem.size() + 2) / 3) + 1, '\0');
      b64.resize(size_t(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                        reinterpret_cast<const unsigned char*>(pem.data()),
                                        int(pem.size()))));
      query.push_back("ca_bundle=" + url_encode(b64));
    }
    for (size_t i = 0; i < query.size(); ++i) target += (i == 0 ? "?" : "&") + query[i];
    auto r = call(c, "GET", target);
    if (!r) return false;
    if (!r->is_string()) {
      std::cerr << "error: the server did not answer YAML\n";
      return false;
    }
    const std::string& yaml = r->get_ref<const std::string&>();
    if (a->output.empty()) {
      std::cout << yaml;
      return true;
    }
    std::ofstream out(a->output, std::ios::trunc);
    out << yaml;
    if (!out) {
      std::cerr << fmt::format("error: cannot write {}\n", a->output);
      return false;
    }
    std::cout << "wrote " << a->output << "\n";
    return true;
  });
}

// One document's verdict as a person reads it.
void print_verdict(const Json& resp, const std::string& label) {
  std::string prefix = label.empty() ? "" : label + ": ";
  if (resp.value("allowed", false)) {
    std::cout << prefix << "allowed\n";
    return;
  }
  const Json& status = resp.contains("status") ? resp["status"] : Json::object();
  std::cout << prefix << "denied: " << status.value("message", "") << "\n";
  if (status.contains("details") && status["details"].contains("causes"))
    for (const auto& cause : status["details"]["causes"])
      std::cout << fmt::format("  {}: {}\n", cause.value("field", "-"), cause.value("message", ""));
}

void add_admission(CLI::App& app, ClientConfig& c, int* rc) {
  auto* adm = app.add_subcommand("admission", "The Kubernetes admission webhook");
  adm->require_subcommand(1);
  struct Args {
    std::string file, tenant, ns;
  };
  auto a = std::make_shared<Args>();
  auto* check = adm->add_subcommand(
      "check",
      "Check manifests (or AdmissionReviews) against the admission policy before deploying: "
      "exits 0 when every document is allowed, 1 when one is denied, 2 on an error");
  check
      ->add_option("file", a->file,
                   "Kubernetes objects or AdmissionReviews, YAML (several documents) or JSON")
      ->required();
  check->add_option("--tenant", a->tenant,
                    "Check for this tenant with its own credential (a dry check: nothing is "
                    "audited). Without it the webhook's route decides by the namespace's owner "
                    "and needs admission.review");
  check->add_option("--namespace,-n", a->ns,
                    "Namespace of a bare manifest (default: its metadata.namespace)");
  check->callback([&c, a, rc] {
    *rc = 2;  // until every document has an answer
    std::ifstream in(a->file);
    if (!in) {
      std::cerr << fmt::format("error: cannot read {}\n", a->file);
      return;
    }
    std::stringstream text;
    text << in.rdbuf();
    auto docs = render::from_yaml(text.str());
    if (!docs) {
      std::cerr << fmt::format("error: {}: {}\n", a->file, docs.error().message);
      return;
    }
    if (docs->empty()) {
      std::cerr << fmt::format("error: {} holds no document\n", a->file);
      return;
    }
    std::vector<Json> reviews;
    std::vector<std::string> labels;
    for (auto& doc : *docs) {
      if (!doc.is_object()) {
        std::cerr << fmt::format("error: document {} of {} is not an object\n", reviews.size() + 1,
                                 a->file);
        return;
      }
      const Json meta = doc.contains("metadata") && doc["metadata"].is_object() ? doc["metadata"]
                                                                                : Json::object();
      labels.push_back(fmt::format("{}/{}", doc.value("kind", "?"), meta.value("name", "?")));
      if (doc.value("kind", "") != "AdmissionReview") {
        std::string ns = a->ns.empty() ? meta.value("namespace", "") : a->ns;
        if (ns.empty()) {
          std::cerr << fmt::format("error: {} needs --namespace or metadata.namespace\n",
                                   labels.back());
          return;
        }
        doc = wrap_in_review(doc, ns);
      }
      reviews.push_back(std::move(doc));
    }
    std::string target = a->tenant.empty()
                             ? std::string("/v1/admission/validate")
                             : "/v1/tenants/" + url_encode(a->tenant) + "/admission/check";
    Json answers = Json::array();
    for (const auto& review : reviews) {
      auto r = call(c, "POST", target, review);
      if (!r) {
        if (a->tenant.empty())
          std::cerr << "hint: a tenant's users check with --tenant <their tenant>\n";
        return;
      }
      if (!r->is_object() || !r->contains("response") || !(*r)["response"].is_object()) {
        std::cerr << "error: the answer carries no AdmissionReview response\n";
        return;
      }
      answers.push_back(std::move(*r));
    }
    bool all_allowed = true;
    for (size_t i = 0; i < answers.size(); ++i) {
      bool allowed = answers[i]["response"].value("allowed", false);
      all_allowed = all_allowed && allowed;
      if (c.output != "json")
        print_verdict(answers[i]["response"], answers.size() > 1 ? labels[i] : "");
    }
    if (c.output == "json") print(c, answers.size() == 1 ? answers[0] : answers, {});
    *rc = all_allowed ? 0 : 1;
  });
}

void add_workload_policy(CLI::App& app, ClientConfig& c, int* rc) {
  auto* wp = app.add_subcommand(
      "workload-policy", "A tenant's workload policy: allowed image registries, pull policy");
  wp->require_subcommand(1);
  struct Args {
    std::string tenant;
    std::vector<std::string> registries;
    bool pull_always = false;
  };
  auto a = std::make_shared<Args>();
  auto show = [&c](const Json& p) {
    if (c.output == "json") {
      print(c, p, {});
      return;
    }
    const auto& regs = p.at("allowed_registries");
    std::cout << "allowed registries:" << (regs.empty() ? " any" : "") << "\n";
    for (const auto& r : regs) std::cout << "  " << r.get<std::string>() << "\n";
    bool own = p.at("require_pull_always").get<bool>();
    bool cls = p.at("class_requires_pull_always").get<bool>();
    std::cout << "imagePullPolicy Always: "
              << (cls   ? "required (class)"
                  : own ? "required (policy)"
                        : "not required")
              << "\n"
              << "version: " << p.at("version").get<int64_t>() << "\n";
  };
  auto* get = wp->add_subcommand("get", "Show the tenant's workload policy");
  get->add_option("tenant", a->tenant, "Tenant id or name")->required();
  on_run(get, rc, [&c, a, show] {
    auto r = call(c, "GET", "/v1/tenants/" + url_encode(a->tenant) + "/workload-policy");
    if (!r) return false;
    show(*r);
    return true;
  });
  auto* set = wp->add_subcommand(
      "set", "Replace the tenant's workload policy (no --registry: any registry)");
  set->add_option("tenant", a->tenant, "Tenant id or name")->required();
  set->add_option("--registry,-r", a->registries,
                  "Allowed registry host[:port][/path]; repeat for more");
  set->add_flag("--pull-always", a->pull_always,
                "Every container must set imagePullPolicy: Always");
  on_run(set, rc, [&c, a, show] {
    Json body = {{"allowed_registries", a->registries}, {"require_pull_always", a->pull_always}};
    // Without --pull-always the class's own rule stands (the server refuses to loosen it).
    if (!a->pull_always) body.erase("require_pull_always");
    auto r = call(c, "PUT", "/v1/tenants/" + url_encode(a->tenant) + "/workload-policy", body);
    if (!r) return false;
    show(*r);
    return true;
  });
}

}  // namespace

void add_k8s_commands(CLI::App& app, ClientConfig& c, int* rc) {
  add_render(app, c, rc);
  add_admission(app, c, rc);
  add_workload_policy(app, c, rc);
}

}  // namespace gp::cli
