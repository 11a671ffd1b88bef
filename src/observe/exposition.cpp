// The Prometheus text exposition format (version 0.0.4): families with HELP and TYPE, samples
// with escaped label values.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "observe/observe.h"

namespace gp::observe {

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void Exposition::family(std::string_view name, std::string_view type, std::string_view help) {
  name_ = name;
  header_ = fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void Exposition::flush_header() {
  out_ += header_;
  header_.clear();
}

void Exposition::sample(const Labels& labels, double value) {
  if (!header_.empty()) flush_header();
  out_ += name_;
  if (!labels.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out_ += ',';
      first = false;
      out_ += fmt::format("{}=\"{}\"", k, escape_label_value(v));
    }
    out_ += '}';
  }
  if (std::isnan(value))
    out_ += " NaN\n";
  else
    out_ += fmt::format(" {}\n", value);
}

std::string Exposition::take() {
  header_.clear();
  return std::move(out_);
}

std::vector<std::pair<std::string, double>> top_with_other(
    std::vector<std::pair<std::string, double>> values, size_t max) {
  std::ranges::sort(values, [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (values.size() > max) {
    double rest = 0;
    for (size_t i = max; i < values.size(); ++i) rest += values[i].second;
    values.resize(max);
    values.emplace_back("_other", rest);
  }
  return values;
}

}  // namespace gp::observe
