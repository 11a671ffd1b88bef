// Reads a multi-document YAML stream into JSON values the way Kubernetes clients do: quoted
// scalars are strings; plain scalars become integers, booleans or null when they look like
// one, strings otherwise.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace gp::testing {

Result<std::vector<Json>> yaml_documents_to_json(const std::string& text);

}  // namespace gp::testing
