// A small OpenAPI schema checker for the tests: $ref, type, enum, format date-time, objects
// (required, additionalProperties: false, or a map's values against additionalProperties'
// schema) and arrays, recursively. The integration suite's TestServer runs it on every JSON
// answer it receives (integration/harness.cpp), so each test that calls a route also checks that
// route's published schema against what its handler returned; the process tests check the
// answers of the routes only a real binary serves.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"

namespace gp::it {

// Appends to `errors` where `v` departs from `schema` (resolving $refs in `doc`).
void check_schema(const Json& doc, const Json& schema, const Json& v, const std::string& where,
                  std::vector<std::string>* errors);
// Checks that `schema` is a schema object all the way down: $refs resolve, and properties,
// items and additionalProperties hold schema objects too.
void check_well_formed(const Json& doc, const Json& schema, const std::string& where,
                       std::vector<std::string>* errors);
// Checks an answer (its status and JSON body) against the schema the document gives for
// (method, pattern).
::testing::AssertionResult MatchesOpenApi(const Json& doc, const std::string& method,
                                          const std::string& pattern, int status, const Json& body);
// The document's path pattern ("/v1/tenants/{tenant}") that `target` (a path, with or without
// a query) matches for `method`; nullopt when none does.
std::optional<std::string> route_of(const Json& doc, const std::string& method,
                                    const std::string& target);

}  // namespace gp::it
