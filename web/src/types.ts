// The API's JSON shapes the console reads (docs/api.md; src/api/handlers_*.cpp).

export interface Page<T> {
  items: T[];
  next: string | null;
}

export interface RoleBinding {
  id: string;
  role: string;
  tenant_id: string | null;
  project_id: string | null;
}

export interface Principal {
  kind: 'user' | 'service_account' | 'node';
  id: string;
  name: string;
  tenant_id: string | null;
  credential_id: string;
  role_bindings: RoleBinding[];
}

export interface LoginResponse {
  session_id: string;
  expires_at: string;
  principal: Principal;
  csrf_token?: string;
}

export interface OidcProvider {
  name: string;
  display_name: string;
  login_url: string;
}

export interface Tenant {
  id: string;
  name: string;
  display_name: string;
  isolation_class: string;
  state: string;
  labels: Record<string, string>;
  created_at: string;
  updated_at: string;
  version: number;
}

export interface Project {
  id: string;
  tenant_id: string;
  name: string;
  display_name: string;
  created_at: string;
  updated_at: string;
  version: number;
}

export interface ApiKey {
  id: string;
  tenant_id: string | null;
  owner_kind: string;
  owner_id: string;
  name: string;
  state: 'active' | 'revoked' | 'expired' | string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
}

export interface CreatedApiKey extends ApiKey {
  token: string;
}

export interface Node {
  id: string;
  name: string;
  pool_id: string | null;
  state: string;
  cordoned: boolean;
  schedulable: boolean;
  state_reason: string;
  cpu_millis: number;
  memory_bytes: number;
  rack: string;
  nvlink_domain: string;
  labels: Record<string, string>;
  source: string;
  last_heartbeat: string | null;
  created_at: string;
  updated_at: string;
  version: number;
}

export interface MigInstance {
  profile: string;
  start: number;
}

export interface Gpu {
  uuid: string;
  index: number;
  model: string;
  product?: string;
  memory_bytes: number;
  pci_bus_id: string;
  numa_node: number;
  mig_capable: boolean;
  mode: 'whole' | 'mig' | 'time-sliced' | string;
  mig_instances: MigInstance[];
  node_id: string;
  health: 'healthy' | 'unhealthy' | 'missing' | string;
  health_reason: string;
}

export interface NodeWithGpus extends Node {
  gpus: Gpu[];
}

export interface ModelSummary {
  total: number;
  healthy: number;
  unhealthy: number;
  missing: number;
  allocated: number;
  free: number;
  by_mode: Record<string, number>;
}

export interface FleetSummary {
  gpus_total: number;
  gpus_by_model: Record<string, ModelSummary>;
  nodes_by_state: Record<string, number>;
}

export interface PlacementGpu {
  node: string;
  gpu: string;
  index: number;
  mig?: MigInstance;
  milli?: number;
}

export interface Placement {
  model: string;
  tier: string;
  gpu_equivalents: string;
  whole_nodes: boolean;
  nodes: string[];
  gpus: PlacementGpu[];
}

export interface Shape {
  tier?: string;
  models?: string[];
  count?: number;
  node_count?: number;
  gpus_per_node?: number;
  mig_profile?: string;
  milli?: number;
  [key: string]: unknown;
}

export interface Allocation {
  id: string;
  tenant_id: string;
  project_id: string;
  name: string;
  offering_id: string | null;
  shape: Shape;
  priority_class: string;
  state: string;
  reason_code: string;
  reason: string;
  placement: Placement | null;
  created_by: string;
  created_at: string;
  placed_at: string | null;
  ended_at: string | null;
  end_time: string | null;
  version: number;
}

export interface DryRun {
  dry_run: true;
  would_place: boolean;
  shape: Shape;
  placement?: Placement;
  reason_code?: string;
  reason?: string;
}

export interface Offering {
  id: string;
  name: string;
  tier: string;
  models: string[];
  gpus: number;
  mig_profile: string | null;
  milli: number | null;
  description: string;
  allowed?: boolean;
  not_allowed_because?: string;
}

export interface AuditRecord {
  seq: number;
  time: string;
  actor: string;
  tenant_id: string | null;
  action: string;
  resource: string;
  outcome: string;
  request_id: string;
  source: string;
  detail: unknown;
  hash: string;
}

export interface AuditVerification {
  ok: boolean;
  records_checked: number;
  checkpoints_checked: number;
  first_bad_seq: number | null;
  reason: string;
  last_seq: number;
  head_hash: string;
}

export interface PostureControl {
  id: string;
  layer: string;
  title: string;
  status: 'pass' | 'fail' | 'not_applicable' | string;
  required: boolean;
  summary: string;
  remediation: string;
}

export interface Posture {
  tenant: { id: string; name: string };
  isolation_class: string;
  checked_at: string;
  counts: { pass: number; fail: number; not_applicable: number };
  failing: string[];
  layers: { layer: string; controls: PostureControl[] }[];
}

// ---- Tenant account pages: members, invoices, budgets (handlers_identity, _invoices, _budget) ----

