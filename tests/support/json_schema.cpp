#include "support/json_schema.h"

#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace gp::testing {

Result<JsonSchema> JsonSchema::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(ErrorCode::kNotFound, "cannot read schema " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  Json j = Json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail(ErrorCode::kInvalidArgument, "schema " + path + " is not a JSON object");
  return JsonSchema(std::move(j));
}

std::vector<std::string> JsonSchema::validate(const Json& value) const {
  std::vector<std::string> errors;
  check(root_, value, "$", errors);
  return errors;
}

const Json* JsonSchema::resolve(const std::string& ref) const {
  if (!ref.starts_with("#")) return nullptr;
  try {
    const Json& target = root_.at(Json::json_pointer(ref.substr(1)));
    return &target;
  } catch (const std::exception&) {
    return nullptr;
  }
}

namespace {

bool is_base64(const std::string& s) {
  if (s.size() % 4 != 0) return false;
  size_t pad = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '=') {
      if (i + 2 < s.size()) return false;
      ++pad;
      continue;
    }
    if (pad > 0) return false;
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/')) return false;
  }
  return true;
}

}  // namespace

bool type_matches(const std::string& type, const Json& v) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer();
  return false;
}

void JsonSchema::check(const Json& schema, const Json& value, const std::string& path,
                       std::vector<std::string>& errors) const {
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) errors.push_back(path + ": not allowed");
    return;
  }
  if (!schema.is_object()) {
    errors.push_back(path + ": schema is not an object");
    return;
  }
  static const std::set<std::string, std::less<>> kKnown = {
      "type",       "properties", "additionalProperties",
      "required",   "enum",       "items",
      "oneOf",      "anyOf",      "allOf",
      "$ref",       "format",     "maxLength",
      "minLength",  "minimum",    "maximum",
      "pattern",    "minItems",   "maxItems",
      "uniqueItems"};
  static const std::set<std::string, std::less<>> kAnnotations = {
      "description", "default", "$schema", "title", "id", "definitions"};
  for (const auto& [k, _] : schema.items()) {
    if (kKnown.contains(k) || kAnnotations.contains(k) || k.starts_with("x-kubernetes-")) continue;
    errors.push_back(
        fmt::format("{}: schema keyword \"{}\" is not supported by this validator", path, k));
  }
  if (auto it = schema.find("$ref"); it != schema.end()) {
    const Json* target = it->is_string() ? resolve(it->get<std::string>()) : nullptr;
    if (target == nullptr) {
      errors.push_back(fmt::format("{}: unresolvable $ref {}", path, it->dump()));
      return;
    }
    check(*target, value, path, errors);
  }
  if (auto it = schema.find("type"); it != schema.end()) {
    bool ok = false;
    if (it->is_string()) ok = type_matches(it->get<std::string>(), value);
    if (it->is_array())
      for (const auto& t : *it)
        ok = ok || (t.is_string() && type_matches(t.get<std::string>(), value));
    if (!ok) {
      errors.push_back(
          fmt::format("{}: {} is not of type {}", path, value.dump().substr(0, 60), it->dump()));
      return;
    }
  }
  if (auto it = schema.find("enum"); it != schema.end() && it->is_array()) {
    if (std::find(it->begin(), it->end(), value) == it->end())
      errors.push_back(fmt::format("{}: {} is not one of {}", path, value.dump(), it->dump()));
  }
  for (std::string_view combiner : {"oneOf", "anyOf"}) {
    auto it = schema.find(combiner);
    if (it == schema.end()) continue;
    int matches = 0;
    for (const auto& sub : *it) {
      std::vector<std::string> sub_errors;
      check(sub, value, path, sub_errors);
      if (sub_errors.empty()) ++matches;
    }
    bool ok = combiner == "oneOf" ? matches == 1 : matches >= 1;
    if (!ok)
      errors.push_back(fmt::format("{}: {} matches {} of the {} alternatives ({})", path,
                                   value.dump().substr(0, 60), matches, it->size(), combiner));
  }
  if (auto it = schema.find("allOf"); it != schema.end())
    for (const auto& sub : *it) check(sub, value, path, errors);
  if (auto it = schema.find("format"); it != schema.end() && it->is_string()) {
    const std::string f = it->get<std::string>();
    if (f == "int32" && value.is_number_integer()) {
      auto n = value.get<int64_t>();
      if (n < INT32_MIN || n > INT32_MAX) errors.push_back(path + ": out of int32 range");
    } else if (f == "int64" && value.is_number()) {
      if (!value.is_number_integer()) errors.push_back(path + ": not an int64");
    } else if (f == "date-time" && value.is_string()) {
      static const std::regex kRfc3339(
          R"(^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$)");
      if (!std::regex_match(value.get<std::string>(), kRfc3339))
        errors.push_back(path + ": not an RFC 3339 date-time");
    } else if (f == "byte" && value.is_string()) {
      if (!is_base64(value.get<std::string>())) errors.push_back(path + ": not base64");
    } else if (f == "int-or-string") {
      if (!value.is_string() && !value.is_number_integer())
        errors.push_back(path + ": not an int-or-string");
    } else if (f != "int32" && f != "int64" && f != "date-time" && f != "byte" &&
               f != "int-or-string" && f != "double") {
      errors.push_back(
          fmt::format("{}: format \"{}\" is not supported by this validator", path, f));
    }
  }
  if (value.is_string()) {
    size_t len = 0;  // code points
    for (unsigned char c : value.get_ref<const std::string&>()) len += (c & 0xC0) != 0x80;
    if (auto it = schema.find("maxLength"); it != schema.end() && len > it->get<size_t>())
      errors.push_back(fmt::format("{}: longer than {}", path, it->get<size_t>()));
    if (auto it = schema.find("minLength"); it != schema.end() && len < it->get<size_t>())
      errors.push_back(fmt::format("{}: shorter than {}", path, it->get<size_t>()));
    if (auto it = schema.find("pattern"); it != schema.end()) {
      std::regex re(it->get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(value.get<std::string>(), re))
        errors.push_back(fmt::format("{}: does not match {}", path, it->get<std::string>()));
    }
  }
  if (value.is_number()) {
    if (auto it = schema.find("minimum");
        it != schema.end() && value.get<double>() < it->get<double>())
      errors.push_back(fmt::format("{}: below {}", path, it->dump()));
    if (auto it = schema.find("maximum");
        it != schema.end() && value.get<double>() > it->get<double>())
      errors.push_back(fmt::format("{}: above {}", path, it->dump()));
  }
  if (value.is_object()) {
    const Json* props = nullptr;
    if (auto it = schema.find("properties"); it != schema.end()) props = &*it;
    if (auto it = schema.find("required"); it != schema.end())
      for (const auto& r : *it)
        if (!value.contains(r.get<std::string>()))
          errors.push_back(
              fmt::format("{}: required field \"{}\" is missing", path, r.get<std::string>()));
    auto extra = schema.find("additionalProperties");
    for (const auto& [k, v] : value.items()) {
      std::string child = fmt::format("{}.{}", path, k);
      if (props != nullptr && props->contains(k)) {
        check((*props)[k], v, child, errors);
      } else if (extra != schema.end()) {
        if (extra->is_boolean() && !extra->get<bool>())
          errors.push_back(fmt::format("{}: unknown field \"{}\"", path, k));
        else
          check(*extra, v, child, errors);
      }
    }
  }
  if (value.is_array()) {
    if (auto it = schema.find("items"); it != schema.end())
      for (size_t i = 0; i < value.size(); ++i)
        check(*it, value[i], fmt::format("{}[{}]", path, i), errors);
    if (auto it = schema.find("minItems"); it != schema.end() && value.size() < it->get<size_t>())
      errors.push_back(path + ": too few items");
    if (auto it = schema.find("maxItems"); it != schema.end() && value.size() > it->get<size_t>())
      errors.push_back(path + ": too many items");
  }
}

}  // namespace gp::testing
