// Data keys: AES-256-GCM envelope encryption through OpenSSL EVP.
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/crypto.h"
#include "common/files.h"
#include "storage/storage.h"

namespace gp::storage {
namespace {

// Key bytes that are wiped when they go out of scope.
struct Wiped {
  std::string bytes;
  ~Wiped() { OPENSSL_cleanse(bytes.data(), bytes.size()); }
};

void wipe(std::string& s) {
  OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

// Associated data: a purpose label, then each field with a 4-byte length, so no two field
// lists encode alike.
std::string aad(std::string_view purpose, std::initializer_list<std::string_view> fields) {
  std::string out = fmt::format("gpuplane/{}/v1", purpose);
  for (auto f : fields) {
    uint32_t n = static_cast<uint32_t>(f.size());
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>((n >> shift) & 0xFF));
    out.append(f);
  }
  return out;
}

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

const unsigned char* u(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

Result<std::string> gcm_seal(std::string_view key, std::string_view nonce, std::string_view ad,
                             std::string_view plaintext) {
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  std::string out(plaintext.size() + kTagBytes, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  int len = 0, total = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, int(nonce.size()), nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, u(key), u(nonce)) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, u(ad), int(ad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), o, &len, u(plaintext), int(plaintext.size())) != 1)
    return fail(Error::internal("AES-256-GCM encryption failed"));
  total = len;
  if (EVP_EncryptFinal_ex(ctx.get(), o + total, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, int(kTagBytes), o + total + len) != 1)
    return fail(Error::internal("AES-256-GCM encryption failed"));
  return out;
}

// nullopt when the ciphertext does not authenticate under this key, nonce and data.
Result<std::optional<std::string>> gcm_open(std::string_view key, std::string_view nonce,
                                            std::string_view ad, std::string_view sealed) {
  if (sealed.size() < kTagBytes || nonce.size() != kNonceBytes) return std::optional<std::string>{};
  auto body = sealed.substr(0, sealed.size() - kTagBytes);
  std::string tag(sealed.substr(body.size()));
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  std::string out(body.size(), '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  int len = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, int(nonce.size()), nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, u(key), u(nonce)) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, u(ad), int(ad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), o, &len, u(body), int(body.size())) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, int(kTagBytes), tag.data()) != 1)
    return fail(Error::internal("AES-256-GCM decryption failed"));
  int total = len;
  if (EVP_DecryptFinal_ex(ctx.get(), o + total, &len) != 1) {
    wipe(out);
    return std::optional<std::string>{};
  }
  return std::optional<std::string>(std::move(out));
}

std::string dek_aad(std::string_view tenant, uint32_t version) {
  return aad("data-key", {tenant, std::to_string(version)});
}
std::string secret_aad(std::string_view tenant, std::string_view name, uint32_t version) {
  return aad("secret", {tenant, name, std::to_string(version)});
}

Result<std::string> random_exact(const RandomSource& random, size_t n) {
  std::string r = random(n);
  if (r.size() != n) return fail(Error::internal("random source returned the wrong length"));
  return r;
}

TenantKeys* find_tenant(Keyring& ring, std::string_view tenant) {
  for (auto& t : ring.tenants)
    if (t.tenant == tenant) return &t;
  return nullptr;
}
const TenantKeys* find_tenant(const Keyring& ring, std::string_view tenant) {
  return find_tenant(const_cast<Keyring&>(ring), tenant);
}

Result<const TenantKeys*> live_tenant(const Keyring& ring, std::string_view tenant) {
  const auto* t = find_tenant(ring, tenant);
  if (!t) return fail(Error::not_found(fmt::format("tenant '{}' has no data key", tenant)));
  if (t->destroyed)
    return fail(Error::denied(fmt::format("tenant '{}' data keys were destroyed", tenant)));
  return t;
}

const MasterKey* find_master(std::span<const MasterKey> masters, std::string_view id) {
  for (const auto& m : masters)
    if (m.id() == id) return &m;
  return nullptr;
}

Result<WrappedDataKey> wrap(std::string_view tenant, uint32_t version, std::string_view dek,
                            const MasterKey& master, const RandomSource& random) {
  WrappedDataKey w{.version = version, .master_key_id = master.id()};
  w.nonce = GP_TRY(random_exact(random, kNonceBytes));
  w.ciphertext = GP_TRY(gcm_seal(master.bytes(), w.nonce, dek_aad(tenant, version), dek));
  return w;
}

Result<Wiped> unwrap(std::string_view tenant, const WrappedDataKey& w,
                     std::span<const MasterKey> masters) {
  const auto* master = find_master(masters, w.master_key_id);
  if (!master)
    return fail(Error::unavailable(
        fmt::format("data key {} of tenant '{}' is wrapped by master key {}, which is not loaded",
                    w.version, tenant, w.master_key_id)));
  auto dek = GP_TRY(gcm_open(master->bytes(), w.nonce, dek_aad(tenant, w.version), w.ciphertext));
  if (!dek || dek->size() != kKeyBytes)
    return fail(Error::internal(fmt::format(
        "data key {} of tenant '{}' does not unwrap: the keyring was altered", w.version, tenant)));
  return Wiped{std::move(*dek)};
}

Result<Wiped> data_key(const TenantKeys& t, uint32_t version, std::span<const MasterKey> masters) {
  for (const auto& w : t.versions)
    if (w.version == version) return unwrap(t.tenant, w, masters);
  return fail(
      Error::not_found(fmt::format("tenant '{}' has no data key version {}", t.tenant, version)));
}

}  // namespace

RandomSource system_random() {
  return [](size_t n) { return random_bytes(n); };
}

Result<MasterKey> MasterKey::from_bytes(std::string key) {
  if (key.size() != kKeyBytes) {
    wipe(key);
    return fail(Error::invalid(fmt::format("a master key is {} bytes", kKeyBytes)));
  }
  MasterKey m;
  m.id_ = hex_encode(sha256("gpuplane master key\n" + key).substr(0, 8));
  m.key_ = std::move(key);
  return m;
}

MasterKey::~MasterKey() { OPENSSL_cleanse(key_.data(), key_.size()); }

Result<MasterKey> load_master_key(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP)
      return fail(Error::invalid(fmt::format("master key {} is a symlink", path.string())));
    return fail(Error::unavailable(
        fmt::format("cannot open master key {}: {}", path.string(), std::strerror(e))));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return fail(Error::invalid(fmt::format("master key {} is not a regular file", path.string())));
  if (st.st_uid != ::geteuid())
    return fail(Error::invalid(fmt::format("master key {} is owned by uid {}, not by uid {}",
                                           path.string(), st.st_uid, ::geteuid())));
  if ((st.st_mode & 077) != 0)
    return fail(Error::invalid(fmt::format(
        "master key {} has mode {:04o}; it must be 0600 or 0400 (no group or other access)",
        path.string(), st.st_mode & 07777)));
  Wiped text;
  text.bytes.resize(2 * kKeyBytes + 2);
  ssize_t n = ::read(fd, text.bytes.data(), text.bytes.size());
  if (n < 0)
    return fail(Error::unavailable(
        fmt::format("cannot read master key {}: {}", path.string(), std::strerror(errno))));
  text.bytes.resize(static_cast<size_t>(n));
  if (!text.bytes.empty() && text.bytes.back() == '\n') text.bytes.pop_back();
  auto raw = text.bytes.size() == 2 * kKeyBytes ? hex_decode(text.bytes) : std::nullopt;
  if (!raw)
    return fail(Error::invalid(fmt::format("master key {} must hold exactly {} hex characters",
                                           path.string(), 2 * kKeyBytes)));
  return MasterKey::from_bytes(std::move(*raw));
}

