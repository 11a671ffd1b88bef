#include "support/openapi_check.h"

#include <algorithm>

#include "common/clock.h"
#include "support/json_schema.h"

namespace gp::it {
namespace {

std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

}  // namespace

void check_schema(const Json& doc, const Json& schema, const Json& v, const std::string& where,
                  std::vector<std::string>* errors) {
  if (schema.is_null()) return;  // {}: anything goes
  if (!schema.is_object()) {
    errors->push_back(where + ": the document's schema is not an object: " + schema.dump());
    return;
  }
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"];
    const std::string prefix = "#/components/schemas/";
    if (!ref.starts_with(prefix) ||
        !doc["components"]["schemas"].contains(ref.substr(prefix.size()))) {
      errors->push_back(where + ": unresolvable $ref " + ref);
      return;
    }
    check_schema(doc, doc["components"]["schemas"][ref.substr(prefix.size())], v, where, errors);
    return;
  }
  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_array())
      for (const auto& t : schema["type"]) types.push_back(t);
    else
      types.push_back(schema["type"]);
    if (std::none_of(types.begin(), types.end(),
                     [&](const auto& t) { return gp::testing::type_matches(t, v); }))
      errors->push_back(where + ": " + v.dump() + " is not of type " + schema["type"].dump());
  }
  if (schema.contains("enum") && !v.is_null()) {
    const auto& e = schema["enum"];
    if (std::find(e.begin(), e.end(), v) == e.end())
      errors->push_back(where + ": " + v.dump() + " not in " + e.dump());
  }
  if (schema.value("format", "") == "date-time" && v.is_string()) {
    TimePoint t;
    if (!parse_rfc3339(v.get<std::string>(), &t))
      errors->push_back(where + ": " + v.dump() + " is not RFC 3339");
  }
  if (v.is_object() && (schema.contains("properties") || schema.contains("additionalProperties"))) {
    const Json props = schema.value("properties", Json::object());
    const Json others = schema.value("additionalProperties", Json(true));
    for (const auto& req : schema.value("required", Json::array()))
      if (!v.contains(req.get<std::string>()))
        errors->push_back(where + ": required property '" + req.get<std::string>() + "' missing");
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props.contains(it.key()))
        check_schema(doc, props[it.key()], it.value(), where + "." + it.key(), errors);
      else if (others == false)
        errors->push_back(where + ": property '" + it.key() + "' is not in the schema");
      else if (others.is_object())  // a map's values (per GPU model, per label)
        check_schema(doc, others, it.value(), where + "." + it.key(), errors);
    }
  }
  if (v.is_array() && schema.contains("items"))
    for (size_t i = 0; i < v.size(); ++i)
      check_schema(doc, schema["items"], v[i], where + "[" + std::to_string(i) + "]", errors);
}

void check_well_formed(const Json& doc, const Json& schema, const std::string& where,
                       std::vector<std::string>* errors) {
  if (!schema.is_object()) {
    errors->push_back(where + " is not a schema object: " + schema.dump());
    return;
  }
  if (schema.contains("$ref")) {
    const std::string prefix = "#/components/schemas/";
    std::string ref = schema["$ref"].is_string() ? schema["$ref"].get<std::string>() : "";
    if (!ref.starts_with(prefix) ||
        !doc["components"]["schemas"].contains(ref.substr(prefix.size())))
      errors->push_back(where + ": unresolvable $ref " + schema["$ref"].dump());
    return;
  }
  if (schema.contains("properties"))
    for (const auto& [k, v] : schema["properties"].items())
      check_well_formed(doc, v, where + ".properties." + k, errors);
  if (schema.contains("items")) check_well_formed(doc, schema["items"], where + ".items", errors);
  if (schema.contains("additionalProperties") && !schema["additionalProperties"].is_boolean())
    check_well_formed(doc, schema["additionalProperties"], where + ".additionalProperties", errors);
}

::testing::AssertionResult MatchesOpenApi(const Json& doc, const std::string& method,
                                          const std::string& pattern, int status,
                                          const Json& body) {
  const std::string m = lower(method);
  const Json* op = nullptr;
  if (doc["paths"].contains(pattern) && doc["paths"][pattern].contains(m))
    op = &doc["paths"][pattern][m];
  if (!op) return ::testing::AssertionFailure() << "no operation " << method << " " << pattern;
  const std::string code = std::to_string(status);
  if (!(*op)["responses"].contains(code))
    return ::testing::AssertionFailure() << method << " " << pattern << " documents no " << code;
  const auto& resp = (*op)["responses"][code];
  if (!resp.contains("content"))
    return ::testing::AssertionFailure() << method << " " << pattern << " documents no body";
  std::vector<std::string> errors;
  check_schema(doc, resp["content"]["application/json"]["schema"], body, "body", &errors);
  if (errors.empty()) return ::testing::AssertionSuccess();
  auto f = ::testing::AssertionFailure() << method << " " << pattern << ":";
  for (const auto& e : errors) f << "\n  " << e;
  return f;
}

std::optional<std::string> route_of(const Json& doc, const std::string& method,
                                    const std::string& target) {
  const std::string path = target.substr(0, target.find('?'));
  const auto want = segments(path);
  const std::string m = lower(method);
  std::optional<std::string> best;
  int best_literal =
      -1;  // a literal segment beats a {parameter}: /nodes/summary over /nodes/{node}
  for (const auto& [pattern, ops] : doc["paths"].items()) {
    if (!ops.contains(m)) continue;
    const auto have = segments(pattern);
    if (have.size() != want.size()) continue;
    int literal = 0;
    bool match = true;
    for (size_t i = 0; i < have.size() && match; ++i) {
      if (have[i].starts_with("{") && have[i].ends_with("}"))
        match = !want[i].empty();
      else if (have[i] == want[i])
        ++literal;
      else
        match = false;
    }
    if (match && literal > best_literal) {
      best = pattern;
      best_literal = literal;
    }
  }
  return best;
}

}  // namespace gp::it
