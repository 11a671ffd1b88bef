// JSON <-> YAML through yaml-cpp. Writing: strings that YAML 1.1 or 1.2 readers (kubectl, Go's
// yaml.v2/v3) would take for a bool, null or number are double-quoted. Reading: YAML 1.2's core
// schema for plain scalars.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "render/render.h"

namespace gp::render {
namespace {

bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::set<std::string, std::less<>> kReserved = {
      "y",    "Y",    "yes",   "Yes",   "YES",   "n",    "N",    "no",    "No",   "NO",   "true",
      "True", "TRUE", "false", "False", "FALSE", "on",   "On",   "ON",    "off",  "Off",  "OFF",
      "null", "Null", "NULL",  "~",     ".inf",  ".Inf", ".INF", "-.inf", ".nan", ".NaN", ".NAN"};
  if (kReserved.contains(s)) return true;
  // Anything that starts like a number (digits, sign, dot) may read as one: quote it.
  unsigned char first = static_cast<unsigned char>(s.front());
  if (std::isdigit(first) || first == '-' || first == '+' || first == '.') return true;
  // Plain scalars are safe only from a conservative alphabet.
  return !std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == '/' || c == '@';
  });
}

void emit(YAML::Emitter& out, const Json& v) {
  switch (v.type()) {
    case Json::value_t::object:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      out << YAML::BeginMap;
      for (const auto& [k, val] : v.items()) {
        out << YAML::Key;
        if (needs_quotes(k))
          out << YAML::DoubleQuoted << k;
        else
          out << k;
        out << YAML::Value;
        emit(out, val);
      }
      out << YAML::EndMap;
      break;
    case Json::value_t::array:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        break;
      }
      out << YAML::BeginSeq;
      for (const auto& val : v) emit(out, val);
      out << YAML::EndSeq;
      break;
    case Json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (needs_quotes(s))
        out << YAML::DoubleQuoted << s;
      else
        out << s;
      break;
    }
    case Json::value_t::boolean:
      out << YAML::TrueFalseBool << v.get<bool>();
      break;
    case Json::value_t::number_integer:
      out << v.get<int64_t>();
      break;
    case Json::value_t::number_unsigned:
      out << v.get<uint64_t>();
      break;
    case Json::value_t::number_float:
      out << v.get<double>();
      break;
    default:
      out << YAML::Null;
      break;
  }
}

// A plain scalar under YAML 1.2's core schema: null, bool, integer or float when it reads as
// one (an integer too large for 64 bits becomes a float), else the string itself.
Json plain_scalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const char* first = s.data() + (s[0] == '+' ? 1 : 0);
  const char* last = s.data() + s.size();
  auto numeric = std::all_of(first, last, [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == 'e' ||
           c == 'E' || c == '+';
  });
  if (!numeric || first == last) return s;
  int64_t i = 0;
  if (auto [end, ec] = std::from_chars(first, last, i); ec == std::errc() && end == last) return i;
  double d = 0;
  if (auto [end, ec] = std::from_chars(first, last, d); ec == std::errc() && end == last) return d;
  return s;
}

Json from_node(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = from_node(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (const auto& item : n) out.push_back(from_node(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      // "!" marks a quoted (non-plain) scalar: always a string.
      return n.Tag() == "!" ? Json(n.Scalar()) : plain_scalar(n.Scalar());
    default:
      return nullptr;
  }
}

}  // namespace

Result<std::vector<Json>> from_yaml(std::string_view text) {
  try {
    std::vector<Json> out;
    for (const auto& doc : YAML::LoadAll(std::string(text)))
      if (!doc.IsNull()) out.push_back(from_node(doc));
    return out;
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, std::string("YAML: ") + e.what());
  }
}

std::string to_yaml(const Json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  // Empty maps and sequences are written in flow style ("{}", "[]") by emit().
  emit(out, value);
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace gp::render
