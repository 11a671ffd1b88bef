#include "api/metrics.h"

#include <fmt/format.h>

#include "observe/observe.h"

namespace gp::api {

void Metrics::observe(std::string_view method, std::string_view route, int status, double seconds) {
  MutexLock lock(mu_);
  const std::tuple<std::string_view, std::string_view, int> key{method, route, status};
  auto it = series_.find(key);
  if (it == series_.end())
    it = series_.emplace(std::tuple{std::string(method), std::string(route), status}, Series{})
             .first;
  auto& s = it->second;
  ++s.count;
  s.sum += seconds;
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++s.buckets[i];
}

void Metrics::set_gauge(const std::string& name, const std::string& help, double value) {
  MutexLock lock(mu_);
  gauges_[name] = {help, value};
}

void Metrics::set_family(const std::string& name, const std::string& help, const std::string& label,
                         std::vector<std::pair<std::string, double>> values, size_t max_series) {
  values = observe::top_with_other(std::move(values), max_series);
  MutexLock lock(mu_);
  families_[name] = Family{help, label, std::move(values)};
}

std::string Metrics::render() const {
  MutexLock lock(mu_);
  std::string out;
  out += "# HELP gpuplane_http_requests_total HTTP requests by route template and status.\n";
  out += "# TYPE gpuplane_http_requests_total counter\n";
  for (const auto& [k, s] : series_) {
    const auto& [method, route, status] = k;
    out +=
        fmt::format("gpuplane_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{}\"}} {}\n",
                    method, route, status, s.count);
  }
  out += "# HELP gpuplane_http_request_duration_seconds Request latency.\n";
  out += "# TYPE gpuplane_http_request_duration_seconds histogram\n";
  for (const auto& [k, s] : series_) {
    const auto& [method, route, status] = k;
    std::string labels =
        fmt::format("method=\"{}\",route=\"{}\",status=\"{}\"", method, route, status);
    for (size_t i = 0; i < kBuckets.size(); ++i)
      out += fmt::format("gpuplane_http_request_duration_seconds_bucket{{{},le=\"{}\"}} {}\n",
                         labels, kBuckets[i], s.buckets[i]);
    out += fmt::format("gpuplane_http_request_duration_seconds_bucket{{{},le=\"+Inf\"}} {}\n",
                       labels, s.count);
    out += fmt::format("gpuplane_http_request_duration_seconds_sum{{{}}} {}\n", labels, s.sum);
    out += fmt::format("gpuplane_http_request_duration_seconds_count{{{}}} {}\n", labels, s.count);
  }
  for (const auto& [name, gauge] : gauges_) {
    const auto& [help, v] = gauge;
    out += fmt::format("# HELP gpuplane_{} {}\n", name, help);
    out += fmt::format("# TYPE gpuplane_{} gauge\n", name);
    out += fmt::format("gpuplane_{} {}\n", name, v);
  }
  for (const auto& [name, f] : families_) {
    out += fmt::format("# HELP gpuplane_{} {}\n", name, f.help);
    out += fmt::format("# TYPE gpuplane_{} gauge\n", name);
    for (const auto& [value, v] : f.values)
      out += fmt::format("gpuplane_{}{{{}=\"{}\"}} {}\n", name, f.label, value, v);
  }
  return out;
}

}  // namespace gp::api
