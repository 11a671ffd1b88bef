// Prometheus metrics for the API: request counts and a latency histogram by route template and
// status, rendered in the text exposition format with the gpuplane_ prefix. Label cardinality is
// bounded by the route table (templates, never raw paths).
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/thread_safety.h"

namespace gp::api {

class Metrics {
 public:
  static constexpr std::array<double, 12> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,   0.25,   0.5,   1.0,  2.5};
  void observe(std::string_view method, std::string_view route, int status, double seconds);
  void set_gauge(const std::string& name, const std::string& help, double value);
  // A gauge family with one label: the `max_series` largest values keep their label value, the
  // rest are summed under "_other", so cardinality stays bounded however many there are.
  void set_family(const std::string& name, const std::string& help, const std::string& label,
                  std::vector<std::pair<std::string, double>> values, size_t max_series);
  std::string render() const;

 private:
  struct Series {
    uint64_t count = 0;
    double sum = 0;
    std::array<uint64_t, kBuckets.size()> buckets{};
  };
  mutable Mutex mu_;
  // Found by views (std::less<>): a request that counts into an existing series copies nothing.
  std::map<std::tuple<std::string, std::string, int>, Series, std::less<>> series_
      GP_GUARDED_BY(mu_);
  std::map<std::string, std::pair<std::string, double>> gauges_ GP_GUARDED_BY(mu_);  // help, value
  struct Family {
    std::string help, label;
    std::vector<std::pair<std::string, double>> values;
  };
  std::map<std::string, Family> families_ GP_GUARDED_BY(mu_);
};

}  // namespace gp::api
