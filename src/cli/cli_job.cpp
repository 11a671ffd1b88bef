// Job commands (docs/jobs.md): run a job (and follow its output), list, show, read the output of
// and cancel a project's jobs.
#include "cli/cli_job.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iostream>
#include <thread>

#include "cli/client.h"
#include "common/env.h"
#include "render/render.h"
#include "storage/storage.h"

namespace gp::cli {

Result<Json> job_run_body(const JobRunFlags& f) {
  Json body = {{"name", f.name},
               {"image", f.image},
               {"offering", f.offering},
               {"command", f.command},
               {"args", Json::array()}};
  if (f.count) body["count"] = *f.count;
  if (f.gang) body["gang"] = *f.gang;
  if (f.max_duration) body["max_duration_seconds"] = *f.max_duration;
  if (f.retries) body["retries"] = *f.retries;
  if (!f.restart.empty()) body["restart_policy"] = f.restart;
  if (!f.priority.empty()) body["priority_class"] = f.priority;
  if (f.preemptible) body["preemptible"] = true;
  if (!f.secrets.empty()) body["secrets"] = f.secrets;
  if (!f.volumes.empty()) {
    Json volumes = Json::array();
    for (const auto& v : f.volumes) {
      const auto colon = v.find(':');
      const std::string kind = v.substr(0, colon);
      const std::string mode = colon == std::string::npos ? "" : v.substr(colon + 1);
      if (!storage::parse_volume_kind(kind) || (colon != std::string::npos && mode != "ro")) {
        std::vector<std::string_view> kinds;
        for (auto k : storage::kAllVolumeKinds) kinds.push_back(storage::volume_kind_name(k));
        return fail(Error::invalid(
            fmt::format("--volume {}: want KIND or KIND:ro, KIND one of the project's volumes ({})",
                        v, fmt::join(kinds, ", "))));
      }
      volumes.push_back({{"kind", kind}, {"read_only", colon != std::string::npos}});
    }
    body["volumes"] = volumes;
  }
  if (!f.env.empty()) {
    Json env = Json::array();
    for (const auto& e : f.env) {
      const auto eq = e.find('=');
      if (eq == std::string::npos || eq == 0)
        return fail(Error::invalid(fmt::format("--env {}: want NAME=VALUE", e)));
      env.push_back({{"name", e.substr(0, eq)}, {"value", e.substr(eq + 1)}});
    }
    body["env"] = env;
  }
  if (f.command.empty())
    return fail(Error::invalid(
        "give the command to run after --, e.g. `gpuplane job run ... -- python train.py`"));
  return body;
}

namespace {

// Why the job is where it is: for a queued job the scheduler's latest word (its allocation's).
std::string job_reason(const Json& job) {
  if (job.value("state", "") == "queued" && job.contains("allocation") &&
      job["allocation"].is_object()) {
    std::string waits = job["allocation"].value("reason", "");
    if (!waits.empty()) return waits;
  }
  return job.value("reason", "");
}

}  // namespace

std::string job_summary(const Json& job) {
  std::string line =
      fmt::format("{} ({}) {}", job.value("id", ""), job.value("name", ""), job.value("state", ""));
  if (job.contains("exit_code") && job["exit_code"].is_number_integer() &&
      job.value("state", "") != "succeeded")
    line += fmt::format(", exit code {}", job["exit_code"].get<int64_t>());
  if (std::string reason = job_reason(job); !reason.empty()) line += ": " + reason;
  return line;
}

int job_exit_status(const Json& job) {
  const std::string state = job.value("state", "");
  if (state == "succeeded") return 0;
  if (state == "failed" && job.contains("exit_code") && job["exit_code"].is_number_integer()) {
    const auto code = job["exit_code"].get<int64_t>();
    if (code >= 1 && code <= 255) return static_cast<int>(code);
  }
  return 1;
}

JobLogPrinter::JobLogPrinter(const std::vector<int64_t>& members) : multi_(members.size() > 1) {
  for (int64_t rank : members) printed_to_[rank] = 0;
}

std::string JobLogPrinter::take(const Json& reply) {
  const Json& members = reply.at("members");
  if (members.size() > 1) multi_ = true;
  taken_ = true;
  std::string out;
  for (const auto& m : members) {
    const int64_t rank = m.at("rank").get<int64_t>();
    const int64_t start = m.at("start").get<int64_t>();
    const int64_t end = m.at("end").get<int64_t>();
    const std::string& text = m.at("text").get_ref<const std::string&>();
    // Bytes [start, end) came; those before what was printed already are skipped.
    const auto printed = printed_to_.find(rank);
    const int64_t from = printed == printed_to_.end() ? start : printed->second;
    const auto skip = static_cast<size_t>(
        std::clamp<int64_t>(from - start, 0, static_cast<int64_t>(text.size())));
    printed_to_[rank] = std::max(end, from);
    if (skip == text.size()) continue;
    if (multi_ && last_rank_ != rank) {
      if (line_open_) out += "\n";
      out += fmt::format("== rank {} ==\n", rank);
    }
    out.append(text, skip);
    last_rank_ = rank;
    line_open_ = out.back() != '\n';
  }
  return out;
}

std::optional<int64_t> JobLogPrinter::since() const {
  if (!taken_ || printed_to_.empty()) return std::nullopt;
  int64_t least = printed_to_.begin()->second;
  for (const auto& [rank, at] : printed_to_) least = std::min(least, at);
  return least;
}

namespace {

struct JobArgs {
  Where where;
  std::string job;
  std::string job_path() const { return where.project_path() + "/jobs/" + url_encode(job); }
};

// A usage error: one `error:` line and exit status 2, before any request.
void usage_error(int* rc, const std::string& message) {
  std::cerr << "error: " << message << "\n";
  *rc = 2;
}

// "job-" and six random hex digits: a DNS label unlikely to meet a live job's name.
std::string generated_job_name() {
  return fmt::format("job-{:06x}", system_env().random.u64() & 0xffffff);
}

// A command line as a shell would take it back: words with anything but [A-Za-z0-9_./:=@%+,-]
// in single quotes.
std::string shell_words(const Json& words) {
  std::string out;
  for (const auto& w : words) {
    const std::string& s = w.get_ref<const std::string&>();
    const bool plain = !s.empty() && std::ranges::all_of(s, [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) != 0 ||
             std::string_view("_./:=@%+-,").find(ch) != std::string_view::npos;
    });
    std::string quoted;
    if (plain) {
      quoted = s;
    } else {
      quoted = "'";
      for (char ch : s) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      quoted += "'";
    }
    out += (out.empty() ? "" : " ") + quoted;
  }
  return out;
}

// How long the API may hold a follower's request for more output (under the client's 30 s).
constexpr int kFollowWaitSeconds = 20;

// GET .../logs: from byte `since` on (held until there is more), else the last `tail` lines (0:
// all that is kept); one member's or every member's.
std::string logs_target(const JobArgs& a, std::optional<int64_t> since, int64_t tail,
                        std::optional<int64_t> rank) {
  std::string query;
  if (since)
    query += fmt::format("&since={}&wait={}", *since, kFollowWaitSeconds);
  else if (tail > 0)
    query += fmt::format("&tail={}", tail);
  if (rank) query += fmt::format("&rank={}", *rank);
  if (!query.empty()) query[0] = '?';
  return a.job_path() + "/logs" + query;
}

// Prints the output of `job` (as the API gave it, its line already on stderr) as it comes (the
// API holds each request until there is more; an answer with nothing new waits a second before
// the next), until the job has finished; then its final line on stderr. Every member's
// output, or member `rank`'s; `tail` limits the first poll to the last lines kept. State changes
// go to stderr. Returns the status to exit with: job_exit_status, or 1 when a request fails.
int follow_job(ClientConfig& c, const Json& job, const JobArgs& a, std::optional<int64_t> rank,
               int64_t tail) {
  std::string state = job["state"].get<std::string>();
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < job["spec"]["gang"].get<int64_t>(); ++r)
    if (!rank || *rank == r) ranks.push_back(r);
  JobLogPrinter printer(ranks);
  for (;;) {
    auto r = call(c, "GET", logs_target(a, printer.since(), tail, rank));
    if (!r) return 1;
    const std::string text = printer.take(*r);
    std::cout << text << std::flush;
    if ((*r)["finished"].get<bool>()) break;
    bool moved = !text.empty();
    if (std::string now = (*r)["state"].get<std::string>(); now != state) {
      std::cerr << fmt::format("{} {}\n", (*r)["job"].get<std::string>(), now);
      state = now;
      moved = true;
    }
    if (!moved) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (printer.line_open() && ::isatty(STDOUT_FILENO) != 0) std::cout << "\n" << std::flush;
  auto ended = call(c, "GET", a.job_path());
  if (!ended) return 1;
  std::cerr << job_summary(*ended) << "\n";
  return job_exit_status(*ended);
}

void add_run(CLI::App* job, ClientConfig& c, int* rc) {
  struct RunArgs {
    Where where;
    JobRunFlags flags;
    bool follow = false;
  };
  auto a = std::make_shared<RunArgs>();
  auto* run = job->add_subcommand(
      "run", "Submit a job: the command after -- runs in IMAGE on GPUs of OFFERING");
  a->where.add(run, true);
  JobRunFlags& f = a->flags;
  run->add_option("--image", f.image, "Container image, [registry/]path[:tag][@sha256:digest]")
      ->required();
  run->add_option("--offering", f.offering, "Offering name or id (delivered as containers)")
      ->required();
  run->add_option("--name", f.name, "A DNS label (default: job- and six random hex digits)");
  run->add_option("--count", f.count, "Units of the offering per member (default 1)");
  run->add_option("--gang", f.gang, "Members, started together or not at all (default 1)");
  run->add_option("--volume", f.volumes, "KIND[:ro]: mount the project's volume at /data/KIND")
      ->allow_extra_args(false);
  run->add_option("--secret", f.secrets, "A tenant secret, as a file under /run/secrets/")
      ->allow_extra_args(false);
  run->add_option("--env", f.env, "NAME=VALUE in every member")->allow_extra_args(false);
  run->add_option("--max-duration", f.max_duration, "Seconds it may run (default 86400)");
  run->add_option("--restart", f.restart, "never (default) or on-failure")
      ->check(CLI::IsMember({"never", "on-failure"}));
  run->add_option("--retries", f.retries, "on-failure: times a failed member is started again");
  run->add_option("--priority", f.priority, "low, normal (default), high or critical")
      ->check(CLI::IsMember({"low", "normal", "high", "critical"}));
  run->add_flag("--preemptible", f.preemptible,
                "Higher-priority work of the tenant may preempt it (SIGTERM, then SIGKILL after "
                "the grace period)");
  run->add_flag("--follow,-f", a->follow,
                "Print the job's output until it ends, and exit with its exit code");
  run->add_option("command", f.command, "The command and its arguments, after --");
  run->callback([&c, rc, a] {
    if (a->follow && c.output == "json")
      return usage_error(rc, "--follow prints the job's output, not JSON: leave out --output json");
    if (a->flags.name.empty()) a->flags.name = generated_job_name();
    auto body = job_run_body(a->flags);
    if (!body) return usage_error(rc, body.error().message);
    auto r = call(c, "POST", a->where.project_path() + "/jobs", *body);
    if (!r) {
      *rc = 1;
      return;
    }
    if (!a->follow) {
      if (c.output == "json")
        print(c, *r, {});
      else
        std::cout << job_summary(*r) << "\n";
      return;
    }
    // The job's output goes to stdout alone, so it can be redirected; its story to stderr.
    std::cerr << job_summary(*r) << "\n";
    *rc = follow_job(c, *r, {a->where, (*r)["id"].get<std::string>()}, 0, 0);
  });
}

void add_list(CLI::App* job, ClientConfig& c, int* rc) {
  struct ListArgs {
    Where where;
    std::string state, after;
    int limit = 100;
  };
  auto a = std::make_shared<ListArgs>();
  auto* list = job->add_subcommand("list", "A project's jobs, or the tenant's without --project");
  a->where.add(list, false);
  list->add_option("--state", a->state,
                   "Only this state: queued, starting, running, succeeded, failed, cancelled, "
                   "preempted");
  list->add_option("--limit", a->limit, "Page size (1-1000)");
  list->add_option("--after", a->after, "Cursor from the previous page");
  on_run(list, rc, [&c, a] {
    std::string target = fmt::format(
        "{}/jobs?limit={}",
        a->where.project.empty() ? a->where.tenant_path() : a->where.project_path(), a->limit);
    if (!a->state.empty()) target += "&state=" + url_encode(a->state);
    if (!a->after.empty()) target += "&after=" + url_encode(a->after);
    auto r = call(c, "GET", target);
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
      return true;
    }
    std::vector<Json> rows;
    for (const auto& j : (*r)["items"])
      rows.push_back({{"name", j["name"]},
                      {"state", j["state"]},
                      {"exit", j["exit_code"]},
                      {"attempts", j["attempts"]},
                      {"created", j["created_at"]},
                      {"id", j["id"]},
                      {"reason", j["reason"]}});
    print(c, {{"items", rows}, {"next", (*r)["next"]}},
          {"name", "state", "exit", "attempts", "created", "id", "reason"});
    return true;
  });
}

