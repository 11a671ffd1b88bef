// Device check for NVML discovery: on a machine with NVIDIA GPUs, opens NVML the way the agent
// does and prints, as one JSON document, what gpuplane sees: the inventory (fleet::to_json),
// a summary the check script compares with nvidia-smi, the raw NVML GPU-instance profiles and
// the catalog names they map to, two telemetry samples a second apart and two XID polls. Read-only,
// like Nvml.
//
//   discover [--library PATH]
//
// Exit status: 0 when every step and self-check passed, 1 when one failed, 2 when NVML could
// not be opened.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <regex>
#include <string>
#include <string_view>
#include <thread>

#include "agent/nvml.h"
#include "common/json.h"
#include "fleet/inventory.h"
#include "vocab/vocab.h"

namespace {

using gp::Error;
using gp::Json;

Json error_json(std::string_view step, const Error& e) {
  return {
      {"step", step}, {"code", std::string(gp::error_code_name(e.code))}, {"message", e.message}};
}

class Report {
 public:
  void check(std::string name, bool ok, std::string detail = "") {
    if (!ok) failed_ = true;
    doc_["checks"].push_back({{"check", std::move(name)}, {"ok", ok}, {"detail", detail}});
  }
  void error(std::string_view step, const Error& e) {
    failed_ = true;
    doc_["errors"].push_back(error_json(step, e));
  }
  Json& doc() { return doc_; }
  bool failed() const { return failed_; }

