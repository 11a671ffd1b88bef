#include "agent/enforce.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>

#include "agent/fscrypt.h"
#include "common/crypto.h"
#include "common/files.h"

namespace gp::agent {
namespace {

Result<const Json*> member(const Json& j, const char* key, bool (Json::*is)() const,
                           const char* type) {
  if (!j.is_object() || !j.contains(key) || !(j.at(key).*is)())
    return fail(Error::invalid(fmt::format("assignment: '{}' missing or not {}", key, type)));
  return &j.at(key);
}

Result<std::string> text_of(const Json& j, const char* key) {
  const Json* v = GP_TRY(member(j, key, &Json::is_string, "a string"));
  return v->get<std::string>();
}

// Identities must name something: an empty id would match nothing recorded.
Result<std::string> nonempty_text_of(const Json& j, const char* key) {
  auto text = GP_TRY(text_of(j, key));
  if (text.empty()) return fail(Error::invalid(fmt::format("assignment: '{}' is empty", key)));
  return text;
}

Result<uint32_t> u32_of(const Json& j, const char* key) {
  const Json* v = GP_TRY(member(j, key, &Json::is_number_integer, "an integer"));
  if (v->get<int64_t>() < 0 || v->get<int64_t>() > int64_t{UINT32_MAX})
    return fail(Error::invalid(fmt::format("assignment: '{}' out of range", key)));
  return static_cast<uint32_t>(v->get<int64_t>());
}

}  // namespace

Result<Assignment> parse_assignment(const Json& j) {
  Assignment a;
  auto supernet = GP_TRY(network::parse_cidr(GP_TRY(text_of(j, "supernet"))));
  for (const auto& s : *GP_TRY(member(j, "segments", &Json::is_array, "an array"))) {
    network::Segment seg;
    seg.tenant = GP_TRY(text_of(s, "tenant"));
    seg.vni = GP_TRY(u32_of(s, "vni"));
    seg.cidr = GP_TRY(network::parse_cidr(GP_TRY(text_of(s, "cidr"))));
    a.net.segments.push_back(std::move(seg));
  }
  GP_TRY_VOID(network::validate_segments(a.net.segments));
  for (const auto& p : *GP_TRY(member(j, "policies", &Json::is_array, "an array"))) {
    std::string tenant = GP_TRY(text_of(p, "tenant"));
    const Json* body = GP_TRY(member(p, "policy", &Json::is_object, "an object"));
    a.net.policies.push_back(GP_TRY(network::policy_from_json(*body, tenant, supernet)));
  }
  for (const auto& v : *GP_TRY(member(j, "volumes", &Json::is_array, "an array"))) {
    storage::TenantVolumes tv;
    tv.tenant = GP_TRY(text_of(v, "tenant"));
    tv.tenant_id = GP_TRY(nonempty_text_of(v, "tenant_id"));
    if (!GP_TRY(member(v, "held", &Json::is_boolean, "a boolean"))->get<bool>())
      a.unheld.insert(tv.tenant_id);
    const Json* ids = GP_TRY(member(v, "ids", &Json::is_object, "an object"));
    tv.ids = {GP_TRY(u32_of(*ids, "first")), GP_TRY(u32_of(*ids, "count"))};
    for (const auto& p : *GP_TRY(member(v, "projects", &Json::is_array, "an array"))) {
      storage::ProjectVolumes pv;
      pv.project = GP_TRY(text_of(p, "project"));
      pv.id = GP_TRY(u32_of(p, "id"));
      pv.project_id = GP_TRY(nonempty_text_of(p, "project_id"));
      pv.generation = GP_TRY(nonempty_text_of(p, "generation"));
      const Json* limits = GP_TRY(member(p, "size_limits", &Json::is_object, "an object"));
      for (const auto& [kind, bytes] : limits->items()) {
        auto k = storage::parse_volume_kind(kind);
        if (!k || !bytes.is_number_integer() || bytes.get<int64_t>() < 1)
          return fail(Error::invalid("assignment: bad size limit " + kind));
        pv.size_limits.emplace_back(*k, static_cast<uint64_t>(bytes.get<int64_t>()));
      }
      tv.projects.push_back(std::move(pv));
    }
    // The core re-checks names, ranges and ids before anything touches the disk.
    GP_TRY(storage::plan_layout(tv));
    if (v.contains("encryption_key") && !v.at("encryption_key").is_null()) {
      auto key = base64url_decode(GP_TRY(text_of(v, "encryption_key")));
      if (!key || key->size() != storage::kVolumeKeyBytes)
        return fail(Error::invalid(
            fmt::format("assignment: the encryption key of tenant {} is not {} bytes of base64url",
                        tv.tenant, storage::kVolumeKeyBytes)));
      a.volume_keys[tv.tenant_id] = std::move(*key);
    }
    a.volumes.push_back(std::move(tv));
  }
  for (const auto& d : *GP_TRY(member(j, "storage_deletions", &Json::is_array, "an array"))) {
    DueDeletion due{.id = GP_TRY(nonempty_text_of(d, "id")),
                    .tenant = GP_TRY(text_of(d, "tenant")),
                    .project = GP_TRY(text_of(d, "project"))};
    due.expected.identity = {.tenant_id = GP_TRY(nonempty_text_of(d, "tenant_id")),
                             .project_id = GP_TRY(text_of(d, "project_id")),
                             .generation = GP_TRY(text_of(d, "generation"))};
    // Null when the control plane no longer knows the uid: only a recorded identity (or an
    // empty directory) then lets the tree be removed.
    if (!d.is_object() || !d.contains("owner"))
      return fail(Error::invalid("assignment: 'owner' missing"));
    if (!d.at("owner").is_null()) due.expected.owner = GP_TRY(u32_of(d, "owner"));
    a.deletions.push_back(std::move(due));
  }
  return a;
}

Assignment::~Assignment() {
  for (auto& [tenant, key] : volume_keys) OPENSSL_cleanse(key.data(), key.size());
}

Result<std::vector<network::Workload>> parse_workloads(const Json& j) {
  if (!j.is_object())
    return fail(
        Error::invalid("workloads: expected an object of NAME: {tenant, interface, "
                       "address}"));
  std::vector<network::Workload> out;
  for (const auto& [name, w] : j.items()) {
    if (!w.is_object())
      return fail(Error::invalid(fmt::format("workloads.{}: must be an object", name)));
    ObjectReader r(w, "workloads." + name);
    network::Workload wl;
    wl.name = name;
    wl.tenant = r.string("tenant", 63);
    wl.interface = r.string("interface", 15);
    std::string address = r.string("address", 15);
    GP_TRY_VOID(r.finish());
    auto a = network::parse_ipv4(address);
    if (!a)
      return fail(Error::invalid(fmt::format("workloads.{}.address: {}", name, a.error().message)));
    wl.address = *a;
    out.push_back(std::move(wl));
  }
  return out;
}

std::vector<std::string> split_words(const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(prefix);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

Enforcer::Enforcer(const AgentOptions& options) : o_(options) {
  nft_.argv = split_words(o_.nft_prefix);
  nft_.argv.push_back(o_.nft_binary);
}

bool Enforcer::enabled() const { return !o_.storage_root.empty() || o_.enforce_network; }

bool Enforcer::round(const HttpCall& http) {
  auto r = http("GET", "/v1/agent/assignment", nullptr);
  if (!r) {
    spdlog::warn("assignment: {} (retrying next round)", r.error().message);
    return false;
  }
  if (r->first != 200) {
    spdlog::error(
        "assignment refused (HTTP {}): {}", r->first,
        r->second.is_object() ? r->second.value("detail", r->second.dump()) : r->second.dump());
    return false;
  }
  auto a = parse_assignment(r->second);
  if (!a) {
    spdlog::error("assignment unreadable, nothing changed: {}", a.error().message);
    return false;
  }
  bool ok = true;
  if (!o_.storage_root.empty()) ok = storage_round(*a, http) && ok;
  if (o_.enforce_network) ok = network_round(*a) && ok;
  return ok;
}

bool Enforcer::storage_round(const Assignment& a, const HttpCall& http) {
  bool ok = true;
  const std::filesystem::path root = o_.storage_root;
  // Deletions first, so a tree is never recreated and removed in the same round.
  for (const auto& d : a.deletions) {
    std::string what = d.project.empty() ? d.tenant : d.tenant + "/" + d.project;
    auto removed = d.project.empty()
                       ? storage::remove_tenant(root, d.tenant, d.expected)
                       : storage::remove_project(root, d.tenant, d.project, d.expected);
    if (!removed) {
      spdlog::error("storage deletion {} ({}): {} (retrying next round)", d.id, what,
                    removed.error().message);
      ok = false;
      continue;
    }
    const std::string_view outcome = storage::remove_outcome_name(*removed);
    if (*removed == storage::RemoveOutcome::kReplaced)
      spdlog::warn(
          "storage deletion {}: {} holds another tree than {}; left untouched (the deleted tree "
          "is not there)",
          d.id, what, storage::to_string(d.expected.identity));
    else
      spdlog::info("storage deletion {}: {} {}", d.id, what, outcome);
    auto ack =
        http("POST", "/v1/agent/storage-deletions/" + d.id + "/done", Json{{"outcome", outcome}});
    if (!ack || ack->first != 200) {
      spdlog::error("storage deletion {}: acknowledgement failed: {}", d.id,
                    ack ? ack->second.dump() : ack.error().message);
      ok = false;
    }
  }
  const auto held = hold_tenants(a, http, &ok);
  // Whether the root can encrypt, asked once a round: "" when it can, else why not.
  auto probed = fscrypt::probe(root);
  const std::string cannot_encrypt = !probed ? probed.error().message
                                     : probed->support == fscrypt::Support::kSupported
                                         ? std::string()
                                         : probed->detail;
  std::set<std::string> live_keys;  // identifiers of the keys this round assigns
  std::vector<std::pair<storage::TenantVolumes, TreeState>> trees;
  for (const auto& tv : a.volumes) {
    if (!held.contains(tv.tenant_id)) continue;
    TreeState state{.detail = "the tenant has no volume key (no data key yet)"};
    if (auto key = a.volume_keys.find(tv.tenant_id); key != a.volume_keys.end()) {
      if (!encrypt_tree(tv, key->second, cannot_encrypt, &live_keys, &state)) {
        ok = false;
        continue;  // never fill a tree in clear that should be encrypted
      }
    } else if (warned_clear_.insert(tv.tenant_id).second) {
      spdlog::warn("volumes: tenant {} has no volume key (no data key yet): its tree is in clear",
                   tv.tenant);
    }
    trees.emplace_back(tv, std::move(state));
    auto report = storage::create_volumes(root, tv);
    if (!report) {
      spdlog::error("volumes of tenant {}: {} (retrying next round)", tv.tenant,
                    report.error().message);
      ok = false;
      continue;
    }
    for (const auto& p : report->created) spdlog::info("volumes: created {}", p);
    for (const auto& p : report->adjusted) spdlog::debug("volumes: owner and mode set on {}", p);
    for (const auto& r : report->refused) {
      spdlog::error("volumes: {}", r.reason);
      ok = false;
    }
    if (!report->unrecorded.empty() && !warned_unrecorded_) {
      spdlog::warn(
          "volumes: {} cannot record tree identities (no trusted extended attributes); removal "
          "relies on the owner of each tree alone",
          o_.storage_root);
      warned_unrecorded_ = true;
    }
    for (const auto& l : report->size_limits)
      if (!l.enforced)
        spdlog::debug("volumes: size limit of {} not enforced: {}", l.path, l.detail);
  }
  if (cannot_encrypt.empty()) ok = remove_unassigned_keys(live_keys) && ok;
  const auto now = std::chrono::steady_clock::now();
  if (!trees.empty() &&
      (!last_report_ || now - *last_report_ >= std::chrono::minutes(o_.storage_audit_minutes))) {
    if (report_trees(trees, http))
      last_report_ = now;
    else
      ok = false;
  }
  return ok;
}

bool Enforcer::report_trees(const std::vector<std::pair<storage::TenantVolumes, TreeState>>& trees,
                            const HttpCall& http) {
  Json reports = Json::array();
  for (const auto& [tv, state] : trees) {
    auto findings = storage::audit_tree(std::filesystem::path(o_.storage_root) / tv.tenant,
                                        {.uids = tv.ids, .gids = tv.ids});
    if (!findings) {
      spdlog::error("storage audit of tenant {}: {}", tv.tenant, findings.error().message);
      continue;
    }
    Json listed = Json::array();
    for (size_t i = 0; i < findings->size() && i < storage::kMaxReportedFindings; ++i)
      listed.push_back(storage::to_json((*findings)[i]));
    if (!findings->empty())
      spdlog::warn("storage audit of tenant {}: {} finding(s), first: {} {}", tv.tenant,
                   findings->size(), (*findings)[0].path,
                   storage::finding_kind_name((*findings)[0].kind));
    reports.push_back({{"tenant_id", tv.tenant_id},
                       {"encrypted", state.encrypted},
                       {"encryption_detail", state.detail},
                       {"finding_count", findings->size()},
                       {"findings", listed}});
  }
  auto r = http("POST", "/v1/agent/storage-report", Json{{"tenants", reports}});
  if (!r || r->first != 200) {
    spdlog::error("storage report not recorded: {}", r ? r->second.dump() : r.error().message);
    return false;
  }
  return true;
}

bool Enforcer::encrypt_tree(const storage::TenantVolumes& tv, const std::string& key,
                            const std::string& cannot_encrypt, std::set<std::string>* live_keys,
                            TreeState* state) {
  const std::filesystem::path root = o_.storage_root;
  if (!cannot_encrypt.empty()) {
    // The filesystem cannot encrypt: the tree is made in clear, and said so once.
    state->detail = fmt::format("{} cannot encrypt: {}", root.string(), cannot_encrypt);
    if (warned_clear_.insert(tv.tenant_id).second)
      spdlog::warn("volumes: {}: the tree of tenant {} is in clear", state->detail, tv.tenant);
    return true;
  }
  auto id = fscrypt::add_key(root, key);
  if (!id) {
    spdlog::error("volumes: the key of tenant {} was not added: {}", tv.tenant, id.error().message);
    return false;
  }
  live_keys->insert(id->hex());
  const std::filesystem::path top = root / tv.tenant;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(top, ec))) {
    // Made empty and root-only, encrypted, and only then handed to create_volumes, which takes
    // an empty root-owned top directory as its own.
    if (::mkdir(top.c_str(), 0700) != 0 && errno != EEXIST) {
      spdlog::error("volumes: cannot create {}: {}", top.string(), std::strerror(errno));
      return false;
    }
  }
  auto policy = fscrypt::get_policy(top);
  if (!policy) {
    spdlog::error("volumes: {}: {}", top.string(), policy.error().message);
    return false;
  }
  if (*policy && **policy == *id) {
    *state = {.encrypted = true, .detail = "fscrypt v2 under key " + id->hex()};
    return true;
  }
  if (*policy) {
    spdlog::error("volumes: {} is encrypted under another key than tenant {}'s; left alone",
                  top.string(), tv.tenant);
    return false;
  }
  if (auto set = fscrypt::set_policy(top, *id); !set) {
    // A tree made in clear before encryption came: it keeps working, in clear, said once.
    if (set.error().code == ErrorCode::kConflict) {
      state->detail = "made before volume encryption, with files in it: in clear";
      if (warned_clear_.insert(tv.tenant_id).second)
        spdlog::warn(
            "volumes: {} was made before volume encryption and holds files: it stays in "
            "clear",
            top.string());
      return true;
    }
    spdlog::error("volumes: {}: {}", top.string(), set.error().message);
    return false;
  }
  spdlog::info("volumes: {} encrypted under key {}", top.string(), id->hex());
  *state = {.encrypted = true, .detail = "fscrypt v2 under key " + id->hex()};
  return true;
}