// `job get`'s detail: the job's lines, then its members and its history as tables.
void print_job(const Json& j) {
  const Json& spec = j["spec"];
  std::vector<std::pair<std::string, std::string>> lines = {
      {"id", j.value("id", "")}, {"name", j.value("name", "")}, {"state", j.value("state", "")}};
  if (!j["failure"].is_null()) lines.emplace_back("failure", cell(j["failure"]));
  if (!j["exit_code"].is_null()) lines.emplace_back("exit code", cell(j["exit_code"]));
  if (std::string reason = job_reason(j); !reason.empty()) lines.emplace_back("reason", reason);
  lines.emplace_back("image", cell(spec["image"]));
  Json words = spec["command"];
  for (const auto& w : spec["args"]) words.push_back(w);
  lines.emplace_back("command", shell_words(words));
  lines.emplace_back("offering", fmt::format("{} (count {}, gang {})", cell(spec["offering"]),
                                             cell(spec["count"]), cell(spec["gang"])));
  if (j.contains("allocation") && j["allocation"].is_object())
    lines.emplace_back("allocation", fmt::format("{} ({})", cell(j["allocation"]["id"]),
                                                 cell(j["allocation"]["state"])));
  lines.emplace_back("attempts", cell(j["attempts"]));
  lines.emplace_back("created", cell(j["created_at"]));
  for (auto [label, key] : {std::pair{"started", "started_at"}, std::pair{"ended", "ended_at"}})
    if (!j[key].is_null()) lines.emplace_back(label, cell(j[key]));
  for (const auto& [key, value] : lines) std::cout << fmt::format("{:<12}{}\n", key + ":", value);
  std::cout << "\nmembers:\n";
  print_table(std::vector<Json>(j["members"].begin(), j["members"].end()),
              {"rank", "attempt", "node_id", "state", "exit_code", "error"});
  // Each attempt where it ran and how it ended (a node lost, a drain's deadline, its exit).
  if (j.contains("attempt_history") && j["attempt_history"].size() > 1) {
    std::vector<Json> attempts;
    for (const auto& a : j["attempt_history"]) {
      std::string nodes;
      for (const auto& n : a.value("node_names", Json::array()))
        nodes += (nodes.empty() ? "" : ",") + n.get<std::string>();
      attempts.push_back({{"attempt", a["attempt"]},
                          {"nodes", nodes},
                          {"started", a["started_at"]},
                          {"ended", a["ended_at"]},
                          {"end_reason", a["end_reason"]}});
    }
    std::cout << "\nattempts:\n";
    print_table(attempts, {"attempt", "nodes", "started", "ended", "end_reason"});
  }
  std::cout << "\nevents:\n";
  print_table(std::vector<Json>(j["events"].begin(), j["events"].end()),
              {"at", "from", "to", "reason"});
}

