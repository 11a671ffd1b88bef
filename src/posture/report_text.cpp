// Posture reports for people: text tables (optionally coloured) and the fleet matrix as SVG,
// rendered from the API's JSON so that the CLI needs nothing else.
#include <fmt/format.h>

#include <algorithm>

#include "common/markup.h"
#include "posture/posture.h"

namespace gp::posture {
namespace {

constexpr std::string_view kReset = "\x1b[0m";

std::string_view colour_of(std::string_view status) {
  if (status == "pass") return "\x1b[32m";
  if (status == "fail") return "\x1b[1;31m";
  return "\x1b[2m";
}

// "not_applicable" reads as "n/a" in tables.
std::string status_label(std::string_view status) {
  return status == "not_applicable" ? "n/a" : std::string(status);
}

std::string paint(std::string_view text, std::string_view status, bool colour, size_t width) {
  std::string padded = fmt::format("{:<{}}", text, width);
  if (!colour) return padded;
  return fmt::format("{}{}{}", colour_of(status), padded, kReset);
}

// The JSON library throws on a missing key or a wrong type; the renderers answer an error.
template <typename F>
Result<std::string> guarded(std::string_view what, F&& fn) {
  try {
    return fn();
  } catch (const Json::exception& e) {
    return fail(Error::invalid(fmt::format("not a {}: {}", what, e.what())));
  }
}

}  // namespace

Result<std::string> render_report_text(const Json& report, bool colour) {
  return guarded("posture report", [&]() -> Result<std::string> {
    std::string out;
    const Json& counts = report.at("counts");
    out += fmt::format("tenant {} ({})  class {}  checked {}\n",
                       report.at("tenant").at("name").get<std::string>(),
                       report.at("tenant").at("id").get<std::string>(),
                       report.at("isolation_class").get<std::string>(),
                       report.at("checked_at").get<std::string>());
    out += fmt::format("pass {}  fail {}  n/a {}\n", counts.at("pass").get<int>(),
                       counts.at("fail").get<int>(), counts.at("not_applicable").get<int>());
    size_t id_width = 7;
    for (const auto& layer : report.at("layers"))
      for (const auto& c : layer.at("controls"))
        id_width = std::max(id_width, c.at("id").get<std::string>().size());
    std::vector<const Json*> failing;
    for (const auto& layer : report.at("layers")) {
      out += fmt::format("\n{}\n", layer.at("layer").get<std::string>());
      for (const auto& c : layer.at("controls")) {
        std::string status = c.at("status").get<std::string>();
        out += fmt::format("  {}  {:<{}}  {}\n", paint(status_label(status), status, colour, 4),
                           c.at("id").get<std::string>(), id_width,
                           c.at("summary").get<std::string>());
        if (status == "fail") failing.push_back(&c);
      }
    }
    if (!failing.empty()) {
      out += "\nfailing controls\n";
      for (const Json* c : failing) {
        out += fmt::format("  {} ({})\n", paint(c->at("id").get<std::string>(), "fail", colour, 0),
                           c->at("title").get<std::string>());
        out += fmt::format("    required by: {}\n", c->at("rule").get<std::string>());
        out += fmt::format("    threat:      {}\n", c->at("threat").get<std::string>());
        out += fmt::format("    remediation: {}\n", c->at("remediation").get<std::string>());
      }
    }
    return out;
  });
}

Result<std::string> render_fleet_text(const Json& fleet, bool colour) {
  return guarded("fleet posture", [&]() -> Result<std::string> {
    std::string out;
    const Json& counts = fleet.at("counts");
    out += fmt::format("{} tenant(s), {} failing at least one control\n\n",
                       counts.at("tenants").get<int>(), counts.at("failing_tenants").get<int>());
    size_t name_width = 6;
    for (const auto& t : fleet.at("tenants"))
      name_width = std::max(name_width, t.at("name").get<std::string>().size());
    out += fmt::format("{:<{}}  {:<9}  {:>4}  {:>4}  {:>4}  {}\n", "TENANT", name_width, "CLASS",
                       "PASS", "FAIL", "N/A", "FAILING");
    for (const auto& t : fleet.at("tenants")) {
      int fails = t.at("fail").get<int>();
      std::string failing;
      for (const auto& id : t.at("failing")) {
        if (!failing.empty()) failing += ", ";
        failing += id.get<std::string>();
      }
      out += fmt::format("{:<{}}  {:<9}  {:>4}  {}  {:>4}  {}\n", t.at("name").get<std::string>(),
                         name_width, t.at("isolation_class").get<std::string>(),
                         t.at("pass").get<int>(),
                         paint(fmt::format("{:>4}", fails), fails > 0 ? "fail" : "pass", colour, 4),
                         t.at("not_applicable").get<int>(), failing.empty() ? "-" : failing);
    }
    std::vector<const Json*> failing_controls;
    for (const auto& c : fleet.at("controls"))
      if (c.at("failing_tenants").get<int>() > 0) failing_controls.push_back(&c);
    if (!failing_controls.empty()) {
      out += "\ncontrols failing somewhere\n";
      for (const Json* c : failing_controls)
        out += fmt::format("  {:>3} tenant(s)  {}\n", c->at("failing_tenants").get<int>(),
                           c->at("id").get<std::string>());
    }
    return out;
  });
}

Result<std::string> render_fleet_svg(const Json& fleet) {
  return guarded("fleet posture", [&]() -> Result<std::string> {
    const Json& controls = fleet.at("controls");
    const Json& tenants = fleet.at("tenants");
    constexpr int kCell = 18, kLeft = 180, kTop = 230, kLegend = 40;
    // Room on the right for the last column headers, which lean right as they rise.
    const int width = kLeft + kCell * static_cast<int>(controls.size()) + 160;
    const int height = kTop + kCell * static_cast<int>(tenants.size()) + kLegend;
    std::string out = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
        "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"11\">\n"
        "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
        width, height);
    for (size_t i = 0; i < controls.size(); ++i) {
      int x = kLeft + kCell * static_cast<int>(i) + kCell / 2 + 4;
      out += fmt::format("<text x=\"{0}\" y=\"{1}\" transform=\"rotate(-60 {0} {1})\">{2}</text>\n",
                         x, kTop - 6, markup_escape(controls[i].at("id").get<std::string>()));
    }
    for (size_t r = 0; r < tenants.size(); ++r) {
      const Json& t = tenants[r];
      int y = kTop + kCell * static_cast<int>(r);
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} ({})</text>\n", kLeft - 6,
                         y + kCell - 5, markup_escape(t.at("name").get<std::string>()),
                         markup_escape(t.at("isolation_class").get<std::string>()));
      for (size_t i = 0; i < controls.size(); ++i) {
        std::string id = controls[i].at("id").get<std::string>();
        std::string status = t.at("controls").at(id).get<std::string>();
        std::string_view fill = status == "pass"   ? "#2ca02c"
                                : status == "fail" ? "#d62728"
                                                   : "#d9d9d9";
        out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"white\">"
            "<title>{}: {} {}</title></rect>\n",
            kLeft + kCell * static_cast<int>(i), y, kCell, kCell, fill,
            markup_escape(t.at("name").get<std::string>()), markup_escape(id),
            status_label(status));
      }
    }
    int ly = kTop + kCell * static_cast<int>(tenants.size()) + 24;
    int lx = kLeft;
    for (auto [label, fill] : {std::pair{"pass", "#2ca02c"}, std::pair{"fail", "#d62728"},
                               std::pair{"n/a", "#d9d9d9"}}) {
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
          "<text x=\"{}\" y=\"{}\">{}</text>\n",
          lx, ly - 10, fill, lx + 16, ly, label);
      lx += 70;
    }
    out += "</svg>\n";
    return out;
  });
}

}  // namespace gp::posture
