// `gpuplane posture TENANT` (one tenant's controls, a table per layer) and
// `gpuplane posture --fleet` (which tenants fail which controls), with --json and --svg FILE.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli/client.h"
#include "posture/posture.h"

namespace gp::cli {
namespace {

struct PostureArgs {
  std::string tenant;
  bool fleet = false;
  bool json = false;
  std::string svg;
};

// Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org).
bool use_colour() { return isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr; }

bool run(ClientConfig& c, const PostureArgs& a) {
  if (a.fleet == !a.tenant.empty()) {
    std::cerr << "error: give either a TENANT or --fleet\n";
    return false;
  }
  if (!a.svg.empty() && !a.fleet) {
    std::cerr << "error: --svg draws the fleet matrix: use it with --fleet\n";
    return false;
  }
  auto r =
      call(c, "GET", a.fleet ? "/v1/posture" : "/v1/tenants/" + url_encode(a.tenant) + "/posture");
  if (!r) return false;
  if (!a.svg.empty()) {
    auto svg = posture::render_fleet_svg(*r);
    if (!svg) {
      std::cerr << "error: " << svg.error().message << "\n";
      return false;
    }
    if (!write_file(a.svg, *svg)) return false;
  }
  if (a.json || c.output == "json") {
    std::cout << r->dump(2) << "\n";
    return true;
  }
  auto text = a.fleet ? posture::render_fleet_text(*r, use_colour())
                      : posture::render_report_text(*r, use_colour());
  if (!text) {
    std::cerr << "error: " << text.error().message << "\n";
    return false;
  }
  std::cout << *text;
  if (a.fleet && !r->value("offboarding", Json::array()).empty())
    std::cout << "offboarding, not judged: " << cell((*r)["offboarding"]) << "\n";
  return true;
}

}  // namespace

void add_posture_commands(CLI::App& app, ClientConfig& c, int* rc) {
  auto args = std::make_shared<PostureArgs>();
  auto* p = app.add_subcommand(
      "posture", "Isolation posture: a tenant's controls per layer, or the fleet matrix");
  p->add_option("tenant", args->tenant, "Tenant id or name");
  p->add_flag("--fleet", args->fleet, "Every tenant: which tenants fail which controls");
  p->add_flag("--json", args->json, "Print the API's JSON");
  p->add_option("--svg", args->svg, "With --fleet: also draw the matrix as SVG into FILE");
  p->callback([&c, rc, args] {
    if (!run(c, *args)) *rc = 1;
  });
}

}  // namespace gp::cli
