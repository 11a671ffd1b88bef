#include "agent/gpu_runtime.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace gp::agent {
namespace {

constexpr std::string_view kAcceptEnvKey = "accept-nvidia-visible-devices-envvar-when-unprivileged";
constexpr std::string_view kAcceptMountsKey = "accept-nvidia-visible-devices-as-volume-mounts";

std::string_view trim_toml(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// The net '[' minus ']' of a value line, outside strings and before a comment.
int bracket_depth(std::string_view v) {
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    char c = v[i];
    if (quote != 0) {
      if (c == '\\' && quote == '"') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '#') break;
    if (c == '"' || c == '\'') quote = c;
    if (c == '[') ++depth;
    if (c == ']') --depth;
  }
  return depth;
}

// The key of a `key = value` line and the value text; nullopt when the line is not one.
struct TomlAssignment {
  std::string key;
  bool bare = true;  // a bare key may be dotted (a key in a table), a quoted one never
  std::string_view value;
};
std::optional<TomlAssignment> split_assignment(std::string_view line) {
  TomlAssignment a;
  size_t eq = 0;
  if (line.front() == '"' || line.front() == '\'') {
    size_t close = line.find(line.front(), 1);
    if (close == std::string_view::npos) return std::nullopt;
    a.key = std::string(line.substr(1, close - 1));
    a.bare = false;
    eq = line.find('=', close + 1);
    if (eq == std::string_view::npos || !trim_toml(line.substr(close + 1, eq - close - 1)).empty())
      return std::nullopt;
  } else {
    eq = line.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    a.key = std::string(trim_toml(line.substr(0, eq)));
    if (a.key.empty()) return std::nullopt;
  }
  a.value = trim_toml(line.substr(eq + 1));
  return a;
}

}  // namespace

Result<ToolkitSettings> parse_toolkit_config(std::string_view toml) {
  ToolkitSettings out;
  bool in_table = false;
  // A multi-line value still open from an earlier line: its lines are skipped.
  enum class Open : uint8_t { kNone, kBasicString, kLiteralString, kArray } open = Open::kNone;
  int array_depth = 0;
  std::set<std::string, std::less<>> seen;
  size_t line_no = 0;
  std::istringstream in{std::string(toml)};
  for (std::string raw; std::getline(in, raw);) {
    ++line_no;
    std::string_view line = trim_toml(raw);
    if (open == Open::kBasicString || open == Open::kLiteralString) {
      if (line.find(open == Open::kBasicString ? "\"\"\"" : "'''") != std::string_view::npos)
        open = Open::kNone;
      continue;
    }
    if (open == Open::kArray) {
      array_depth += bracket_depth(line);
      if (array_depth <= 0) open = Open::kNone;
      continue;
    }
    if (line.empty() || line.front() == '#') continue;
    if (line.front() == '[') {  // [table] or [[array of tables]]: the top level has ended
      in_table = true;
      continue;
    }
    auto a = split_assignment(line);
    if (!a)
      return fail(Error::invalid(fmt::format("line {}: not a TOML key = value line", line_no)));
    for (std::string_view ml : {"\"\"\"", "'''"}) {
      if (a->value.starts_with(ml) && a->value.find(ml, 3) == std::string_view::npos)
        open = ml == "\"\"\"" ? Open::kBasicString : Open::kLiteralString;
    }
    if (open == Open::kNone && a->value.starts_with('[')) {
      array_depth = bracket_depth(a->value);
      if (array_depth > 0) open = Open::kArray;
    }
    if (in_table) continue;
    std::optional<bool>* target = nullptr;
    if (a->key == kAcceptEnvKey) target = &out.accepts_env_unprivileged;
    if (a->key == kAcceptMountsKey) target = &out.accepts_volume_mounts;
    if (target == nullptr) continue;
    if (!seen.insert(a->key).second)
      return fail(Error::invalid(fmt::format("line {}: {} is set twice", line_no, a->key)));
    std::string_view v = a->value;
    if (auto hash = v.find('#'); hash != std::string_view::npos) v = trim_toml(v.substr(0, hash));
    if (v != "true" && v != "false")
      return fail(Error::invalid(fmt::format("line {}: {} is \"{}\", not true or false", line_no,
                                             a->key, v.substr(0, 64))));
    *target = v == "true";
  }
  if (open != Open::kNone)
    return fail(Error::invalid("a multi-line string or array is never closed"));
  return out;
}