Result<MasterKey> create_master_key_file(const std::filesystem::path& path,
                                         const RandomSource& random) {
  auto key = GP_TRY(MasterKey::from_bytes(GP_TRY(random_exact(random, kKeyBytes))));
  Wiped text{hex_encode(key.bytes()) + "\n"};
  if (auto written = create_private_file(path.string(), text.bytes); !written)
    return fail(Error::unavailable("master key: " + written.error().message));
  return key;
}

Result<void> create_tenant_key(Keyring& ring, std::string_view tenant, const MasterKey& master,
                               const RandomSource& random) {
  GP_TRY_VOID(validate_dns_label("tenant", tenant));
  if (const auto* t = find_tenant(ring, tenant))
    return fail(Error::conflict(
        fmt::format("tenant '{}' {}", tenant,
                    t->destroyed ? "had its data keys destroyed" : "has a data key")));
  Wiped dek{GP_TRY(random_exact(random, kKeyBytes))};
  auto w = GP_TRY(wrap(tenant, 1, dek.bytes, master, random));
  ring.tenants.push_back({.tenant = std::string(tenant), .current_version = 1, .versions = {w}});
  return ok();
}

Result<uint32_t> rotate_data_key(Keyring& ring, std::string_view tenant, const MasterKey& master,
                                 const RandomSource& random) {
  GP_TRY(live_tenant(ring, tenant));
  auto* t = find_tenant(ring, tenant);
  uint32_t version = t->current_version + 1;
  Wiped dek{GP_TRY(random_exact(random, kKeyBytes))};
  t->versions.push_back(GP_TRY(wrap(tenant, version, dek.bytes, master, random)));
  t->current_version = version;
  return version;
}