// A job's utilization (GET .../utilization) for a terminal: per GPU its mean and peak and a
// sparkline of its spans, oldest on the left.
std::string utilization_text(const Json& u) {
  if (u["from"].is_null()) return "The job has not started yet.\n";
  std::string out =
      fmt::format("{} from {} to {}\n", u.value("job", ""), u.value("from", ""), u.value("to", ""));
  static constexpr const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  for (const auto& g : u["gpus"]) {
    const std::string instance = g.value("instance", "");
    out += fmt::format("{} {}{}: ", g.value("node", ""), g.value("gpu", ""),
                       instance.empty() ? "" : " (" + instance + ")");
    const Json& points = g["points"];
    if (points.empty()) {
      out += "no samples\n";
      continue;
    }
    double sum = 0, peak = 0;
    std::string line;
    for (const auto& p : points) {
      const double v = p.value("util_pct", 0.0);
      sum += v;
      peak = std::max(peak, v);
      line += kBars[std::clamp(int(v / 100.0 * 8), 0, 7)];
    }
    out += fmt::format("mean {:.0f} %, peak {:.0f} %\n  {}\n", sum / double(points.size()), peak,
                       line);
  }
  return out;
}

// The same as a line chart: minutes since the job started against utilization, a line per GPU.
std::string utilization_svg(const Json& u) {
  TimePoint from{}, to{};
  const bool started = u["from"].is_string() &&
                       parse_rfc3339(u["from"].get<std::string>(), &from) &&
                       parse_rfc3339(u.value("to", ""), &to);
  const double minutes = started ? std::chrono::duration<double>(to - from).count() / 60.0 : 1.0;
  render::LineChart chart{.title = "GPU utilization of job " + u.value("job", ""),
                          .x_label = "minutes since the job started",
                          .y_label = "utilization %",
                          .x_min = 0,
                          .x_max = std::max(minutes, 1.0 / 60),
                          .x_step = 0,
                          .x_tick = [](double v) { return fmt::format("{:.1f}", v); },
                          .y_max = 100,
                          .lines = {}};
  for (const auto& g : u["gpus"]) {
    // The legend is narrow: a GPU by the end of its UUID, a MIG instance by its name too.
    const std::string instance = g.value("instance", ""), uuid = g.value("gpu", "");
    const std::string gpu = uuid.size() > 12 ? "…" + uuid.substr(uuid.size() - 12) : uuid;
    render::ChartLine line{
        fmt::format("{} {}{}{}", g.value("node", ""), gpu, instance.empty() ? "" : " ", instance),
        {}};
    for (const auto& p : g["points"]) {
      TimePoint at{};
      if (!parse_rfc3339(p.value("time", ""), &at)) continue;
      line.points.emplace_back(std::chrono::duration<double>(at - from).count() / 60.0,
                               p.value("util_pct", 0.0));
    }
    chart.lines.push_back(std::move(line));
  }
  return render::line_chart_svg(chart);
}

