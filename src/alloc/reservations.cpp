// Reservations: a shape of capacity held for a tenant during a time window.
#include <fmt/format.h>

#include "alloc/alloc.h"
#include "alloc/internal.h"
#include "common/env.h"

namespace gp::alloc {
namespace {

std::optional<ReservationState> parse_reservation_state(std::string_view s) {
  return parse_enum<ReservationState>(s, kReservationStateNames);
}

constexpr std::string_view kReservationColumns =
    "id, tenant_id, project_id, offering_id, request, start_at, end_at, state, reason, "
    "created_by, created_at, updated_at, version";

Result<Reservation> reservation_from(const store::Row& row) {
  Reservation r;
  r.id = row.text(0);
  r.tenant_id = row.text(1);
  r.project_id = row.text(2);
  r.offering_id = row.opt_text(3);
  r.request = GP_TRY(detail::request_from(Json::parse(row.text(4))));
  r.request.tenant = r.tenant_id;
  r.request.project = r.project_id;
  r.start_at = row.integer(5);
  r.end_at = row.integer(6);
  r.request.end = from_unix_micros(r.end_at);
  r.state = parse_reservation_state(row.text(7)).value_or(ReservationState::kEnded);
  r.reason = row.text(8);
  r.created_by = row.text(9);
  r.created_at = row.integer(10);
  r.updated_at = row.integer(11);
  r.version = row.integer(12);
  return r;
}

}  // namespace

std::string_view reservation_state_name(ReservationState s) {
  return kReservationStateNames[static_cast<size_t>(s)];
}

Json Reservation::shape_json() const { return detail::shape_json(request); }

Json Reservation::to_json() const { return json_of_fields(*this); }

Result<NewReservation> parse_reservation(store::Tx& tx, const Env& w, const Json& body,
                                         const tenancy::Tenant& tenant,
                                         const tenancy::TenantScope& scope) {
  if (!body.is_object()) return fail(Error::invalid("reservation: a JSON object is required"));
  Json rest = body;
  NewReservation n;
  n.start_at = w.now();
  if (!rest.contains("project") || !rest["project"].is_string())
    return fail(Error::invalid("reservation: \"project\" (the project charged) is required"));
  auto project = GP_TRY(tenancy::find_project(tx, scope, rest["project"].get<std::string>()));
  if (!project) return fail(Error::invalid("reservation: unknown project"));
  rest.erase("project");
  if (rest.contains("start_time")) {
    TimePoint t;
    if (!rest["start_time"].is_string() ||
        !parse_rfc3339(rest["start_time"].get<std::string>(), &t))
      return fail(Error::invalid("start_time must be an RFC 3339 time"));
    n.start_at = std::max(to_unix_micros(t), w.now());
    rest.erase("start_time");
  }
  if (!rest.contains("end_time") && !rest.contains("duration_seconds"))
    return fail(Error::invalid("a reservation needs end_time or duration_seconds"));
  if (rest.contains("duration_seconds") && rest["duration_seconds"].is_number_integer()) {
    // The window lasts duration_seconds from its start.
    rest["end_time"] = detail::ts(n.start_at + rest["duration_seconds"].get<int64_t>() * 1'000'000);
    rest.erase("duration_seconds");
  }
  n.shape = GP_TRY(parse_allocation(tx, w, rest, tenant, *project));
  if (n.shape.request.preemptible)
    return fail(Error::invalid("a reservation cannot be preemptible"));
  if (*n.shape.end_at <= n.start_at)
    return fail(Error::invalid("the window must end after it starts"));
  return n;
}

Result<Page<Reservation>> list_reservations(store::Tx& tx, const tenancy::TenantScope& scope,
                                            const PageRequest& page) {
  std::vector<Reservation> out;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM reservations WHERE tenant_id = ? AND id > ? ORDER BY id "
                       "LIMIT ?",
                       kReservationColumns),
           {scope.tenant_id(), page.after.value_or(""), int64_t{page.limit} + 1})))
    out.push_back(GP_TRY(reservation_from(row)));
  return make_page(std::move(out), page);
}

