// Jobs on the control plane (docs/jobs.md): the jobs module's rows in the store (migration 23:
// jobs, job_events, job_members, job_logs), read and written only here. A job is submitted with
// its allocation (alloc::Service queues or places it under quota, class, fair share and
// preemption as any other), follows its allocation (placed: starting; ended: the job ends with
// it), is carried to the nodes its allocation uses (node_assignment, in the heartbeat's reply)
// and advanced by their agents' reports (apply_reports): running once every member runs (its
// allocation turns active then, not before), finished once its members have exited, which
// releases its allocation. Functions over the caller's write transaction.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "alloc/alloc.h"
#include "common/env.h"
#include "common/page.h"
#include "common/record.h"
#include "jobs/jobs.h"
#include "storage/storage.h"
#include "store/store.h"
#include "tenancy/tenancy.h"

namespace gp::jobs {

// The output each job keeps: the last kMaxLogBytes of its members' stdout and stderr together,
// divided evenly among its members; older output is dropped and counted.
inline constexpr int64_t kMaxLogBytes = 1 << 20;
// The most of a member's output one report may carry; the agent sends the rest next time.
inline constexpr size_t kMaxLogChunk = 256 * 1024;

// clang-tidy 16 finds a throw inside nlohmann::json's noexcept special members, which this
// struct's implicit ones call.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Job {
  std::string id, tenant_id, project_id, offering_id, allocation_id;
  JobSpec spec;
  State state = State::kQueued;
  Failure failure = Failure::kNone;
  std::string reason;
  std::optional<int64_t> exit_code;
  int attempts = 0;  // starts so far
  std::string image_digest;
  // The tenant's workload policy when it was submitted: the node checks the image again.
  bool pull_always = false;
  std::vector<std::string> allowed_registries;
  // The job is being stopped (cancel, or its maximum duration passed: failure kDeadline); it
  // ends once its members have stopped.
  std::optional<int64_t> stop_requested_at;
  std::optional<int64_t> started_at, ended_at;
  std::string created_by;
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json to_json() const;
  // The failure's name; nullopt for none.
  std::optional<std::string> failure_shown() const;
};

struct JobEvent {
  int64_t seq = 0, at = 0;
  std::string from, to, reason;
  Json to_json() const;
};

// One container of the job's current attempt.
struct Member {
  int rank = 0, attempt = 0;
  std::string node_id;
  // "pending" (not reported yet), "starting" (its container made, not running yet), "running",
  // "exited", "failed" (could not start), "stopped" (stopped before it ever ran: no container)
  std::string state = "pending";
  std::optional<int> exit_code;
  bool oom = false;
  Failure failure = Failure::kNone;  // "failed": why it never started
  std::string error;
  int64_t updated_at = 0;
  std::string address;  // on the tenant's network; empty: the tenant has no segment
  Json to_json() const;
};

// What submit needs besides the spec, resolved by the caller.
struct Submission {
  const tenancy::Tenant& tenant;
  const tenancy::Project& project;
  std::vector<std::string> allowed_registries;  // the tenant's workload policy; empty: any
  bool pull_always = false;                     // the class's rule or the tenant's policy
  storage::IdPoolConfig id_pool;                // the tenant's id block comes from here
  std::string actor;
};

// Validates the spec against the catalog, the tenant's registries and its project's volumes,
// then creates the job with its allocation (queued or already starting). invalid_argument for a
// spec that can never run; the scheduler's refusals (class, impossible shape) pass through.
Result<Job> submit(store::Tx& tx, const Env& w, alloc::Service& service, const JobSpec& spec,
                   const Submission& s);

Result<std::optional<Job>> find_job(store::Tx& tx, const tenancy::TenantScope& scope,
                                    std::string_view id);
struct JobFilter {
  std::optional<std::string> project_id;
  std::optional<State> state;
};
Result<Page<Job>> list_jobs(store::Tx& tx, const tenancy::TenantScope& scope,
                            const JobFilter& filter, const PageRequest& page);
// The job of every allocation a job not yet ended holds: allocation id -> job id.
Result<std::map<std::string, std::string>> live_job_allocations(store::Tx& tx);
// Every job, by state name.
Result<std::map<std::string, int64_t>> count_jobs_by_state(store::Tx& tx);
Result<std::vector<JobEvent>> list_job_events(store::Tx& tx, const std::string& job_id);
Result<std::vector<Member>> list_members(store::Tx& tx, const std::string& job_id);
// Every attempt so far, oldest first: [{attempt, allocation_id, nodes, started_at, ended_at,
// end_reason}]. A member started again on its node is an attempt; so is the job placed again
// on other nodes after its node was lost or drained (a new allocation).
Result<Json> list_attempts(store::Tx& tx, const std::string& job_id);