void add_get_logs_cancel(CLI::App* job, ClientConfig& c, int* rc) {
  auto a = std::make_shared<JobArgs>();
  auto* get = job->add_subcommand("get", "One job: state, reason, members and history");
  a->where.add(get, true);
  get->add_option("job", a->job, "Job id")->required();
  on_run(get, rc, [&c, a] {
    auto r = call(c, "GET", a->job_path());
    if (!r) return false;
    if (c.output == "json")
      print(c, *r, {});
    else
      print_job(*r);
    return true;
  });

  struct LogsArgs {
    int64_t tail = 0;
    std::optional<int64_t> rank;
    bool follow = false;
  };
  auto l = std::make_shared<LogsArgs>();
  auto* logs = job->add_subcommand("logs", "What the job's members wrote (stdout and stderr)");
  a->where.add(logs, true);
  logs->add_option("job", a->job, "Job id")->required();
  logs->add_option("--tail", l->tail, "Only the last N lines of each member");
  logs->add_option("--rank", l->rank, "Only this member's");
  logs->add_flag("--follow,-f", l->follow,
                 "Keep printing until the job ends, and exit with its exit code");
  logs->callback([&c, rc, a, l] {
    if (l->follow) {
      if (c.output == "json")
        return usage_error(rc,
                           "--follow prints the job's output, not JSON: leave out --output json");
      auto job = call(c, "GET", a->job_path());
      if (!job) {
        *rc = 1;
        return;
      }
      std::cerr << job_summary(*job) << "\n";
      *rc = follow_job(c, *job, *a, l->rank, l->tail);
      return;
    }
    auto r = call(c, "GET", logs_target(*a, std::nullopt, l->tail, l->rank));
    if (!r) {
      *rc = 1;
      return;
    }
    if (c.output == "json")
      print(c, *r, {});
    else
      std::cout << JobLogPrinter().take(*r) << std::flush;
  });

  struct UtilizationArgs {
    int points = 60;
    std::string svg;
  };
  auto u = std::make_shared<UtilizationArgs>();
  auto* utilization = job->add_subcommand(
      "utilization", "How busy the job's GPUs were from its start to its end (or now)");
  a->where.add(utilization, true);
  utilization->add_option("job", a->job, "Job id")->required();
  utilization->add_option("--points", u->points, "Spans per GPU (1-1000)")
      ->check(CLI::Range(1, 1000));
  utilization->add_option("--svg", u->svg, "Also draw it as a line chart into this SVG file");
  on_run(utilization, rc, [&c, a, u] {
    auto r = call(c, "GET", fmt::format("{}/utilization?points={}", a->job_path(), u->points));
    if (!r) return false;
    if (c.output == "json")
      print(c, *r, {});
    else
      std::cout << utilization_text(*r);
    if (!u->svg.empty()) {
      if (!write_file(u->svg, utilization_svg(*r))) return false;
      std::cerr << "wrote " << u->svg << "\n";
    }
    return true;
  });

  auto* cancel = job->add_subcommand(
      "cancel", "Cancel a job: a queued one ends at once, a running one once its containers stop");
  a->where.add(cancel, true);
  cancel->add_option("job", a->job, "Job id")->required();
  on_run(cancel, rc, [&c, a] {
    auto r = call(c, "POST", a->job_path() + "/cancel", Json::object());
    if (!r) return false;
    if (c.output == "json")
      print(c, *r, {});
    else
      std::cout << job_summary(*r) << "\n";
    return true;
  });
}

}  // namespace

void add_job_commands(CLI::App& app, ClientConfig& c, int* rc) {
  auto* job = app.add_subcommand("job", "Run containers on the GPUs of a project's allocation");
  job->require_subcommand(1);
  add_run(job, c, rc);
  add_list(job, c, rc);
  add_get_logs_cancel(job, c, rc);
}

}  // namespace gp::cli
