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

void add_admission(CLI::App& app, ClientConfig& c, int* rc) {
  auto* adm = app.add_subcommand("admission", "The Kubernetes admission webhook");
  adm->require_subcommand(1);
  struct Args {
    std::string file, tenant, ns;
  };
  auto a = std::make_shared<Args>();
  auto* check = adm->add_subcommand(
      "check",
      "Post an AdmissionReview (or a bare manifest) and print the verdict; exits 1 "
      "when denied");
  check->add_option("file", a->file, "AdmissionReview or Kubernetes object, JSON")->required();
  check->add_option("--tenant", a->tenant, "Evaluate for this tenant (default: the namespace's)");
  check->add_option("--namespace,-n", a->ns,
                    "Namespace of a bare manifest (default: its metadata.namespace)");
  on_run(check, rc, [&c, a] {
    std::ifstream in(a->file);
    if (!in) {
      std::cerr << fmt::format("error: cannot read {}\n", a->file);
      return false;
    }
    std::stringstream text;
    text << in.rdbuf();
    Json doc = Json::parse(text.str(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      std::cerr << fmt::format("error: {} is not a JSON object\n", a->file);
      return false;
    }
    if (doc.value("kind", "") != "AdmissionReview") {
      std::string ns = a->ns;
      if (ns.empty() && doc.contains("metadata") && doc["metadata"].is_object())
        ns = doc["metadata"].value("namespace", "");
      if (ns.empty()) {
        std::cerr << "error: a bare manifest needs --namespace or metadata.namespace\n";
        return false;
      }
      doc = wrap_in_review(doc, ns);
    }
    std::string target = "/v1/admission/validate";
    if (!a->tenant.empty()) target += "?tenant=" + url_encode(a->tenant);
    auto r = call(c, "POST", target, doc);
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
    }
    const Json& resp = r->is_object() && r->contains("response") ? (*r)["response"] : Json();
    if (!resp.is_object()) {
      std::cerr << "error: the answer carries no AdmissionReview response\n";
      return false;
    }
    if (resp.value("allowed", false)) {
      if (c.output != "json") std::cout << "allowed\n";
      return true;
    }
    if (c.output != "json") {
      const Json& status = resp.contains("status") ? resp["status"] : Json::object();
      std::cout << "denied: " << status.value("message", "") << "\n";
      if (status.contains("details") && status["details"].contains("causes"))
        for (const auto& cause : status["details"]["causes"])
          std::cout << fmt::format("  {}: {}\n", cause.value("field", "-"),
                                   cause.value("message", ""));
    }
    return false;
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