bool Enforcer::remove_unassigned_keys(const std::set<std::string>& live_keys) {
  const std::filesystem::path root = o_.storage_root;
  bool ok = true;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    auto policy = fscrypt::get_policy(entry.path());
    if (!policy || !*policy || live_keys.contains((*policy)->hex())) continue;
    auto status = fscrypt::key_status(root, **policy);
    if (status && *status == fscrypt::KeyStatus::kAbsent) continue;
    auto removed = fscrypt::remove_key(root, **policy);
    if (!removed) {
      spdlog::error("volumes: the key of {} was not removed: {} (retrying next round)",
                    entry.path().string(), removed.error().message);
      ok = false;
    } else if (removed->files_busy) {
      spdlog::warn(
          "volumes: the key of {} is removed but files under it are still open; "
          "retrying next round until they are closed",
          entry.path().string());
      ok = false;
    } else {
      spdlog::info("volumes: the key of {} is removed: its files are unreadable on this node",
                   entry.path().string());
    }
  }
  return ok;
}

std::set<std::string> Enforcer::hold_tenants(const Assignment& a, const HttpCall& http, bool* ok) {
  std::set<std::string> held;
  for (const auto& tv : a.volumes)
    if (!a.unheld.contains(tv.tenant_id)) held.insert(tv.tenant_id);
  if (a.unheld.empty()) return held;
  auto r = http("POST", "/v1/agent/storage-holdings",
                Json{{"tenants", std::vector<std::string>(a.unheld.begin(), a.unheld.end())}});
  if (!r || r->first != 200 || !r->second.is_object() || !r->second.contains("held") ||
      !r->second.at("held").is_array()) {
    spdlog::error("storage holdings: not recorded ({}); their trees are not created this round",
                  r ? r->second.dump() : r.error().message);
    *ok = false;
    return held;
  }
  for (const auto& id : r->second.at("held"))
    if (id.is_string() && a.unheld.contains(id.get<std::string>()))
      held.insert(id.get<std::string>());
  return held;
}