 private:
  Json doc_ = {{"errors", Json::array()}, {"checks", Json::array()}};
  bool failed_ = false;
};

int64_t millis_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string library = "libnvidia-ml.so.1";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--library" && i + 1 < argc) {
      library = argv[++i];
    } else {
      std::cerr << "usage: " << argv[0] << " [--library PATH]\n";
      return 2;
    }
  }

  Report report;
  Json& doc = report.doc();
  auto start = std::chrono::steady_clock::now();
  gp::Result<std::unique_ptr<gp::agent::Nvml>> opened = gp::agent::Nvml::open(library);
  doc["open_ms"] = millis_since(start);
  if (!opened) {
    report.error("open", opened.error());
    std::cout << doc.dump(2) << std::endl;
    return 2;
  }
  gp::agent::Nvml& nvml = **opened;

  // discover
  start = std::chrono::steady_clock::now();
  gp::Result<std::vector<gp::fleet::GpuInfo>> gpus = nvml.discover();
  doc["discover_ms"] = millis_since(start);
  doc["gpus"] = Json::array();
  doc["summary"] = Json::array();
  doc["profiles"] = Json::object();
  if (!gpus) {
    report.error("discover", gpus.error());
  } else {
    const std::regex bus_id("^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\\.[0-9A-F]$");
    for (const gp::fleet::GpuInfo& gpu : *gpus) {
      doc["gpus"].push_back(gp::fleet::to_json(gpu));
      Json instances = Json::array();
      for (const gp::vocab::PlacedInstance& p : gpu.mig_instances) {
        instances.push_back(p.profile + "@" + std::to_string(p.start));
      }
      doc["summary"].push_back({{"index", gpu.index},
                                {"uuid", gpu.uuid},
                                {"product", gpu.product},
                                {"model", gpu.model},
                                {"memory_bytes", gpu.memory_bytes},
                                {"pci_bus_id", gpu.pci_bus_id},
                                {"numa_node", gpu.numa_node},
                                {"mig_capable", gpu.mig_capable},
                                {"mig_enabled", gpu.mode == gp::fleet::GpuMode::kMig},
                                {"mig_instances", instances},
                                {"nvlink_peers", gpu.nvlink_peers},
                                {"ecc_uncorrected", gpu.health.ecc_uncorrected}});
      const std::string who = "GPU " + std::to_string(gpu.index);
      report.check(who + " uuid", gpu.uuid.starts_with("GPU-"), gpu.uuid);
      report.check(who + " pci bus id", std::regex_match(gpu.pci_bus_id, bus_id), gpu.pci_bus_id);
      report.check(who + " memory", gpu.memory_bytes > 0, std::to_string(gpu.memory_bytes));
      report.check(who + " model", !gpu.model.empty(), gpu.product + " -> " + gpu.model);

      gp::Result<std::vector<gp::agent::Nvml::ProfileInfo>> profiles =
          nvml.gpu_instance_profiles(gpu.index);
      if (!profiles) {
        report.error("gpu_instance_profiles " + who, profiles.error());
        continue;
      }
      Json rows = Json::array();
      for (const gp::agent::Nvml::ProfileInfo& p : *profiles) {
        rows.push_back({{"nvml_profile_id", p.nvml_profile_id},
                        {"slice_count", p.slice_count},
                        {"memory_mb", p.memory_mb},
                        {"max_instances", p.max_instances},
                        {"catalog_profile", p.catalog_profile}});
        report.check(who + " NVML profile " + std::to_string(p.nvml_profile_id) + " maps",
                     !p.catalog_profile.empty(),
                     std::to_string(p.slice_count) + " slices, " + std::to_string(p.memory_mb) +
                         " MiB -> " + p.catalog_profile);
      }
      doc["profiles"][gpu.uuid] = rows;
    }
  }

  // sample, twice a second apart: the energy counter must advance, and the mean power it gives
  // must agree with the power reading.
  const auto sample_json = [](const gp::agent::Nvml::Sample& s) {
    return Json{{"gpu_uuid", s.gpu_uuid},
                {"mig_instance", s.mig_instance},
                {"util_pct", s.util_pct},
                {"mem_util_pct", s.mem_util_pct},
                {"mem_used_bytes", s.mem_used_bytes},
                {"mem_reserved_bytes", s.mem_reserved_bytes},
                {"mem_total_bytes", s.mem_total_bytes},
                {"power_mw", s.power_mw},
                {"energy_mj", s.energy_mj},
                {"temperature_c", s.temperature_c},
                {"sm_clock_mhz", s.sm_clock_mhz},
                {"ecc_corrected", s.ecc_corrected},
                {"ecc_uncorrected", s.ecc_uncorrected}};
  };
  start = std::chrono::steady_clock::now();
  gp::Result<std::vector<gp::agent::Nvml::Sample>> samples = nvml.sample();
  doc["sample_ms"] = millis_since(start);
  doc["samples"] = Json::array();
  if (!samples) {
    report.error("sample", samples.error());
  } else {
    for (const gp::agent::Nvml::Sample& s : *samples) {
      doc["samples"].push_back(sample_json(s));
      const std::string who = "sample " + s.gpu_uuid + " " + s.mig_instance;
      report.check(who + " utilization in range", s.util_pct >= -1 && s.util_pct <= 100,
                   std::to_string(s.util_pct));
      if (!s.mig_instance.empty()) continue;
      // Board figures every data-centre GPU reports.
      report.check(who + " power reported, under 2 kW", s.power_mw > 0 && s.power_mw < 2'000'000,
                   std::to_string(s.power_mw) + " mW");
      report.check(who + " temperature reported", s.temperature_c > 0 && s.temperature_c < 120,
                   std::to_string(s.temperature_c) + " C");
      report.check(who + " energy reported", s.energy_mj > 0, std::to_string(s.energy_mj));
      report.check(who + " SM clock reported", s.sm_clock_mhz > 0, std::to_string(s.sm_clock_mhz));
      report.check(who + " ECC counts reported", s.ecc_corrected >= 0 && s.ecc_uncorrected >= 0,
                   std::to_string(s.ecc_corrected) + "/" + std::to_string(s.ecc_uncorrected));
    }
    if (gpus) {
      for (const gp::fleet::GpuInfo& gpu : *gpus) {
        bool found = false;
        for (const gp::agent::Nvml::Sample& s : *samples) {
          if (s.gpu_uuid != gpu.uuid || !s.mig_instance.empty()) continue;
          found = true;
          report.check("sample " + gpu.uuid + " memory used within total",
                       s.mem_used_bytes >= -1 && s.mem_used_bytes <= gpu.memory_bytes,
                       std::to_string(s.mem_used_bytes));
          report.check("sample " + gpu.uuid + " memory total as discovered",
                       s.mem_total_bytes == gpu.memory_bytes, std::to_string(s.mem_total_bytes));
        }
        report.check("sample " + gpu.uuid + " present", found);
      }
    }
    const auto first_at = start;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    start = std::chrono::steady_clock::now();
    gp::Result<std::vector<gp::agent::Nvml::Sample>> again = nvml.sample();
    const double seconds = std::chrono::duration<double>(start - first_at).count();
    if (!again) {
      report.error("second sample", again.error());
    } else {
      doc["samples_after_1s"] = Json::array();
      for (const gp::agent::Nvml::Sample& later : *again) {
        doc["samples_after_1s"].push_back(sample_json(later));
        if (!later.mig_instance.empty() || later.energy_mj < 0) continue;
        for (const gp::agent::Nvml::Sample& earlier : *samples) {
          if (earlier.gpu_uuid != later.gpu_uuid || !earlier.mig_instance.empty()) continue;
          const double mean_w = double(later.energy_mj - earlier.energy_mj) / 1000.0 / seconds;
          const double power_w = double(later.power_mw + earlier.power_mw) / 2000.0;
          report.check("sample " + later.gpu_uuid + " energy advances at the power drawn",
                       later.energy_mj > earlier.energy_mj && mean_w > power_w / 2 &&
                           mean_w < power_w * 2 + 10,
                       fmt::format("{:.1f} W from energy, {:.1f} W read", mean_w, power_w));
        }
      }
    }
  }

  // poll_xid_events, twice: registration happens on the first; neither may block.
  for (int poll = 0; poll < 2; ++poll) {
    start = std::chrono::steady_clock::now();
    gp::Result<std::map<std::string, std::vector<int>>> xids = nvml.poll_xid_events();
    const int64_t ms = millis_since(start);
    doc["xid_poll_ms"].push_back(ms);
    if (!xids) {
      report.error("poll_xid_events", xids.error());
      break;
    }
    Json seen = Json::object();
    for (const auto& [uuid, codes] : *xids) seen[uuid] = codes;
    doc["xid"].push_back(seen);
    report.check("poll_xid_events does not block", ms < 5000, std::to_string(ms) + " ms");
  }

  doc["ok"] = !report.failed();
  std::cout << doc.dump(2) << std::endl;
  return report.failed() ? 1 : 0;
}
