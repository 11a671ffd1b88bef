// A small strict JSON-schema validator for tests: the draft-4 subset the Kubernetes schemas in
// ../shared/data/k8s-schemas use (type, properties, additionalProperties, required, enum,
// items, oneOf/anyOf/allOf, $ref to #/..., format int32/int64/date-time/byte/int-or-string,
// min/maxLength, minimum/maximum, pattern). A keyword it does not implement is an error, never
// silently accepted; annotations (description, default, x-kubernetes-*) are ignored.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace gp::testing {

// Whether `v` is of the JSON Schema type named `type` ("integer" is a number without fraction);
// false for an unknown name.
bool type_matches(const std::string& type, const Json& v);

class JsonSchema {
 public:
  explicit JsonSchema(Json schema) : root_(std::move(schema)) {}
  static Result<JsonSchema> load(const std::string& path);

  // Every problem found, as "<path>: <problem>"; empty when `value` is valid.
  std::vector<std::string> validate(const Json& value) const;

 private:
  void check(const Json& schema, const Json& value, const std::string& path,
             std::vector<std::string>& errors) const;
  const Json* resolve(const std::string& ref) const;

  Json root_;
};

}  // namespace gp::testing
