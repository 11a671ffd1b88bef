// Driving podman on a node (runtime.h).
#include "jobs/runtime.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "common/files.h"
#include "common/json.h"
#include "common/subprocess.h"
#include "policy/policy.h"

namespace gp::jobs {

namespace {

// podman's first error line, without its "Error: " prefix.
std::string first_error(const ProcessResult& r) {
  std::string_view e = r.err.empty() ? std::string_view(r.out) : std::string_view(r.err);
  while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.remove_suffix(1);
  if (auto nl = e.rfind('\n'); nl != std::string_view::npos) e = e.substr(nl + 1);
  if (e.starts_with("Error: ")) e.remove_prefix(7);
  return std::string(e.substr(0, 1000));
}

}  // namespace

Result<ProcessResult> Podman::exec(std::vector<std::string> args, std::string_view what) const {
  args.insert(args.begin(), program_);
  if (!environment_.empty()) {
    args.insert(args.begin(), environment_.begin(), environment_.end());
    args.insert(args.begin(), "/usr/bin/env");
  }
  auto r = GP_TRY(run_process(args, "", timeout_));
  if (r.exit_code != 0)
    return fail(Error::unavailable(
        fmt::format("podman {} failed (exit {}): {}", what, r.exit_code, first_error(r))));
  return r;
}

Result<std::string> Podman::call(std::vector<std::string> args, std::string_view what) const {
  auto r = GP_TRY(exec(std::move(args), what));
  return std::move(r.out);
}

Result<void> Podman::run(const std::vector<std::string>& argv) const {
  if (argv.size() < 2) return fail(Error::invalid("podman run: empty command line"));
  GP_TRY(call({argv.begin() + 1, argv.end()}, "run"));
  return ok();
}

Result<std::string> Podman::pull(const std::string& image) const {
  GP_TRY(call({"pull", "--quiet", image}, "pull " + image));
  const Json inspected =
      Json::parse(GP_TRY(call({"image", "inspect", image}, "image inspect")), nullptr, false);
  const Json facts =
      inspected.is_array() && !inspected.empty() ? inspected.front() : Json::object();
  // The image's names at this registry, repository@digest, as podman records them. An image
  // that came to the host another way (imported, or pushed from here) also lists its own first
  // manifest (.Digest) under every name it has: the registry's digest is the other one.
  const std::string repository = policy::image_repository(image);
  const std::string own = facts.is_object() ? facts.value("Digest", "") : "";
  std::vector<std::string> found;
  const Json digests = facts.is_object() ? facts.value("RepoDigests", Json::array()) : Json();
  for (const auto& d : digests.is_array() ? digests : Json::array())
    if (d.is_string()) {
      const std::string ref = d.get<std::string>();
      const auto at = ref.find('@');
      if (at != std::string::npos && policy::image_repository(ref.substr(0, at)) == repository)
        found.push_back(ref.substr(at + 1));
    }
  std::vector<std::string> served;
  for (const auto& d : found)
    if (d != own) served.push_back(d);
  if (served.size() == 1) return served.front();
  if (served.empty() && std::ranges::find(found, own) != found.end()) return own;
  return fail(Error::unavailable(fmt::format(
      "podman pull {}: cannot tell which of the image's {} digests at {} the registry served",
      image, found.size(), repository)));
}

Result<void> Podman::start(const std::string& name) const {
  GP_TRY(call({"start", name}, "start"));
  return ok();
}

Result<std::vector<ContainerStatus>> Podman::inspect(const std::vector<std::string>& names) const {
  if (names.empty()) return std::vector<ContainerStatus>{};
  std::vector<std::string> args = {"inspect", "--type", "container"};
  args.insert(args.end(), names.begin(), names.end());
  auto out = GP_TRY(call(args, "inspect"));
  auto j = GP_TRY(parse_json(out));
  return parse_podman_inspect(j);
}

Result<std::vector<ContainerStatus>> Podman::list_members(const std::string& node) const {
  // One call, so a container removed meanwhile cannot fail the listing.
  std::vector<std::string> args = {"ps", "--all", "--filter", fmt::format("label={}", kLabelJob)};
  if (!node.empty())
    args.insert(args.end(), {"--filter", fmt::format("label={}={}", kLabelNode, node)});
  args.insert(args.end(), {"--format", "json"});
  auto out = GP_TRY(call(args, "ps"));
  auto j = GP_TRY(parse_json(out));
  return parse_podman_ps(j);
}

Result<void> Podman::stop(const std::string& name, std::chrono::seconds grace) const {
  GP_TRY(call({"stop", "--time", std::to_string(grace.count()), name}, "stop"));
  return ok();
}

Result<void> Podman::kill(const std::string& name, std::string_view signal) const {
  GP_TRY(call({"kill", "--signal", std::string(signal), name}, "kill"));
  return ok();
}

Result<std::string> Podman::logs(const std::string& name, int tail) const {
  // podman writes the container's stdout to its stdout and its stderr to its stderr: the two
  // come back one after the other, not interleaved.
  auto r = GP_TRY(exec({"logs", "--tail", std::to_string(tail > 0 ? tail : -1), name}, "logs"));
  return r.out + r.err;
}

Result<void> Podman::remove(const std::string& name) const {
  // Right after a container exits, conmon may still hold its shm mount ("device or resource
  // busy"): a few tries over about two seconds.
  Result<std::string> r;
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    r = call({"rm", "--force", "--time", "0", name}, "rm");
    if (r || r.error().message.find("busy") == std::string::npos) break;
  }
  if (!r) return fail(r.error());
  return ok();
}

