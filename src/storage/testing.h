// Test-only injection points of the storage module; nothing sets them in production. They let a
// test act at the exact moment a race would, so the race is tested deterministically.
#pragma once

#include <functional>
#include <string>

namespace gp::storage::testing {

// Called by audit_tree after it has looked at a directory (fstatat) and before it opens it to
// descend, with the directory's path relative to the audited tree. Pass {} to clear.
void set_audit_descend_hook(std::function<void(const std::string& rel)> hook);

}  // namespace gp::storage::testing
