// The job spec a tenant submits: strict parsing and every limit (jobs.h).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "jobs/jobs.h"
#include "policy/policy.h"
#include "storage/storage.h"

namespace gp::jobs {

namespace {

bool env_name(std::string_view n) {
  if (n.empty() || n.size() > 128 || (n.front() >= '0' && n.front() <= '9')) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::vector<std::string> string_list(ObjectReader& r, std::string_view key) {
  auto v = r.optional_string_array(key, kMaxArgs, kMaxArgBytes);
  return v ? std::move(*v) : std::vector<std::string>{};
}

}  // namespace

std::string_view restart_policy_name(RestartPolicy p) {
  return p == RestartPolicy::kOnFailure ? "on-failure" : "never";
}

Json JobSpec::to_json() const {
  Json env_json = Json::array();
  for (const auto& e : env) env_json.push_back({{"name", e.name}, {"value", e.value}});
  Json vols = Json::array();
  for (const auto& v : volumes) vols.push_back({{"kind", v.kind}, {"read_only", v.read_only}});
  return {{"name", name},
          {"image", image},
          {"command", command},
          {"args", args},
          {"env", env_json},
          {"offering", offering},
          {"count", count},
          {"gang", members},
          {"volumes", vols},
          {"secrets", secrets},
          {"max_duration_seconds", max_duration_seconds},
          {"restart_policy", restart_policy_name(restart)},
          {"retries", retries},
          {"priority_class", priority_class},
          {"preemptible", preemptible}};
}

Result<JobSpec> parse_job_spec(const Json& body) {
  if (!body.is_object()) return fail(Error::invalid("job: must be a JSON object"));
  ObjectReader r(body, "job");
  JobSpec s;
  s.name = r.string("name", 63);
  s.image = r.string("image", 512);
  s.command = string_list(r, "command");
  s.args = string_list(r, "args");
  const Json* env = r.optional_array("env");
  s.offering = r.string("offering", 128);
  auto count = r.optional_integer("count", 1, kMaxUnitsPerMember);
  auto gang = r.optional_integer("gang", 1, kMaxGangMembers);
  const Json* volumes = r.optional_array("volumes");
  auto secrets = r.optional_string_array("secrets", kMaxSecrets, 128);
  auto duration = r.optional_integer("max_duration_seconds", 1, kMaxDurationSeconds);
  auto restart = r.optional_string("restart_policy", 32);
  auto retries = r.optional_integer("retries", 0, kMaxRetries);
  auto priority = r.optional_string("priority_class", 16);
  s.preemptible = r.optional_bool("preemptible").value_or(false);
  GP_TRY_VOID(r.finish());
  if (priority) {
    if (*priority != "low" && *priority != "normal" && *priority != "high" &&
        *priority != "critical")
      return fail(Error::invalid(fmt::format(
          "field 'priority_class': \"{}\" is not low, normal, high or critical", *priority)));
    s.priority_class = *priority;
  }

  GP_TRY_VOID(validate_dns_label("name", s.name));
  if (!policy::valid_image_reference(s.image))
    return fail(Error::invalid(fmt::format(
        "field 'image': \"{}\" is not an image reference ([registry/]path[:tag][@sha256:digest], "
        "lower-case path)",
        s.image)));
  if (s.command.empty() && s.args.empty())
    return fail(Error::invalid(
        "field 'command': a job says what it runs (command, args or both; the image's own "
        "entrypoint is used when only args are given)"));
  s.count = static_cast<int>(count.value_or(1));
  s.members = static_cast<int>(gang.value_or(1));
  s.max_duration_seconds = duration.value_or(kDefaultDurationSeconds);

  if (env) {
    if (env->size() > kMaxEnv)
      return fail(Error::invalid(fmt::format("field 'env': more than {} variables", kMaxEnv)));
    std::set<std::string> seen;
    for (size_t i = 0; i < env->size(); ++i) {
      const Json& e = (*env)[i];
      std::string where = fmt::format("env[{}]", i);
      if (!e.is_object()) return fail(Error::invalid(where + ": must be {name, value}"));
      ObjectReader er(e, where);
      EnvVar v{er.string("name", 128), er.string("value", kMaxEnvValueBytes)};
      GP_TRY_VOID(er.finish());
      if (!env_name(v.name))
        return fail(Error::invalid(fmt::format(
            "{}: \"{}\" is not a variable name (letters, digits and '_', not starting with a "
            "digit)",
            where, v.name)));
      if (policy::env_selects_gpu_devices(v.name))
        return fail(Error::invalid(fmt::format(
            "{}: {} would choose the job's GPUs; a job gets exactly the devices of its "
            "allocation, and gpuplane sets NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES "
            "to them",
            where, v.name)));
      if (set_by_platform(v.name))
        return fail(Error::invalid(
            fmt::format("{}: {} is set by gpuplane in every member", where, v.name)));
      if (!seen.insert(v.name).second)
        return fail(Error::invalid(fmt::format("{}: {} is set twice", where, v.name)));
      s.env.push_back(std::move(v));
    }
  }

  if (volumes) {
    if (volumes->size() > std::size(storage::kAllVolumeKinds))
      return fail(Error::invalid("field 'volumes': at most one mount of each volume kind"));
    std::set<std::string> seen;
    for (size_t i = 0; i < volumes->size(); ++i) {
      const Json& v = (*volumes)[i];
      std::string where = fmt::format("volumes[{}]", i);
      if (!v.is_object()) return fail(Error::invalid(where + ": must be {kind, read_only}"));
      ObjectReader vr(v, where);
      VolumeMount m{vr.string("kind", 32), vr.optional_bool("read_only").value_or(false)};
      GP_TRY_VOID(vr.finish());
      if (!storage::parse_volume_kind(m.kind))
        return fail(Error::invalid(fmt::format(
            "{}: \"{}\" is not a project volume (datasets, models, checkpoints, scratch)", where,
            m.kind)));
      if (!seen.insert(m.kind).second)
        return fail(Error::invalid(fmt::format("{}: {} is mounted twice", where, m.kind)));
      s.volumes.push_back(std::move(m));
    }
  }

  if (secrets) {
    std::set<std::string> seen;
    for (size_t i = 0; i < secrets->size(); ++i) {
      const std::string& n = (*secrets)[i];
      if (auto valid = storage::validate_secret_name(n); !valid)
        return fail(Error::invalid(fmt::format("secrets[{}]: {}", i, valid.error().message)));
      if (!seen.insert(n).second)
        return fail(Error::invalid(fmt::format("secrets[{}]: {} is listed twice", i, n)));
    }
    s.secrets = std::move(*secrets);
  }

  if (restart) {
    if (*restart == "never") {
      s.restart = RestartPolicy::kNever;
    } else if (*restart == "on-failure") {
      s.restart = RestartPolicy::kOnFailure;
    } else {
      return fail(Error::invalid(
          fmt::format("field 'restart_policy': \"{}\" is not never or on-failure", *restart)));
    }
  }
  s.retries = static_cast<int>(retries.value_or(0));
  if (s.retries > 0 && s.restart != RestartPolicy::kOnFailure)
    return fail(Error::invalid("field 'retries': only restart_policy on-failure retries"));
  return s;
}

}  // namespace gp::jobs