bool Enforcer::network_round(const Assignment& a) {
  last_net_ = a.net;
  return apply_network(a.net);
}

Result<void> Enforcer::set_runtime_network(std::vector<network::Workload> workloads,
                                           std::vector<network::OverlayLink> overlays) {
  runtime_workloads_ = std::move(workloads);
  runtime_overlays_ = std::move(overlays);
  if (!last_net_)
    return fail(Error::unavailable("no network assignment from the control plane yet"));
  if (!apply_network(*last_net_))
    return fail(Error::unavailable("the nftables ruleset with the job members failed"));
  return ok();
}

network::TenantPolicy Enforcer::tenant_policy(const std::string& tenant) const {
  if (last_net_)
    for (const auto& p : last_net_->policies)
      if (p.tenant == tenant) return p;
  return {.tenant = tenant};
}

bool Enforcer::apply_network(const network::NodeNetState& base) {
  network::NodeNetState state = base;
  std::vector<network::Workload> workloads = runtime_workloads_;
  if (!o_.workloads_file.empty()) {
    Result<std::vector<network::Workload>> from_file = std::vector<network::Workload>{};
    if (auto text = read_text_file(o_.workloads_file); !text)
      from_file = fail(text.error());
    else if (auto j = parse_json(*text); !j)
      from_file = fail(j.error());
    else
      from_file = parse_workloads(*j);
    if (!from_file) {
      spdlog::error("workloads file {}: {}; ruleset left as it is", o_.workloads_file,
                    from_file.error().message);
      return false;
    }
    workloads.insert(workloads.end(), from_file->begin(), from_file->end());
  }
  std::set<std::string> live, unattached;
  for (const auto& s : state.segments) live.insert(s.tenant);
  for (auto& w : workloads) {
    if (!live.contains(w.tenant)) {
      // Its tenant has no segment (offboarded, or not yet allocated): it gets no rules.
      if (!unattached_.contains(w.name))
        spdlog::warn("workload {}: tenant {} has no live segment; not attached", w.name, w.tenant);
      unattached.insert(w.name);
      continue;
    }
    state.workloads.push_back(std::move(w));
  }
  unattached_ = std::move(unattached);  // warned once per workload, again if it comes back
  for (const auto& o : runtime_overlays_)
    if (live.contains(o.tenant)) state.overlays.push_back(o);
  auto ruleset = network::render_nftables(state);
  if (!ruleset) {
    spdlog::error("nftables ruleset: {}; ruleset left as it is", ruleset.error().message);
    return false;
  }
  // Unchanged text is applied again only every kResync, which also repairs a table someone
  // flushed or deleted by hand.
  const auto now = std::chrono::steady_clock::now();
  if (*ruleset == applied_ruleset_ && now - applied_at_ < kResync) return true;
  if (auto r = network::apply_ruleset(*ruleset, nft_); !r) {
    spdlog::error("nft: {} (retrying next round)", r.error().message);
    applied_ruleset_.clear();
    return false;
  }
  const bool changed = *ruleset != applied_ruleset_;
  applied_ruleset_ = *ruleset;
  applied_at_ = now;
  if (!changed) return true;
  spdlog::info("nftables: applied table {} {} ({} segments, {} workloads)", network::kTableFamily,
               network::kTableName, state.segments.size(), state.workloads.size());
  return true;
}

}  // namespace gp::agent