Result<void> Podman::import_busybox(const std::string& tag,
                                    const std::vector<std::string>& image_env,
                                    const std::filesystem::path& busybox) const {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "gp-busybox-image-XXXXXX").string();
  if (!::mkdtemp(tmpl.data()))
    return fail(Error::unavailable(fmt::format("mkdtemp: {}", std::strerror(errno))));
  const fs::path dir = tmpl;
  auto made = [&]() -> Result<void> {
    std::error_code ec;
    fs::create_directories(dir / "root/bin", ec);
    fs::create_directories(dir / "root/tmp", ec);
    fs::copy_file(busybox, dir / "root/bin/busybox", ec);
    if (ec)
      return fail(Error::unavailable(fmt::format("cannot copy {}: {} (install busybox-static)",
                                                 busybox.string(), ec.message())));
    for (const char* applet :
         {"sh",  "cat",  "ls",   "id",    "echo", "sleep", "tail", "grep", "touch", "stat",
          "env", "head", "true", "false", "kill", "nc",    "wc",   "seq",  "test",  "["})
      fs::create_symlink("busybox", dir / "root/bin" / applet, ec);
    auto tar = GP_TRY(run_process(
        {"tar", "-C", (dir / "root").string(), "-cf", (dir / "image.tar").string(), "bin", "tmp"},
        "", timeout_));
    if (tar.exit_code != 0) return fail(Error::unavailable("tar failed: " + tar.err));
    std::vector<std::string> args = {"import", "--quiet"};
    for (const auto& e : image_env) args.insert(args.end(), {"--change", "ENV=" + e});
    args.insert(args.end(), {(dir / "image.tar").string(), tag});
    GP_TRY(call(args, "import"));
    return ok();
  }();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return made;
}

namespace {

namespace fs = std::filesystem;

Result<void> write_file(const fs::path& p, const std::string& value) {
  std::ofstream f(p);
  f << value;
  f.flush();
  if (!f) return fail(Error::unavailable(fmt::format("cannot write {} to {}", value, p.string())));
  return ok();
}

// The value after `key ` on its own line of a flat-keyed cgroup file ("oom_kill 3").
int64_t keyed(std::string_view text, std::string_view key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string_view::npos) {
    bool line_start = at == 0 || text[at - 1] == '\n';
    size_t v = at + key.size();
    if (line_start && v < text.size() && text[v] == ' ') return std::atoll(text.data() + v + 1);
    at = v;
  }
  return 0;
}

}  // namespace

Result<MemberCgroup> MemberCgroup::existing(const std::string& name, const fs::path& root) {
  if (!plain_segment(name))
    return fail(Error::invalid(fmt::format("cgroup name \"{}\" is not one path segment", name)));
  MemberCgroup g;
  g.root_ = root;
  g.parent_ = "/gpuplane/" + name;
  g.v2_ = fs::exists(root / "cgroup.controllers");
  g.memory_dir_ = g.v2_ ? root / "gpuplane" / name : root / "memory" / "gpuplane" / name;
  return g;
}

Result<MemberCgroup> MemberCgroup::create(const std::string& name, int64_t memory_bytes,
                                          const fs::path& root) {
  if (memory_bytes <= 0) return fail(Error::invalid("a member cgroup needs a memory limit"));
  MemberCgroup g = GP_TRY(existing(name, root));
  std::error_code ec;
  if (g.v2_) {
    GP_TRY_VOID(write_file(root / "cgroup.subtree_control", "+memory"));
    fs::create_directories(root / "gpuplane", ec);
    GP_TRY_VOID(write_file(root / "gpuplane" / "cgroup.subtree_control", "+memory"));
  }
  fs::create_directories(g.memory_dir_, ec);
  if (ec)
    return fail(Error::unavailable(
        fmt::format("cannot create cgroup {}: {}", g.memory_dir_.string(), ec.message())));
  GP_TRY_VOID(write_file(g.memory_dir_ / (g.v2_ ? "memory.max" : "memory.limit_in_bytes"),
                         std::to_string(memory_bytes + kConmonHeadroom)));
  return g;
}

Result<bool> MemberCgroup::reached_limit() const {
  if (v2_) {
    auto events = GP_TRY(read_text_file((memory_dir_ / "memory.events").string()));
    return keyed(events, "oom_kill") > 0 || keyed(events, "max") > 0;
  }
  auto peak = GP_TRY(read_text_file((memory_dir_ / "memory.max_usage_in_bytes").string()));
  auto limit = GP_TRY(read_text_file((memory_dir_ / "memory.limit_in_bytes").string()));
  return std::atoll(peak.c_str()) >= std::atoll(limit.c_str()) - kConmonHeadroom;
}

Result<void> MemberCgroup::remove() const {
  // Every hierarchy podman created the parent in (v1: one per controller), deepest first.
  std::vector<fs::path> tops;
  if (v2_) {
    tops.push_back(root_ / parent_.substr(1));
  } else {
    std::error_code ec;
    for (const auto& c : fs::directory_iterator(root_, ec))
      if (fs::is_directory(c.path() / parent_.substr(1)))
        tops.push_back(c.path() / parent_.substr(1));
  }
  for (const auto& top : tops) {
    std::vector<fs::path> dirs;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(top, ec); !ec && it != fs::end(it);
         it.increment(ec))
      if (it->is_directory() && !it->is_symlink()) dirs.push_back(it->path());
    // The iteration lists each directory before those inside it: reversed, every directory
    // comes after its contents, and the top comes last.
    dirs.insert(dirs.begin(), top);
    std::reverse(dirs.begin(), dirs.end());
    for (const auto& d : dirs)
      if (::rmdir(d.c_str()) != 0 && errno != ENOENT)
        return fail(Error::unavailable(
            fmt::format("cannot remove cgroup {}: {}", d.string(), std::strerror(errno))));
  }
  return ok();
}

}  // namespace gp::jobs