export interface User {
  id: string;
  tenant_id: string | null;
  username: string;
  display_name: string;
  email: string;
  state: 'active' | 'disabled' | string;
  created_at: string;
  updated_at: string;
  version: number;
}

export interface ServiceAccount {
  id: string;
  tenant_id: string | null;
  name: string;
  description: string;
  state: string;
  created_at: string;
  updated_at: string;
  version: number;
}

/** A role binding as /role-bindings lists it (whoami's RoleBinding names no subject). */
export interface RoleBindingRecord {
  id: string;
  tenant_id: string | null;
  project_id: string | null;
  subject_kind: 'user' | 'service_account';
  subject_id: string;
  role: string;
  created_at: string;
  /** "api", or "oidc:<provider>" for bindings the provider's rules set at each login. */
  source: string;
}

/** One row of GET .../invoices. Amounts are integer micro-units of `currency`. */
export interface InvoiceSummary {
  id: string;
  /** "<tenant>/<YYYY-MM>" and "#<revision>" from the second revision on. */
  label: string;
  tenant: string;
  period: string;
  state: 'draft' | 'finalized' | 'void' | string;
  revision: number;
  currency: string;
  rate_card: { id: string; version: number };
  lines: number;
  subtotal_micros: number;
  total_micros: number;
  computed_at: string;
  supersedes?: string;
}

export interface InvoiceLine {
  /** A project id. */
  project: string;
  resource_key: string;
  price_key: string;
  model: string;
  class: 'committed' | 'on_demand' | 'spot' | string;
  tier: number;
  /** Exact unit-hours as a six-decimal string. */
  quantity_unit_hours: string;
  unit_price_micros: number;
  gross_micros: number;
  discount_bps: number;
  discount_micros: number;
  amount_micros: number;
  offering?: string;
}

export interface InvoiceCredit {
  offering: string;
  credit_bps: number;
  charge_micros: number;
  amount_micros: number;
  reason: string;
}

export interface Invoice {
  id: string;
  label: string;
  tenant: string;
  period: { start: string; end: string; label: string };
  currency: string;
  rate_card: { id: string; version: number };
  state: 'draft' | 'finalized' | 'void' | string;
  revision: number;
  usage_records: number;
  lines: InvoiceLine[];
  sla_credits: InvoiceCredit[];
  subtotal_micros: number;
  sla_credit_micros: number;
  taxable_micros: number;
  tax_bps: number;
  tax_micros: number;
  prepaid_available_micros: number;
  prepaid_applied_micros: number;
  prepaid_carried_micros: number;
  total_micros: number;
  supersedes?: string;
  supersedes_label?: string;
  finalized_at?: string;
  voided_at?: string;
  void_reason?: string;
  created_by: string;
  created_at: string;
  computed_at: string;
  version: number;
}

/** A budget with its month-to-date spend (spend_micros null and spend_error when unrated). */
export interface Budget {
  tenant_id: string;
  /** null: the whole tenant. */
  project_id: string | null;
  amount_micros: number;
  thresholds_bps: number[];
  hard_stop: boolean;
  updated_by: string;
  updated_at: string;
  version: number;
  period?: string;
  /** The rate card's currency; null while nothing was priced this month. */
  currency?: string | null;
  spend_micros: number | null;
  spent_bps?: number;
  percent?: number;
  spend_error?: string;
}

export interface BudgetAlert {
  id: string;
  tenant_id: string;
  project_id: string | null;
  period: string;
  threshold_bps: number;
  threshold_micros: number;
  amount_micros: number;
  spend_micros: number;
  created_at: string;
}

// ---- Insight pages: queue, usage, SLA standing (handlers_alloc, _usage, _sla) ----

/** One waiting allocation of GET /v1/queue or .../queue; `position` is in the whole queue for
 * operators, among the tenant's own entries for a tenant's principals. */
export interface QueueEntry {
  position: number;
  id: string;
  tenant_id: string;
  project_id: string;
  priority_class: string;
  /** The request: tier, models, count... with priority, preemptible and isolation. */
  shape: Shape;
  reason_code: 'quota_exceeded' | 'insufficient_capacity' | string;
  reason: string;
  submitted_at: string;
  /** The tenant's decayed GPU time in scheduler unit-seconds (7000 units a GPU). */
  fair_share_usage: number;
}

export interface Queue {
  items: QueueEntry[];
  /** Entries in the whole queue (operators), or the tenant's own (a tenant's principals). */
  length: number;
}

/** A usage rollup row: allocation rows carry GPU-hours, event rows a quantity of a unit. */
export interface UsageRow {
  kind: 'allocation' | 'event';
  period_start: string;
  period_end: string;
  /** With group_by=tenant, or on a tenant's report. */
  tenant_id?: string;
  /** With group_by=project; null for events posted without a project. */
  project_id?: string | null;
  resource_key?: string;
  offering_id?: string | null;
  allocated_unit_us?: string;
  allocated_gpu_hours?: number;
  sampled_gpu_hours?: number;
  utilized_gpu_hours?: number;
  utilization?: number | null;
  intervals?: number;
  unit?: string;
  /** An exact decimal string. */
  quantity?: string;
  events?: number;
}