Result<size_t> rewrap_all(Keyring& ring, std::span<const MasterKey> from, const MasterKey& to,
                          const RandomSource& random) {
  Keyring next = ring;
  size_t count = 0;
  std::vector<MasterKey> openers(from.begin(), from.end());
  openers.push_back(to);
  for (auto& t : next.tenants) {
    if (t.destroyed) continue;
    for (auto& w : t.versions) {
      if (w.master_key_id == to.id()) continue;  // already done (a resumed rotation)
      auto dek = GP_TRY(unwrap(t.tenant, w, openers));
      w = GP_TRY(wrap(t.tenant, w.version, dek.bytes, to, random));
      ++count;
    }
  }
  ring = std::move(next);
  return count;
}

Result<void> destroy_tenant_keys(Keyring& ring, std::string_view tenant) {
  auto* t = find_tenant(ring, tenant);
  if (!t) return fail(Error::not_found(fmt::format("tenant '{}' has no data key", tenant)));
  for (auto& w : t->versions) {
    wipe(w.ciphertext);
    wipe(w.nonce);
  }
  t->versions.clear();
  t->current_version = 0;
  t->destroyed = true;
  return ok();
}

Result<void> retire_data_key(Keyring& ring, std::string_view tenant, uint32_t version,
                             std::span<const SealedSecret> still_sealed) {
  GP_TRY(live_tenant(ring, tenant));
  auto* t = find_tenant(ring, tenant);
  if (version == t->current_version)
    return fail(Error::conflict(fmt::format("version {} is the current data key", version)));
  for (const auto& s : still_sealed)
    if (s.tenant == tenant && s.key_version == version)
      return fail(Error::conflict(
          fmt::format("secret '{}' is still sealed with data key version {}; reseal it first",
                      s.name, version)));
  auto before = t->versions.size();
  std::erase_if(t->versions, [&](WrappedDataKey& w) {
    if (w.version != version) return false;
    wipe(w.ciphertext);
    return true;
  });
  if (t->versions.size() == before)
    return fail(
        Error::not_found(fmt::format("tenant '{}' has no data key version {}", tenant, version)));
  return ok();
}

Result<void> validate_secret_name(std::string_view name) {
  bool good = !name.empty() && name.size() <= 128 && name != "." && name != "..";
  for (char ch : name)
    good =
        good && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 std::string_view(kSecretNamePunctuation).contains(ch));
  if (!good)
    return fail(Error::invalid(fmt::format(
        "secret name '{}': 1 to 128 characters, each a letter, a digit or one of \"{}\" (not "
        "\".\" or \"..\" alone)",
        name, kSecretNamePunctuation)));
  return ok();
}

namespace {
// Seals under the tenant's current key; the name is checked by the caller (a new secret) or was
// stored already (a reseal keeps it, even one stored before the current naming rule).
Result<SealedSecret> seal_named(const Keyring& ring, std::span<const MasterKey> masters,
                                std::string_view tenant, std::string_view name,
                                std::string_view plaintext, const RandomSource& random) {
  const auto* t = GP_TRY(live_tenant(ring, tenant));
  auto dek = GP_TRY(data_key(*t, t->current_version, masters));
  SealedSecret s{
      .tenant = std::string(tenant), .name = std::string(name), .key_version = t->current_version};
  s.nonce = GP_TRY(random_exact(random, kNonceBytes));
  s.ciphertext =
      GP_TRY(gcm_seal(dek.bytes, s.nonce, secret_aad(tenant, name, s.key_version), plaintext));
  return s;
}
}  // namespace

Result<SealedSecret> seal_secret(const Keyring& ring, std::span<const MasterKey> masters,
                                 std::string_view tenant, std::string_view name,
                                 std::string_view plaintext, const RandomSource& random) {
  GP_TRY_VOID(validate_secret_name(name));
  return seal_named(ring, masters, tenant, name, plaintext, random);
}

Result<std::string> open_secret(const Keyring& ring, std::span<const MasterKey> masters,
                                const SealedSecret& s) {
  const auto* t = GP_TRY(live_tenant(ring, s.tenant));
  auto dek = GP_TRY(data_key(*t, s.key_version, masters));
  auto plain = GP_TRY(
      gcm_open(dek.bytes, s.nonce, secret_aad(s.tenant, s.name, s.key_version), s.ciphertext));
  if (!plain)
    return fail(Error::invalid(fmt::format(
        "secret '{}' of tenant '{}' does not authenticate (altered, or not this tenant's or "
        "name's)",
        s.name, s.tenant)));
  return std::move(*plain);
}

