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