export interface UsageReport {
  from: string;
  to: string;
  granularity: 'hour' | 'day' | 'month';
  group_by: string[];
  units_per_gpu: number;
  rows: UsageRow[];
}

/** A tenant's standing against one offering's SLA in a month. */
export interface SlaStandingItem {
  tenant_id: string;
  tenant: string;
  offering_id: string;
  offering: string;
  target_ppm: number;
  /** "99.9%". */
  target: string;
  /** "99.876543%": exact to six decimals. */
  availability: string;
  availability_ppm: number;
  met_target: boolean;
  entitled_gpu_hours: number;
  downtime_gpu_minutes: number;
  entitled_unit_us: string;
  downtime_unit_us: string;
  /** The credit tier reached, in basis points of the offering's charge (0: none). */
  credit_bps: number;
  reason: string;
}

export interface SlaStanding {
  /** "YYYY-MM" (UTC). */
  period: string;
  from: string;
  to: string;
  /** The figures count up to this time (the period's end once it is over). */
  as_of: string;
  items: SlaStandingItem[];
}

/** A GPU VM (GET /v1/tenants/{t}/vms, docs/vms.md). */
export interface Vm {
  id: string;
  allocation_id: string;
  node_id: string;
  tenant_id: string;
  project_id: string;
  domain: string;
  desired: 'running' | 'stopped';
  reboot_seq: number;
  state: string;
  addresses: string[];
  error: string | null;
  console_seq: number;
  created_at: string;
  updated_at: string;
  version: number;
}

/** A capture of a VM's serial console (POST/GET .../vms/{vm}/console). */
export interface VmConsole {
  vm: string;
  domain: string;
  state: string;
  requested_seq: number;
  captured_seq: number;
  captured_at: string | null;
  current: boolean;
  text: string;
}

// ---- jobs (docs/jobs.md; src/api/handlers_jobs.cpp, src/jobs/records.cpp) ----

export type JobState = 'queued' | 'starting' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'preempted';
export type JobFailure = 'exit_code' | 'oom' | 'node_lost' | 'image_pull' | 'deadline' | 'start_failed';

/** What was submitted (POST .../jobs), as the API echoes it. */
export interface JobSpec {
  name: string;
  image: string;
  command: string[];
  args: string[];
  env: { name: string; value: string }[];
  offering: string;
  count: number;
  /** Members started together or not at all. */
  gang: number;
  volumes: { kind: string; read_only: boolean }[];
  secrets: string[];
  max_duration_seconds: number;
  restart_policy: string;
  retries: number;
}

/** A job as listed (GET /v1/tenants/{t}/jobs). */
export interface Job {
  id: string;
  tenant_id: string;
  project_id: string;
  name: string;
  spec: JobSpec;
  offering_id: string;
  allocation_id: string;
  state: JobState;
  failure: JobFailure | null;
  reason: string;
  exit_code: number | null;
  /** Starts so far. */
  attempts: number;
  image_digest: string | null;
  stop_requested_at: string | null;
  started_at: string | null;
  ended_at: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
  version: number;
}

/** One container of the job's current attempt. */
export interface JobMember {
  rank: number;
  attempt: number;
  node_id: string;
  /** "pending" (not reported yet), "starting", "running", "exited", "failed" (never started). */
  state: string;
  exit_code: number | null;
  oom: boolean;
  failure: JobFailure | null;
  error: string | null;
  updated_at: string;
}

export interface JobEvent {
  seq: number;
  at: string;
  from: string;
  to: string;
  reason: string;
}

/** One attempt of a job: where it ran and how it ended (a lost node, a drain's deadline, ...). */
export interface JobAttempt {
  attempt: number;
  allocation_id: string;
  nodes: string[];
  node_names: string[];
  started_at: string;
  ended_at: string | null;
  end_reason: string;
}

/** One job (GET .../jobs/{id}, and the answer to a cancel). */
export interface JobDetail extends Job {
  members: JobMember[];
  events: JobEvent[];
  attempt_history: JobAttempt[];
  /** Absent when the allocation cannot be read any more. */
  allocation?: { id: string; state: string; reason_code: string; reason: string };
}

/** GET .../jobs/{id}/logs?tail=N: each member's kept output. */
export interface JobLogs {
  job: string;
  state: JobState;
  finished: boolean;
  limit_bytes: number;
  members: {
    rank: number;
    /** Byte offsets of `text` in everything the member wrote. */
    start: number;
    end: number;
    /** Output before this byte was dropped (the job keeps its last limit_bytes). */
    dropped_before: number;
    text: string;
  }[];
}

/** GET .../jobs/{job}/utilization: each GPU's samples from the job's start, in spans. */
export interface JobUtilization {
  job: string;
  allocation: string;
  from: string | null;
  to: string | null;
  gpus: {
    node: string;
    gpu: string;
    /** "" for a whole GPU, "<profile>@<start>" for a MIG instance. */
    instance: string;
    points: { time: string; util_pct: number; mem_used_bytes: number; samples: number }[];
  }[];
}
