// gp::api::Api::handle: whole requests against the real API over a SQLite store, the way the
// server hands them over (no sockets). The input picks the method and the credential, then
// gives the request target and the body:
//
//   byte 0: method (GET, POST, PUT, PATCH, DELETE, HEAD), byte 1: credential (none, the
//   platform admin's API key, a malformed token), then "TARGET\nBODY".
//
// The store keeps what earlier inputs created, so later ones meet tenants, projects and nodes.
// A 500 is a finding as much as a crash: every failure the API knows of has its own status.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "api/api.h"
#include "audit/signer.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/ids.h"
#include "fuzz_util.h"
#include "tenancy/tenancy.h"

namespace {

struct Fixture {
  std::filesystem::path dir;
  std::unique_ptr<gp::store::Store> store;
  gp::ManualClock clock{gp::from_unix_micros(1'800'000'000'000'000)};
  gp::SeededIdSource ids{7};
  gp::SeededRandom random{7};
  gp::Env env() { return {clock, ids, random}; }
  std::unique_ptr<gp::audit::AuditLog> audit;
  std::unique_ptr<gp::api::Api> api;
  std::string admin_token;
};

// Dies with a message: the fixture itself must work, or every run would look clean.
[[noreturn]] void fixture_failed(const std::string& what) {
  fprintf(stderr, "fuzz_api fixture: %s\n", what.c_str());
  abort();
}

Fixture& fixture() {
  static Fixture* f = [] {
    auto* x = new Fixture;
    spdlog::set_level(spdlog::level::off);
    // Under /dev/shm when there is one: the store syncs its writes.
    std::filesystem::path base =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    x->dir = base / ("gp-fuzz-api-" + std::to_string(::getpid()));
    std::filesystem::remove_all(x->dir);
    std::filesystem::create_directories(x->dir);
    auto store = gp::store::open_sqlite({.path = (x->dir / "gpuplane.db").string()});
    if (!store) fixture_failed(store.error().message);
    x->store = std::move(*store);
    auto signer = gp::audit::load_or_create((x->dir / "keys").string());
    if (!signer) fixture_failed(signer.error().message);
    x->audit = std::make_unique<gp::audit::AuditLog>(x->clock, std::move(*signer), 50);
    std::optional<gp::tenancy::Bootstrap> boot;
    auto booted = x->store->write([&](gp::store::Tx& tx) -> gp::Result<void> {
      boot = GP_TRY(gp::tenancy::bootstrap_platform_admin(tx, x->env(), std::nullopt));
      return gp::ok();
    });
    if (!booted || !boot) fixture_failed("bootstrap failed");
    x->admin_token = boot->api_key;
    x->api = std::make_unique<gp::api::Api>(*x->store, *x->audit, x->env());
    std::atexit([] { std::filesystem::remove_all(fixture().dir); });
    return x;
  }();
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static constexpr const char* kMethods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};
  Fixture& f = fixture();
  std::string_view rest = gp::fuzz::as_text(data + 2, size - 2);
  size_t newline = rest.find('\n');
  gp::api::HttpRequest req;
  req.method = kMethods[data[0] % std::size(kMethods)];
  req.target = std::string(rest.substr(0, newline));
  req.body = newline == std::string_view::npos ? "" : std::string(rest.substr(newline + 1));
  req.remote = "127.0.0.1";
  if (!req.body.empty()) req.headers.emplace_back("content-type", "application/json");
  switch (data[1] % 3) {
    case 1:
      req.headers.emplace_back("authorization", "Bearer " + f.admin_token);
      break;
    case 2:
      req.headers.emplace_back("authorization", "Bearer key_x.not-a-secret");
      break;
    default:
      break;
  }
  gp::api::HttpResponse resp = f.api->handle(std::move(req));
  if (resp.status == 500) {
    fprintf(stderr, "500: %s\n", resp.body.c_str());
    __builtin_trap();
  }
  f.clock.advance(std::chrono::seconds(1));
  return 0;
}
