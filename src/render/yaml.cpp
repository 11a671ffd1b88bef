// JSON -> YAML through yaml-cpp's emitter. Strings that YAML 1.1 or 1.2 readers (kubectl,
// Go's yaml.v2/v3) would take for a bool, null or number are double-quoted.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
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

}  // namespace

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