Result<std::vector<std::string>> parse_device_list_strategy(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = list.find(',', start);
    std::string_view item =
        trim_toml(list.substr(start, comma == list.npos ? list.npos : comma - start));
    if (!fleet::known_device_list_strategy(item))
      return fail(Error::invalid(fmt::format(
          "device list strategy \"{}\": expected envvar, volume-mounts, cdi-annotations or cdi-cri",
          item.substr(0, 64))));
    if (std::find(out.begin(), out.end(), item) == out.end()) out.emplace_back(item);
    if (comma == list.npos) return out;
    start = comma + 1;
  }
}

Result<std::vector<std::string>> parse_device_plugin_config(std::string_view yaml) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    YAML::Node strategy = root["flags"]["plugin"]["deviceListStrategy"];
    if (!strategy || strategy.IsNull()) return std::vector<std::string>{};
    if (strategy.IsScalar()) return parse_device_list_strategy(strategy.as<std::string>());
    if (!strategy.IsSequence())
      return fail(Error::invalid("flags.plugin.deviceListStrategy is neither a string nor a list"));
    std::string joined;
    for (const auto& item : strategy) {
      if (!item.IsScalar())
        return fail(Error::invalid("flags.plugin.deviceListStrategy lists a non-string"));
      joined += (joined.empty() ? "" : ",") + item.as<std::string>();
    }
    if (joined.empty()) return std::vector<std::string>{};
    return parse_device_list_strategy(joined);
  } catch (const YAML::Exception& e) {
    return fail(Error::invalid(fmt::format("not YAML: {}", e.what())));
  }
}

fleet::GpuRuntime read_gpu_runtime(const GpuRuntimeSources& sources) {
  namespace fs = std::filesystem;
  auto read = [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  fleet::GpuRuntime g;
  std::vector<std::string> details;
  g.toolkit_config = sources.toolkit_config;
  std::error_code ec;
  const bool exists = fs::exists(sources.toolkit_config, ec);
  if (!exists && !ec) {
    g.toolkit_config_state = "absent";
    g.accepts_env_unprivileged = true;  // the toolkit's defaults
    g.accepts_volume_mounts = false;
  } else if (auto text = exists && fs::is_regular_file(sources.toolkit_config, ec)
                             ? read(sources.toolkit_config)
                             : std::nullopt;
             !text) {
    g.toolkit_config_state = "unreadable";
    details.push_back(fmt::format("cannot read {}", sources.toolkit_config));
  } else if (auto settings = parse_toolkit_config(*text); !settings) {
    g.toolkit_config_state = "unreadable";
    details.push_back(fmt::format("{}: {}", sources.toolkit_config, settings.error().message));
  } else {
    g.toolkit_config_state = "read";
    g.accepts_env_unprivileged = settings->accepts_env_unprivileged.value_or(true);
    g.accepts_volume_mounts = settings->accepts_volume_mounts.value_or(false);
  }
  if (!sources.device_list_strategy.empty()) {
    if (auto s = parse_device_list_strategy(sources.device_list_strategy)) {
      g.device_list_strategy = std::move(*s);
      g.strategy_source = "flag";
    } else {
      details.push_back(s.error().message);
    }
  } else if (!sources.device_plugin_config.empty()) {
    auto text = read(sources.device_plugin_config);
    auto s = text ? parse_device_plugin_config(*text)
                  : Result<std::vector<std::string>>(fail(Error::invalid("cannot read it")));
    if (!s) {
      details.push_back(fmt::format("{}: {}", sources.device_plugin_config, s.error().message));
    } else if (s->empty()) {
      details.push_back(fmt::format(
          "{} sets no flags.plugin.deviceListStrategy (the plugin's default is envvar unless its "
          "DEVICE_LIST_STRATEGY says otherwise)",
          sources.device_plugin_config));
    } else {
      g.device_list_strategy = std::move(*s);
      g.strategy_source = "device-plugin-config";
    }
  } else {
    details.emplace_back(
        "device list strategy unknown: start the agent with --device-list-strategy or "
        "--device-plugin-config");
  }
  for (const auto& d : details) g.detail += (g.detail.empty() ? "" : "; ") + d;
  if (g.detail.size() > 1024) g.detail.resize(1024);
  return g;
}

}  // namespace gp::agent