// Stops the job: a queued one ends at once (its allocation withdrawn); a starting or running
// one is stopped on its nodes (SIGTERM, SIGKILL after kStopGraceSeconds) and ends cancelled
// once its members have stopped. conflict for a job that has ended.
Result<Job> cancel(store::Tx& tx, const Env& w, alloc::Service& service,
                   const tenancy::TenantScope& scope, std::string_view id,
                   const std::string& actor);

// Brings every live job in line with its allocation: placed, it starts; ended (released,
// preempted, its node failed), the job ends with it. Running jobs past their maximum duration
// are stopped. Returns the jobs changed.
Result<int> sync(store::Tx& tx, const Env& w, alloc::Service& service);

// What node `node_id` runs for jobs: one entry per member of a live job's current attempt
// placed there, with everything the agent needs to start it inside the tenant's boundaries
// (docs/jobs.md lists the fields), volume paths relative to the node's storage root, and the
// names of the secrets it mounts while it has not started (the caller opens them: secrets are
// the api module's).
Result<Json> node_assignment(store::Tx& tx, const std::string& node_id);

// An agent's report of one member (heartbeat "jobs": [...]).
struct MemberReport {
  std::string job;
  int rank = 0, attempt = 0;
  std::string state;  // as Member::state, never "pending"
  std::optional<int> exit_code;
  bool oom = false;
  Failure failure = Failure::kNone;  // "failed": kImagePull or kStartFailed
  std::string error, image_digest;
  // The member's output between bytes `log_offset` and `log_end` of the node's log file for
  // this attempt, as text. Kept only when it continues what the control plane has (the
  // assignment's `log_offset`), so a report sent twice is kept once.
  int64_t log_offset = 0, log_end = 0;
  std::string log;
};
// Strict: unknown fields, wrong types, oversize output are invalid_argument.
Result<std::vector<MemberReport>> parse_reports(const Json& j);
// Records the reports of `node_id` (reports of members not placed there are ignored) and moves
// the jobs they complete. Returns the job state changes, for the audit trail.
Result<Json> apply_reports(store::Tx& tx, const Env& w, alloc::Service& service,
                           const std::string& node_id, const std::vector<MemberReport>& reports);

// A member's kept output: bytes [start, end) of everything it wrote over its attempts (each
// attempt after the first opens with a marker line); what came before `start` was dropped.
struct MemberLog {
  int rank = 0;
  std::string text;
  int64_t start = 0, end = 0;
};
Result<std::vector<MemberLog>> job_logs(store::Tx& tx, const std::string& job_id);

// The last `lines` lines of `text` (0: all of it).
std::string tail_lines(std::string_view text, int lines);

}  // namespace gp::jobs

namespace gp {

// A job as stored and shown (common/record.h). Its spec is stored as its JSON, with its name as
// a column of its own (unique among the project's live jobs), and shown as is; its failure is
// stored by name ("" for none) and shown as that name or null. The registries its tenant allowed
// when it was submitted are stored only.
template <>
struct Fields<jobs::Job> {
  using J = jobs::Job;
  static constexpr auto list = std::tuple{
      Field{"id", &J::id},
      Field{"tenant_id", &J::tenant_id},
      Field{"project_id", &J::project_id},
      Derived<J>{"name", [](const J& j) { return j.spec.name; }},
      Derived<J, Json>{"spec", [](const J& j) { return j.spec.to_json(); }},
      Field{"offering_id", &J::offering_id},
      Field{"allocation_id", &J::allocation_id},
      Field{"state", &J::state, {}, Form::kEnum, jobs::kJobStateNames},
      Field{"failure", &J::failure, {}, Form::kEnum, jobs::kFailureNames, Shown::kStoredOnly},
      Derived<J, std::optional<std::string>>{
          "failure", [](const J& j) { return j.failure_shown(); },
          std::span<const std::string_view>(jobs::kFailureNames).subspan(1)},
      Field{"reason", &J::reason},
      Field{"exit_code", &J::exit_code},
      Field{"attempts", &J::attempts},
      Field{"image_digest", &J::image_digest, {}, Form::kNullIfEmpty},
      Field{"pull_always", &J::pull_always},
      Field{"stop_requested_at", &J::stop_requested_at, "cancel_requested_at", Form::kTime},
      Field{"started_at", &J::started_at, {}, Form::kTime},
      Field{"ended_at", &J::ended_at, {}, Form::kTime},
      Field{"created_by", &J::created_by},
      Field{"created_at", &J::created_at, {}, Form::kTime},
      Field{"updated_at", &J::updated_at, {}, Form::kTime},
      Field{"version", &J::version},
      Field{"allowed_registries",
            &J::allowed_registries,
            "registries",
            Form::kPlain,
            {},
            Shown::kStoredOnly},
  };
};

}  // namespace gp
