#include "support/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <regex>

namespace gp::testing {
namespace {

Json convert(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = convert(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (const auto& item : n) out.push_back(convert(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: always a string
      static const std::regex kInt(R"(^[-+]?[0-9]+$)");
      if (std::regex_match(s, kInt)) return std::stoll(s);
      if (s == "true") return true;
      if (s == "false") return false;
      if (s == "null" || s == "~" || s.empty()) return nullptr;
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace

Result<std::vector<Json>> yaml_documents_to_json(const std::string& text) {
  try {
    std::vector<Json> out;
    for (const auto& doc : YAML::LoadAll(text)) out.push_back(convert(doc));
    return out;
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, std::string("YAML: ") + e.what());
  }
}

}  // namespace gp::testing