bool needs_reseal(const Keyring& ring, const SealedSecret& s) {
  const auto* t = find_tenant(ring, s.tenant);
  return t && !t->destroyed && s.key_version != t->current_version;
}

Result<SealedSecret> reseal_secret(const Keyring& ring, std::span<const MasterKey> masters,
                                   const SealedSecret& s, const RandomSource& random) {
  Wiped plain{GP_TRY(open_secret(ring, masters, s))};
  return seal_named(ring, masters, s.tenant, s.name, plain.bytes, random);
}

// ---- JSON ----

namespace {

Result<std::string> b64_field(ObjectReader& r, std::string_view key, std::string_view what) {
  auto text = r.string(key, 1 << 20);
  auto raw = base64url_decode(text);
  if (!raw) return fail(Error::invalid(fmt::format("{}: '{}' is not base64url", what, key)));
  return *raw;
}

}  // namespace

Json to_json(const Keyring& ring) {
  Json tenants = Json::array();
  for (const auto& t : ring.tenants) {
    Json versions = Json::array();
    for (const auto& w : t.versions)
      versions.push_back({{"version", w.version},
                          {"master_key_id", w.master_key_id},
                          {"nonce", base64url_encode(w.nonce)},
                          {"ciphertext", base64url_encode(w.ciphertext)}});
    tenants.push_back({{"tenant", t.tenant},
                       {"current_version", t.current_version},
                       {"destroyed", t.destroyed},
                       {"versions", versions}});
  }
  return {{"tenants", tenants}};
}

Result<Keyring> keyring_from_json(const Json& j) {
  ObjectReader r(j, "keyring");
  const Json* tenants = r.optional_array("tenants");
  GP_TRY_VOID(r.finish());
  Keyring ring;
  for (size_t i = 0; tenants && i < tenants->size(); ++i) {
    std::string what = fmt::format("keyring.tenants[{}]", i);
    ObjectReader tr((*tenants)[i], what);
    TenantKeys t;
    t.tenant = tr.string("tenant", 63);
    t.current_version = static_cast<uint32_t>(tr.integer("current_version", 0, UINT32_MAX));
    t.destroyed = tr.optional_bool("destroyed").value_or(false);
    const Json* versions = tr.optional_array("versions");
    GP_TRY_VOID(tr.finish());
    for (size_t k = 0; versions && k < versions->size(); ++k) {
      std::string vwhat = fmt::format("{}.versions[{}]", what, k);
      ObjectReader vr((*versions)[k], vwhat);
      WrappedDataKey w;
      w.version = static_cast<uint32_t>(vr.integer("version", 1, UINT32_MAX));
      w.master_key_id = vr.string("master_key_id", 64);
      w.nonce = GP_TRY(b64_field(vr, "nonce", vwhat));
      w.ciphertext = GP_TRY(b64_field(vr, "ciphertext", vwhat));
      GP_TRY_VOID(vr.finish());
      t.versions.push_back(std::move(w));
    }
    if (!t.destroyed && !t.versions.empty() &&
        std::none_of(t.versions.begin(), t.versions.end(),
                     [&](const auto& w) { return w.version == t.current_version; }))
      return fail(Error::invalid(
          fmt::format("{}: current version {} is missing", what, t.current_version)));
    if (find_tenant(ring, t.tenant))
      return fail(Error::invalid(fmt::format("{}: tenant '{}' twice", what, t.tenant)));
    ring.tenants.push_back(std::move(t));
  }
  return ring;
}

Json to_json(const SealedSecret& s) {
  return {{"tenant", s.tenant},
          {"name", s.name},
          {"key_version", s.key_version},
          {"nonce", base64url_encode(s.nonce)},
          {"ciphertext", base64url_encode(s.ciphertext)}};
}

Result<SealedSecret> sealed_secret_from_json(const Json& j) {
  ObjectReader r(j, "sealed secret");
  SealedSecret s;
  s.tenant = r.string("tenant", 63);
  s.name = r.string("name", 128);
  s.key_version = static_cast<uint32_t>(r.integer("key_version", 1, UINT32_MAX));
  s.nonce = GP_TRY(b64_field(r, "nonce", "sealed secret"));
  s.ciphertext = GP_TRY(b64_field(r, "ciphertext", "sealed secret"));
  GP_TRY_VOID(r.finish());
  return s;
}

}  // namespace gp::storage
