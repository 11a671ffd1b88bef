// A tenant with one of everything (a project, a user, a service account and its key, a role
// binding, a GPU allocation and a GPU VM, a reservation, a finalized invoice, a budget, a
// secret, volumes), created through the API, for the tests of tenant isolation; and what a
// platform admin can read about a tenant, to show that refused requests changed nothing.
#pragma once

#include <map>
#include <string>

#include "integration/harness.h"

namespace gp::it {

struct TenantWorld {
  TenantInfo tenant;
  std::string project_id, user_id, sa_id, key_id, key_token, binding_id, allocation_id,
      reservation_id, invoice_id, vm_id, job_id;
  std::string secret;  // a name only this tenant uses

  // A value for every path parameter of the tenant routes ({tenant}, {project}, ...).
  std::map<std::string, std::string> path_ids() const;
};

// Creates tenant `name` (admin "<name>-admin") and one of everything in it.
TenantWorld populate(TestServer& s, const std::string& name);

// Replaces every {param} of a route pattern; throws on a parameter it has no value for, so a
// new kind of path parameter cannot slip past a test.
std::string fill(const std::string& pattern, const std::map<std::string, std::string>& ids);

// Everything a platform admin can read about a tenant.
Json snapshot(TestServer& s, const std::string& tenant);

}  // namespace gp::it
