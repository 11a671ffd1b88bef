// Schema migrations. Never edit a released migration: add a new one. SQL stays within what
// both SQLite and PostgreSQL accept (TEXT, BIGINT, expression indexes, no AUTOINCREMENT).
#include "store/store.h"

namespace gp::store {

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "tenancy_identity_audit", R"SQL(
CREATE TABLE tenants (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  display_name TEXT NOT NULL,
  isolation_class TEXT NOT NULL,
  state TEXT NOT NULL,
  labels TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE TABLE projects (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  name TEXT NOT NULL,
  display_name TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL,
  UNIQUE (tenant_id, name)
);
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  tenant_id TEXT REFERENCES tenants(id),
  username TEXT NOT NULL,
  display_name TEXT NOT NULL,
  email TEXT NOT NULL,
  password_hash TEXT,
  external_subject TEXT,
  state TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE INDEX users_tenant ON users (tenant_id, id);
-- Usernames are unique per tenant (platform users: among themselves), so one tenant can never
-- learn which names another tenant uses.
CREATE UNIQUE INDEX users_username ON users (COALESCE(tenant_id, ''), username);
CREATE TABLE service_accounts (
  id TEXT PRIMARY KEY,
  tenant_id TEXT REFERENCES tenants(id),
  name TEXT NOT NULL,
  description TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE UNIQUE INDEX service_accounts_name ON service_accounts (COALESCE(tenant_id, ''), name);
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  tenant_id TEXT REFERENCES tenants(id),
  owner_kind TEXT NOT NULL,
  owner_id TEXT NOT NULL,
  name TEXT NOT NULL,
  secret_hash TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT,
  revoked_at BIGINT,
  last_used_at BIGINT
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, id);
CREATE INDEX api_keys_owner ON api_keys (owner_id);
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id),
  secret_hash TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  revoked_at BIGINT
);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE TABLE role_bindings (
  id TEXT PRIMARY KEY,
  tenant_id TEXT REFERENCES tenants(id),
  project_id TEXT REFERENCES projects(id),
  subject_kind TEXT NOT NULL,
  subject_id TEXT NOT NULL,
  role TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX role_bindings_unique ON role_bindings
  (subject_kind, subject_id, role, COALESCE(tenant_id, ''), COALESCE(project_id, ''));
CREATE INDEX role_bindings_subject ON role_bindings (subject_id);
CREATE INDEX role_bindings_tenant ON role_bindings (tenant_id, id);
CREATE TABLE audit_log (
  seq BIGINT PRIMARY KEY,
  time_us BIGINT NOT NULL,
  actor TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  action TEXT NOT NULL,
  resource TEXT NOT NULL,
  outcome TEXT NOT NULL,
  request_id TEXT NOT NULL,
  source TEXT NOT NULL,
  detail TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, seq);
CREATE TABLE audit_checkpoints (
  seq BIGINT PRIMARY KEY,
  hash TEXT NOT NULL,
  time_us BIGINT NOT NULL,
  key_id TEXT NOT NULL,
  signature TEXT NOT NULL
);
CREATE TABLE idempotency_keys (
  principal_id TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  method TEXT NOT NULL,
  path TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  status BIGINT NOT NULL,
  body TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (principal_id, idem_key)
);
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
)
)SQL"},
      {2, "fleet", R"SQL(
CREATE TABLE pools (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  tenant_id TEXT REFERENCES tenants(id),
  description TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE TABLE join_tokens (
  id TEXT PRIMARY KEY,
  secret_hash TEXT NOT NULL,
  pool_id TEXT REFERENCES pools(id),
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  used_at BIGINT,
  node_id TEXT
);
CREATE TABLE nodes (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  pool_id TEXT REFERENCES pools(id),
  state TEXT NOT NULL,
  cordoned BIGINT NOT NULL,
  state_reason TEXT NOT NULL,
  cpu_millis BIGINT NOT NULL,
  memory_bytes BIGINT NOT NULL,
  rack TEXT NOT NULL,
  nvlink_domain TEXT NOT NULL,
  labels TEXT NOT NULL,
  source TEXT NOT NULL,
  credential_hash TEXT,
  last_heartbeat BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE INDEX nodes_state ON nodes (state);
CREATE TABLE gpus (
  uuid TEXT PRIMARY KEY,
  node_id TEXT NOT NULL REFERENCES nodes(id),
  idx BIGINT NOT NULL,
  model TEXT NOT NULL,
  product TEXT NOT NULL,
  memory_bytes BIGINT NOT NULL,
  pci_bus_id TEXT NOT NULL,
  numa_node BIGINT NOT NULL,
  nvlink_peers TEXT NOT NULL,
  mig_capable BIGINT NOT NULL,
  mode TEXT NOT NULL,
  mig_layout TEXT NOT NULL,
  health TEXT NOT NULL,
  health_reason TEXT NOT NULL,
  present BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX gpus_node ON gpus (node_id, idx);
CREATE TABLE gpu_samples (
  gpu_uuid TEXT NOT NULL,
  instance TEXT NOT NULL,
  time_us BIGINT NOT NULL,
  util_pct BIGINT NOT NULL,
  mem_used_bytes BIGINT NOT NULL
);
CREATE INDEX gpu_samples_gpu_time ON gpu_samples (gpu_uuid, time_us)
)SQL"},
      {3, "scheduling", R"SQL(
CREATE TABLE offerings (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  tier TEXT NOT NULL,
  models TEXT NOT NULL,
  gpus BIGINT NOT NULL,
  mig_profile TEXT NOT NULL,
  milli BIGINT NOT NULL,
  description TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE TABLE platform_quotas (
  model TEXT PRIMARY KEY,
  hard_limit BIGINT NOT NULL
);
CREATE TABLE tenant_scheduling (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  cohort TEXT NOT NULL,
  weight DOUBLE PRECISION NOT NULL,
  version BIGINT NOT NULL
);
CREATE TABLE quotas (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  project_id TEXT NOT NULL,
  model TEXT NOT NULL,
  nominal BIGINT NOT NULL,
  borrow_limit BIGINT,
  hard_limit BIGINT,
  PRIMARY KEY (tenant_id, project_id, model)
);
CREATE TABLE quota_profile_caps (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  model TEXT NOT NULL,
  profile TEXT NOT NULL,
  max_instances BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, model, profile)
);
CREATE TABLE allocations (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  project_id TEXT NOT NULL REFERENCES projects(id),
  name TEXT NOT NULL,
  offering_id TEXT REFERENCES offerings(id),
  request TEXT NOT NULL,
  priority BIGINT NOT NULL,
  preemptible BIGINT NOT NULL,
  state TEXT NOT NULL,
  reason_code TEXT NOT NULL,
  reason TEXT NOT NULL,
  placement TEXT,
  borrowed_units BIGINT NOT NULL,
  end_at BIGINT,
  grace_until BIGINT,
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  placed_at BIGINT,
  ended_at BIGINT,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE INDEX allocations_state ON allocations (state, created_at);
CREATE INDEX allocations_project ON allocations (tenant_id, project_id, id);
CREATE TABLE allocation_events (
  allocation_id TEXT NOT NULL REFERENCES allocations(id),
  seq BIGINT NOT NULL,
  at BIGINT NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason_code TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (allocation_id, seq)
);
CREATE TABLE allocation_nodes (
  allocation_id TEXT NOT NULL REFERENCES allocations(id),
  node_id TEXT NOT NULL REFERENCES nodes(id),
  PRIMARY KEY (node_id, allocation_id)
);
CREATE TABLE gpu_plans (
  gpu_uuid TEXT PRIMARY KEY REFERENCES gpus(uuid),
  mode TEXT NOT NULL,
  mig_layout TEXT NOT NULL,
  updated_at BIGINT NOT NULL
)
)SQL"},
      {4, "network and secrets", R"SQL(
CREATE TABLE tenant_segments (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  vni BIGINT NOT NULL UNIQUE,
  cidr TEXT NOT NULL UNIQUE,
  created_at BIGINT NOT NULL
);
CREATE TABLE tenant_network_policies (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  policy TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE TABLE tenant_keyrings (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  keyring TEXT NOT NULL,
  destroyed BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE TABLE tenant_secrets (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  name TEXT NOT NULL,
  key_version BIGINT NOT NULL,
  sealed TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, name)
)
)SQL"},
      {5, "reservations", R"SQL(
CREATE TABLE reservations (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  project_id TEXT NOT NULL REFERENCES projects(id),
  offering_id TEXT REFERENCES offerings(id),
  request TEXT NOT NULL,
  start_at BIGINT NOT NULL,
  end_at BIGINT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE INDEX reservations_tenant ON reservations (tenant_id, id)
)SQL"},
      {6, "metering", R"SQL(
CREATE TABLE usage_intervals (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  allocation_id TEXT NOT NULL,
  offering_id TEXT,
  resource_key TEXT NOT NULL,
  quantity BIGINT NOT NULL,
  units BIGINT NOT NULL,
  state TEXT NOT NULL,
  preemptible BIGINT NOT NULL,
  start_us BIGINT NOT NULL,
  end_us BIGINT
);
CREATE INDEX usage_intervals_tenant_time ON usage_intervals (tenant_id, start_us);
CREATE INDEX usage_intervals_time ON usage_intervals (start_us);
CREATE INDEX usage_intervals_allocation ON usage_intervals (allocation_id, end_us);
CREATE INDEX usage_intervals_open ON usage_intervals (allocation_id) WHERE end_us IS NULL;
CREATE TABLE usage_interval_gpus (
  interval_id TEXT NOT NULL REFERENCES usage_intervals(id),
  gpu_uuid TEXT NOT NULL,
  instance TEXT NOT NULL,
  PRIMARY KEY (interval_id, gpu_uuid, instance)
);
CREATE INDEX usage_interval_gpus_gpu ON usage_interval_gpus (gpu_uuid);
CREATE TABLE usage_events (
  tenant_id TEXT NOT NULL,
  source TEXT NOT NULL,
  event_id TEXT NOT NULL,
  project_id TEXT,
  type TEXT NOT NULL,
  time_us BIGINT NOT NULL,
  resource_key TEXT NOT NULL,
  unit TEXT NOT NULL,
  quantity_micro BIGINT NOT NULL,
  received_at BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, source, event_id)
);
CREATE INDEX usage_events_tenant_time ON usage_events (tenant_id, time_us)
)SQL"},
      // Rate card versions are immutable rows: a new version is a new row.
      {7, "billing", R"SQL(
CREATE TABLE rate_cards (
  id TEXT NOT NULL,
  version BIGINT NOT NULL,
  currency TEXT NOT NULL,
  effective_from BIGINT NOT NULL,
  card TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (id, version)
)
)SQL"},
      {8, "workload policy", R"SQL(
CREATE TABLE tenant_workload_policies (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  policy TEXT NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
)
)SQL"},
      // Which rate card prices a tenant, its tax rate and its prepaid credit balance.
      {9, "billing accounts", R"SQL(
CREATE TABLE billing_accounts (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  rate_card_id TEXT NOT NULL,
  tax_bps BIGINT NOT NULL,
  prepaid_credit_micros BIGINT NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
)
)SQL"},
      // Downtime history for SLA accounting (numbered 10: 9 is taken on another branch; the
      // runner applies each version it has not seen, so a gap is harmless). At most one open
      // interval per (node, GPU); gpu_uuid '' is the whole node.
      {10, "sla", R"SQL(
CREATE TABLE downtime_intervals (
  id TEXT PRIMARY KEY,
  node_id TEXT NOT NULL,
  gpu_uuid TEXT NOT NULL,
  cause TEXT NOT NULL,
  start_us BIGINT NOT NULL,
  end_us BIGINT
);
CREATE UNIQUE INDEX downtime_intervals_open ON downtime_intervals (node_id, gpu_uuid)
  WHERE end_us IS NULL;
CREATE INDEX downtime_intervals_node ON downtime_intervals (node_id, end_us);
CREATE INDEX downtime_intervals_time ON downtime_intervals (start_us);
CREATE TABLE offering_slas (
  offering_id TEXT PRIMARY KEY REFERENCES offerings(id),
  sla TEXT NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
)
)SQL"},
      // Budgets per tenant (project_id '') and project; an alert fires once per budget, period
      // and threshold (the unique key), whatever evaluates it.
      {11, "budgets", R"SQL(
CREATE TABLE budgets (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  project_id TEXT NOT NULL,
  amount_micros BIGINT NOT NULL,
  thresholds TEXT NOT NULL,
  hard_stop BIGINT NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, project_id)
);
CREATE TABLE budget_alerts (
  id BIGINT PRIMARY KEY,  -- max + 1 at insert (writers are serialized): ascending, portable
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  period TEXT NOT NULL,
  threshold_bps BIGINT NOT NULL,
  threshold_micros BIGINT NOT NULL,
  amount_micros BIGINT NOT NULL,
  spend_micros BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  UNIQUE (tenant_id, project_id, period, threshold_bps)
);
CREATE INDEX budget_alerts_tenant ON budget_alerts (tenant_id, id)
)SQL"},
      // Invoices built from metered usage: drafts are replaced in place, finalized rows never
      // change again except to become void. A tenant has at most one non-void invoice per period.
      {12, "invoices", R"SQL(
CREATE TABLE invoices (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  period_start BIGINT NOT NULL,
  period_end BIGINT NOT NULL,
  revision BIGINT NOT NULL,
  state TEXT NOT NULL,
  rate_card_id TEXT NOT NULL,
  rate_card_version BIGINT NOT NULL,
  supersedes TEXT REFERENCES invoices(id),
  invoice TEXT NOT NULL,
  total_micros BIGINT NOT NULL,
  currency TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  computed_at BIGINT NOT NULL,
  finalized_at BIGINT,
  voided_at BIGINT,
  void_reason TEXT,
  version BIGINT NOT NULL,
  UNIQUE (tenant_id, period_start, period_end, revision)
);
CREATE UNIQUE INDEX invoices_one_open_per_period ON invoices (tenant_id, period_start, period_end)
  WHERE state <> 'void';
CREATE INDEX invoices_period ON invoices (period_start, period_end, tenant_id)
)SQL"},
      // Tenant storage: each tenant's uid/gid block, its projects' volumes (a row stays, state
      // 'deleting', until the agent has removed the tree, so its id is never handed out while
      // files still carry it), and the deletions the agents execute once due.
      {13, "tenant storage", R"SQL(
CREATE TABLE tenant_storage_ids (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  first_id BIGINT NOT NULL UNIQUE,
  count BIGINT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE TABLE project_volumes (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  project_id TEXT NOT NULL,
  project_name TEXT NOT NULL,
  uid BIGINT NOT NULL,
  size_limits TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, project_id),
  UNIQUE (tenant_id, uid)
);
CREATE TABLE storage_deletions (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  tenant_name TEXT NOT NULL,
  project_name TEXT NOT NULL,
  reason TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  requested_at BIGINT NOT NULL,
  due_at BIGINT NOT NULL,
  state TEXT NOT NULL,
  done_at BIGINT,
  done_by TEXT
);
CREATE INDEX storage_deletions_due ON storage_deletions (state, due_at);
CREATE INDEX storage_deletions_tenant ON storage_deletions (tenant_id, requested_at)
)SQL"},
      // Committed use: an interval of an allocation that took over a reservation's held GPUs
      // names the reservation, and is priced with the rate card's committed discount.
      {14, "committed use", R"SQL(
ALTER TABLE usage_intervals ADD COLUMN reservation_id TEXT
)SQL"},
      // Replicas on one store: the leader names itself here, so that followers can point
      // writers at it (docs/ha.md). One row.
      {15, "control-plane leader", R"SQL(
CREATE TABLE control_plane_leader (
  id INTEGER PRIMARY KEY,
  holder TEXT NOT NULL,
  url TEXT NOT NULL,
  since BIGINT NOT NULL
)
)SQL"},
      // Node mTLS: every client certificate the node CA issued, so that an agent call can be
      // refused the moment its certificate (or its node) is revoked.
      {16, "node certificates", R"SQL(
CREATE TABLE node_certificates (
  serial TEXT PRIMARY KEY,
  node_id TEXT NOT NULL,
  not_before BIGINT NOT NULL,
  not_after BIGINT NOT NULL,
  issued_at BIGINT NOT NULL,
  revoked_at BIGINT,
  revoke_reason TEXT
);
CREATE INDEX node_certificates_node ON node_certificates (node_id, issued_at)
)SQL"},
      // OIDC login (docs/oidc.md): logins in flight (state, nonce and PKCE verifier, single
      // use), users bound to an identity provider's subject, and the role bindings its mapping
      // rules manage (source "oidc:<provider>"; "api" for bindings made through the API).
      {17, "oidc login", R"SQL(
CREATE TABLE oidc_logins (
  state_hash TEXT PRIMARY KEY,
  provider TEXT NOT NULL,
  nonce TEXT NOT NULL,
  code_verifier TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  return_to TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX oidc_logins_expiry ON oidc_logins (expires_at);
CREATE UNIQUE INDEX users_external_subject ON users (external_subject)
  WHERE external_subject IS NOT NULL;
ALTER TABLE role_bindings ADD COLUMN source TEXT NOT NULL DEFAULT 'api'
)SQL"},
      // GPU virtual machines (docs/vms.md): how an offering's units reach the tenant, and the
      // VM shape per unit for delivery "vm".
      {18, "vm delivery", R"SQL(
ALTER TABLE offerings ADD COLUMN delivery TEXT NOT NULL DEFAULT 'container';
ALTER TABLE offerings ADD COLUMN vm_vcpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE offerings ADD COLUMN vm_memory_mib BIGINT NOT NULL DEFAULT 0
)SQL"},
      // One row per VM an allocation of a vm offering has on a node: what the tenant asked of
      // it (desired, reboot_seq) and what the node's agent last reported (state, addresses).
      // console_seq counts the tenant's requests to read the serial console; the agent answers
      // the newest with the console's tail (console_captured_seq, _at, _text).
      // The tenant's SSH public keys go into every VM's cloud-init data.
      {19, "vms", R"SQL(
CREATE TABLE vms (
  id TEXT PRIMARY KEY,
  allocation_id TEXT NOT NULL REFERENCES allocations(id),
  node_id TEXT NOT NULL REFERENCES nodes(id),
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  project_id TEXT NOT NULL,
  domain TEXT NOT NULL,
  uuid TEXT NOT NULL UNIQUE,
  mac TEXT NOT NULL,
  desired TEXT NOT NULL,
  reboot_seq BIGINT NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  addresses TEXT NOT NULL DEFAULT '[]',
  error TEXT NOT NULL DEFAULT '',
  console_seq BIGINT NOT NULL DEFAULT 0,
  console_captured_seq BIGINT NOT NULL DEFAULT 0,
  console_captured_at BIGINT,
  console_text TEXT NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL DEFAULT 1,
  UNIQUE (allocation_id, node_id)
);
CREATE INDEX vms_tenant ON vms (tenant_id, id);
CREATE INDEX vms_node ON vms (node_id);
CREATE TABLE tenant_ssh_keys (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  seq BIGINT NOT NULL,
  public_key TEXT NOT NULL,
  PRIMARY KEY (tenant_id, seq)
)
)SQL"},
      // Kubernetes namespaces and GPU device selection (issue 24). Each project keeps the
      // namespace it was created with ('<tenant>-<project>', NULL beyond 63 characters), unique
      // across the platform, so the admission webhook looks its owner up instead of parsing the
      // name. Existing projects get theirs in creation order; one whose name an older project of
      // another tenant already produced (tenant names extending one another, which tenancy now
      // refuses) gets none. Each node keeps the GPU runtime settings its agent last reported
      // (fleet::GpuRuntime as JSON; NULL: never reported).
      {20, "kubernetes namespaces, gpu runtime", R"SQL(
ALTER TABLE projects ADD COLUMN k8s_namespace TEXT;
UPDATE projects SET k8s_namespace =
  (SELECT t.name FROM tenants t WHERE t.id = projects.tenant_id) || '-' || projects.name
WHERE (SELECT LENGTH(t.name) FROM tenants t WHERE t.id = projects.tenant_id) + 1 +
      LENGTH(projects.name) <= 63
  AND NOT EXISTS (
    SELECT 1 FROM projects p2 JOIN tenants t2 ON t2.id = p2.tenant_id
    WHERE t2.name || '-' || p2.name =
          (SELECT t.name FROM tenants t WHERE t.id = projects.tenant_id) || '-' || projects.name
      AND (p2.created_at < projects.created_at
           OR (p2.created_at = projects.created_at AND p2.id < projects.id)));
CREATE UNIQUE INDEX projects_k8s_namespace ON projects (k8s_namespace);
ALTER TABLE nodes ADD COLUMN gpu_runtime TEXT
)SQL"},
      // Storage by identity (docs/storage.md): each generation of a project's volumes gets its
      // own value, and deletions name the project id and generation of the tree they remove,
      // never only its name. The nodes that hold a tenant's trees, and each node's confirmation
      // of a deletion: a deletion is done once every node that held the trees confirmed it.
      // Existing volumes get a generation derived from their project id; scheduled deletions
      // get the identity of the one deleting generation of their name (none when two share
      // it). Volumes left active by a project deleted before this migration are scheduled for
      // removal seven days (the default grace) after their last change.
      {21, "storage identities", R"SQL(
ALTER TABLE project_volumes ADD COLUMN generation TEXT NOT NULL DEFAULT '';
UPDATE project_volumes SET generation = 'vgen_' || project_id WHERE generation = '';
ALTER TABLE storage_deletions ADD COLUMN project_id TEXT NOT NULL DEFAULT '';
ALTER TABLE storage_deletions ADD COLUMN generation TEXT NOT NULL DEFAULT '';
UPDATE storage_deletions SET
  project_id = (SELECT v.project_id FROM project_volumes v WHERE v.tenant_id =
    storage_deletions.tenant_id AND v.project_name = storage_deletions.project_name AND v.state =
    'deleting'),
  generation = (SELECT v.generation FROM project_volumes v WHERE v.tenant_id =
    storage_deletions.tenant_id AND v.project_name = storage_deletions.project_name AND v.state =
    'deleting')
WHERE project_name <> '' AND state = 'scheduled' AND (SELECT COUNT(*) FROM project_volumes v
  WHERE v.tenant_id = storage_deletions.tenant_id AND v.project_name =
  storage_deletions.project_name AND v.state = 'deleting') = 1;
INSERT INTO storage_deletions (id, tenant_id, tenant_name, project_name, reason, requested_by,
  requested_at, due_at, state, project_id, generation)
SELECT 'sdel_m21_' || v.project_id, v.tenant_id, t.name, v.project_name,
  'project deleted while its volumes were active (migration 21)', 'migration 21', v.updated_at,
  v.updated_at + 604800000000, 'scheduled', v.project_id, v.generation
FROM project_volumes v JOIN tenants t ON t.id = v.tenant_id
WHERE v.state = 'active' AND NOT EXISTS (SELECT 1 FROM projects p WHERE p.id = v.project_id);
UPDATE project_volumes SET state = 'deleting' WHERE state = 'active' AND NOT EXISTS (SELECT 1 FROM
  projects p WHERE p.id = project_volumes.project_id);
CREATE TABLE storage_holders (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  node_id TEXT NOT NULL,
  since BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, node_id)
);
CREATE TABLE storage_deletion_confirmations (
  deletion_id TEXT NOT NULL REFERENCES storage_deletions(id),
  node_id TEXT NOT NULL,
  outcome TEXT NOT NULL,
  detail TEXT NOT NULL,
  confirmed_at BIGINT NOT NULL,
  PRIMARY KEY (deletion_id, node_id)
)
)SQL"},
      // OIDC logins in flight are capped per provider (iam::oidc::save_pending_login counts
      // them on every login start).
      {22, "oidc logins per provider", R"SQL(
CREATE INDEX oidc_logins_provider ON oidc_logins (provider, expires_at)
)SQL"},
      // Jobs (docs/jobs.md), owned by the jobs module (jobs/records.h). An allocation made for a
      // job turns active when the job's containers run, not at the node's next heartbeat
      // (allocations.activation 'workload'). A job's members are its containers, one row per
      // rank for the current attempt. Each job keeps the registries its tenant's workload policy
      // allowed and whether it pulls every time, as of its submission, for the node's own check.
      // job_logs keeps the tail of each member's output with the count of bytes received from the
      // node (so a report sent twice is appended once) and of bytes dropped to stay within the
      // job's bound.
      {23, "jobs", R"SQL(
ALTER TABLE allocations ADD COLUMN activation TEXT NOT NULL DEFAULT 'node';
CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  project_id TEXT NOT NULL REFERENCES projects(id),
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  offering_id TEXT NOT NULL REFERENCES offerings(id),
  allocation_id TEXT NOT NULL REFERENCES allocations(id),
  state TEXT NOT NULL,
  failure TEXT NOT NULL,
  reason TEXT NOT NULL,
  exit_code BIGINT,
  attempts BIGINT NOT NULL,
  image_digest TEXT NOT NULL,
  pull_always BIGINT NOT NULL,
  registries TEXT NOT NULL,
  cancel_requested_at BIGINT,
  started_at BIGINT,
  ended_at BIGINT,
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version BIGINT NOT NULL
);
CREATE INDEX jobs_project ON jobs (tenant_id, project_id, id);
CREATE INDEX jobs_allocation ON jobs (allocation_id);
CREATE INDEX jobs_state ON jobs (state);
CREATE UNIQUE INDEX jobs_live_name ON jobs (tenant_id, project_id, name)
  WHERE state IN ('queued', 'starting', 'running');
CREATE TABLE job_events (
  job_id TEXT NOT NULL REFERENCES jobs(id),
  seq BIGINT NOT NULL,
  at BIGINT NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
CREATE TABLE job_members (
  job_id TEXT NOT NULL REFERENCES jobs(id),
  rank BIGINT NOT NULL,
  attempt BIGINT NOT NULL,
  node_id TEXT NOT NULL,
  state TEXT NOT NULL,
  exit_code BIGINT,
  oom BIGINT NOT NULL,
  failure TEXT NOT NULL,
  error TEXT NOT NULL,
  address TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (job_id, rank)
);
CREATE INDEX job_members_node ON job_members (node_id);
CREATE TABLE job_logs (
  job_id TEXT NOT NULL REFERENCES jobs(id),
  rank BIGINT NOT NULL,
  attempt BIGINT NOT NULL,
  received BIGINT NOT NULL,
  dropped BIGINT NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (job_id, rank)
)
)SQL"},
      // The address each node's agent reaches other nodes from (--underlay-address), for the
      // tenant VXLANs that join job members across nodes (docs/jobs.md, "Network").
      {24, "node underlay addresses", R"SQL(
ALTER TABLE nodes ADD COLUMN underlay_address TEXT
)SQL"},
      // What a container offering's unit may use of its node's CPU and memory (docs/jobs.md,
      // "Limits"); 0: the node's share.
      {25, "offering container shapes", R"SQL(
ALTER TABLE offerings ADD COLUMN unit_cpu_millis BIGINT NOT NULL DEFAULT 0;
ALTER TABLE offerings ADD COLUMN unit_memory_mib BIGINT NOT NULL DEFAULT 0
)SQL"},
      // The work of an ended allocation still on a node (docs/lifecycle.md, "Stopping work"):
      // its GPUs pass to their next holder only once the node's agent no longer holds it.
      // stop_by: when the grace period ends (SIGKILL, destroy); grace_seconds its length.
      {26, "allocation stops", R"SQL(
CREATE TABLE allocation_stops (
  allocation_id TEXT NOT NULL REFERENCES allocations(id),
  node_id TEXT NOT NULL REFERENCES nodes(id),
  since BIGINT NOT NULL,
  stop_by BIGINT NOT NULL,
  grace_seconds BIGINT NOT NULL,
  PRIMARY KEY (node_id, allocation_id)
);
CREATE INDEX allocation_stops_allocation ON allocation_stops (allocation_id)
)SQL"},
      // A drain's deadline (docs/fleet.md, "Drain"): what still runs then is evicted. And each
      // attempt of a job: where it ran, under which allocation, how it ended (docs/jobs.md).
      {27, "drain deadlines and job attempts", R"SQL(
ALTER TABLE nodes ADD COLUMN drain_deadline BIGINT;
CREATE TABLE job_attempts (
  job_id TEXT NOT NULL REFERENCES jobs(id),
  attempt BIGINT NOT NULL,
  allocation_id TEXT NOT NULL,
  nodes TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  ended_at BIGINT,
  end_reason TEXT NOT NULL,
  PRIMARY KEY (job_id, attempt)
)
)SQL"},
      // GPU repair and health history (docs/fleet.md, "GPU health and repair"): a GPU an
      // operator took out of service, and every XID and uncorrected-ECC report, repair and return.
      {28, "gpu repairs and health history", R"SQL(
CREATE TABLE gpu_repairs (
  gpu_uuid TEXT PRIMARY KEY,
  node_id TEXT NOT NULL REFERENCES nodes(id),
  since BIGINT NOT NULL,
  reason TEXT NOT NULL,
  actor TEXT NOT NULL
);
CREATE TABLE gpu_health_events (
  gpu_uuid TEXT NOT NULL,
  seq BIGINT NOT NULL,
  node_id TEXT NOT NULL,
  at BIGINT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  ecc_uncorrected BIGINT NOT NULL,
  PRIMARY KEY (gpu_uuid, seq)
)
)SQL"},
      {29, "gpu plan status as the node reports it", R"SQL(
ALTER TABLE gpu_plans ADD COLUMN status TEXT NOT NULL DEFAULT 'planned';
ALTER TABLE gpu_plans ADD COLUMN detail TEXT NOT NULL DEFAULT '';
ALTER TABLE gpu_plans ADD COLUMN reported_at BIGINT
)SQL"},
      // What an invoice is addressed to and when it is due; invoice numbers, unique, given in
      // issue order.
      {30, "invoice parties and numbers", R"SQL(
ALTER TABLE billing_accounts ADD COLUMN legal_name TEXT NOT NULL DEFAULT '';
ALTER TABLE billing_accounts ADD COLUMN billing_address TEXT NOT NULL DEFAULT '';
ALTER TABLE billing_accounts ADD COLUMN payment_terms_days BIGINT NOT NULL DEFAULT 30;
ALTER TABLE invoices ADD COLUMN number TEXT;
CREATE UNIQUE INDEX invoices_number ON invoices (number)
)SQL"},
      // The inventory a node last reported, as a digest, and when it was last applied: a
      // heartbeat repeating it skips the GPU rows (fleet::inventory_unchanged).
      {31, "last applied inventory of a node", R"SQL(
ALTER TABLE nodes ADD COLUMN inventory_digest TEXT;
ALTER TABLE nodes ADD COLUMN inventory_applied_at BIGINT
)SQL"},
      // A tenant's projects in id order: a page of them reads its own rows, not the tenant's
      // every project sorted.
      {32, "projects by tenant in id order", R"SQL(
CREATE INDEX projects_tenant_id ON projects (tenant_id, id)
)SQL"},
      // The latest reading of every GPU and MIG instance, replaced by each heartbeat's samples
      // (fleet::record_samples): what /metrics serves, without scanning the sample series.
      {33, "latest gpu telemetry", R"SQL(
CREATE TABLE gpu_telemetry (
  gpu_uuid TEXT NOT NULL,
  instance TEXT NOT NULL,
  node_id TEXT NOT NULL,
  time_us BIGINT NOT NULL,
  util_pct BIGINT NOT NULL,
  mem_used_bytes BIGINT NOT NULL,
  mem_total_bytes BIGINT NOT NULL,
  power_mw BIGINT NOT NULL,
  energy_mj BIGINT NOT NULL,
  temperature_c BIGINT NOT NULL,
  sm_clock_mhz BIGINT NOT NULL,
  ecc_corrected BIGINT NOT NULL,
  ecc_uncorrected BIGINT NOT NULL,
  PRIMARY KEY (gpu_uuid, instance)
)
)SQL"},
      // What each node last reported of each tenant tree it holds: whether it is encrypted under
      // the tenant's key, and its permission audit (storage::save_storage_report).
      {34, "storage reports of the nodes", R"SQL(
CREATE TABLE storage_reports (
  node_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  encrypted BIGINT NOT NULL,
  encryption_detail TEXT NOT NULL,
  finding_count BIGINT NOT NULL,
  findings TEXT NOT NULL,
  audited_at BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, node_id)
)
)SQL"},
  };
  return kMigrations;
}

}  // namespace gp::store