Result<std::optional<Reservation>> find_reservation(store::Tx& tx,
                                                    const tenancy::TenantScope& scope,
                                                    std::string_view id) {
  auto row =
      GP_TRY(tx.query_one(fmt::format("SELECT {} FROM reservations WHERE id = ? AND tenant_id = ?",
                                      kReservationColumns),
                          {std::string(id), scope.tenant_id()}));
  if (!row) return std::optional<Reservation>{};
  return std::optional<Reservation>(GP_TRY(reservation_from(*row)));
}

Result<Reservation> Service::reserve(store::Tx& tx, const Env& w, const NewReservation& n,
                                     const std::string& actor) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  const std::string id = w.ids.next("rsv");
  const int64_t now = w.now();
  sched::Decision d = s->reserve(id, n.shape.request, from_unix_micros(n.start_at),
                                 from_unix_micros(*n.shape.end_at), from_unix_micros(now));
  if (d.kind == sched::DecisionKind::kRejected) return fail(*d.reason);
  changed_ = true;
  GP_TRY(tx.exec(
      fmt::format("INSERT INTO reservations ({}) VALUES (?,?,?,?,?,?,?,'scheduled',?,?,?,?,1)",
                  kReservationColumns),
      {id, n.shape.request.tenant, n.shape.request.project, store::opt(n.shape.offering_id),
       detail::request_json(n.shape.request).dump(), n.start_at, *n.shape.end_at,
       d.reason ? d.reason->message : "", actor, now, now}));
  if (d.kind == sched::DecisionKind::kPlaced)
    GP_TRY_VOID(record_preempted(tx, w, d.preempted, id, n.shape.request.tenant));
  GP_TRY_VOID(sync_reservations(tx, w));
  return *GP_TRY(find_reservation(tx, tenancy::TenantScope(n.shape.request.tenant), id));
}

Result<Reservation> Service::cancel_reservation(store::Tx& tx, const Env& w,
                                                const tenancy::TenantScope& scope,
                                                const std::string& id) {
  MutexLock lock(mu_);
  auto r = GP_TRY(find_reservation(tx, scope, id));
  if (!r) return fail(Error::not_found("reservation not found"));
  if (r->state != ReservationState::kScheduled && r->state != ReservationState::kActive)
    return fail(Error::conflict(
        fmt::format("the reservation is already {}", reservation_state_name(r->state))));
  sched::Scheduler* s = GP_TRY(ensure(tx));
  changed_ = true;
  if (auto c = s->cancel_reservation(id, w.clock.now());
      !c && c.error().code != ErrorCode::kNotFound)
    return fail(c.error());
  GP_TRY(
      tx.exec("UPDATE reservations SET state = 'cancelled', reason = 'cancelled', updated_at = "
              "?, version = version + 1 WHERE id = ?",
              {w.now(), id}));
  GP_TRY(schedule(tx, w));  // what the hold kept out may fit now
  return *GP_TRY(find_reservation(tx, scope, id));
}

Result<void> Service::sync_reservations(store::Tx& tx, const Env& w) {
  sched::Scheduler* s = &*sched_;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT id, state, reason FROM reservations WHERE state IN ('scheduled','active')"))) {
    const std::string id = row.text(0);
    auto status = s->reservation(id);
    std::string state, reason;
    if (!status) {
      state = "ended";
      reason = "the window has ended";
    } else if (status->used) {
      state = "used";
      reason = "an allocation of the tenant took the held capacity";
    } else if (status->active) {
      state = "active";
      reason = "capacity held for the tenant";
    } else {
      state = "scheduled";
      reason = status->reason ? status->reason->message : "";
    }
    if (state != row.text(1) || reason != row.text(2))
      GP_TRY(
          tx.exec("UPDATE reservations SET state = ?, reason = ?, updated_at = ?, version = "
                  "version + 1 WHERE id = ?",
                  {state, reason, w.now(), id}));
  }
  return ok();
}

namespace detail {

// Reservations still to come or running, back into a rebuilt scheduler.
Result<void> restore_reservations(store::Tx& tx, sched::Scheduler& s, TimePoint now) {
  for (const auto& row : GP_TRY(tx.query(fmt::format(
           "SELECT {} FROM reservations WHERE state IN ('scheduled','active') ORDER BY id",
           kReservationColumns)))) {
    Reservation r = GP_TRY(reservation_from(row));
    (void)s.reserve(r.id, r.request, from_unix_micros(r.start_at), from_unix_micros(r.end_at), now);
  }
  return ok();
}

}  // namespace detail

}  // namespace gp::alloc
