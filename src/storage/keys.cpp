// Data keys: AES-256-GCM envelope encryption through OpenSSL EVP.
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
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

// HMAC of `data` under `key` with `md` (a key derivation: the result is key material, wiped).
Result<Wiped> hmac(const EVP_MD* md, std::string_view key, std::string_view data) {
  Wiped out{std::string(EVP_MAX_MD_SIZE, '\0')};
  unsigned int len = 0;
  if (!HMAC(md, key.data(), int(key.size()), u(data), data.size(),
            reinterpret_cast<unsigned char*>(out.bytes.data()), &len))
    return fail(Error::internal("HMAC failed"));
  out.bytes.resize(len);
  return out;
}

std::string dek_aad(std::string_view tenant, uint32_t version) {
  return aad("data-key", {tenant, std::to_string(version)});
}
std::string secret_aad(std::string_view tenant, std::string_view name, uint32_t version) {
  return aad("secret", {tenant, name, std::to_string(version)});
}

Result<std::string> random_exact(const Random& random, size_t n) {
  std::string r = random.bytes(n);
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
                            const MasterKey& master, const Random& random) {
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

Result<MasterKey> create_master_key_file(const std::filesystem::path& path, const Random& random) {
  auto key = GP_TRY(MasterKey::from_bytes(GP_TRY(random_exact(random, kKeyBytes))));
  Wiped text{hex_encode(key.bytes()) + "\n"};
  if (auto written = create_private_file(path.string(), text.bytes); !written)
    return fail(Error::unavailable("master key: " + written.error().message));
  return key;
}

Result<std::vector<MasterKey>> load_master_keys(const std::filesystem::path& data_dir, bool create,
                                                const Random& random) {
  const auto current = data_dir / kMasterKeyFile, next = data_dir / kNextMasterKeyFile;
  std::error_code ec;
  const bool has_current = std::filesystem::exists(std::filesystem::symlink_status(current, ec));
  const bool has_next = std::filesystem::exists(std::filesystem::symlink_status(next, ec));
  std::vector<MasterKey> keys;
  if (!has_current && !has_next && create) {
    keys.push_back(GP_TRY(create_master_key_file(current, random)));
    return keys;
  }
  if (!has_current)
    return fail(Error::unavailable(fmt::format("no master key at {}", current.string())));
  keys.push_back(GP_TRY(load_master_key(current)));
  if (has_next) keys.push_back(GP_TRY(load_master_key(next)));
  return keys;
}

Result<void> create_tenant_key(Keyring& ring, std::string_view tenant, const MasterKey& master,
                               const Random& random, int64_t now_micros) {
  GP_TRY_VOID(validate_dns_label("tenant", tenant));
  if (const auto* t = find_tenant(ring, tenant))
    return fail(Error::conflict(
        fmt::format("tenant '{}' {}", tenant,
                    t->destroyed ? "had its data keys destroyed" : "has a data key")));
  Wiped dek{GP_TRY(random_exact(random, kKeyBytes))};
  auto w = GP_TRY(wrap(tenant, 1, dek.bytes, master, random));
  w.created_at = now_micros;
  ring.tenants.push_back({.tenant = std::string(tenant), .current_version = 1, .versions = {w}});
  return ok();
}

Result<uint32_t> rotate_data_key(Keyring& ring, std::string_view tenant, const MasterKey& master,
                                 const Random& random, int64_t now_micros) {
  GP_TRY(live_tenant(ring, tenant));
  auto* t = find_tenant(ring, tenant);
  uint32_t version = t->current_version + 1;
  Wiped dek{GP_TRY(random_exact(random, kKeyBytes))};
  auto w = GP_TRY(wrap(tenant, version, dek.bytes, master, random));
  w.created_at = now_micros;
  t->versions.push_back(std::move(w));
  t->current_version = version;
  return version;
}

int64_t current_key_created_at(const TenantKeys& t) {
  for (const auto& w : t.versions)
    if (w.version == t.current_version) return w.created_at;
  return 0;
}

Result<size_t> rewrap_all(Keyring& ring, std::span<const MasterKey> from, const MasterKey& to,
                          const Random& random) {
  Keyring next = ring;
  size_t count = 0;
  std::vector<MasterKey> openers(from.begin(), from.end());
  openers.push_back(to);
  for (auto& t : next.tenants) {
    if (t.destroyed) continue;
    for (auto& w : t.versions) {
      if (w.master_key_id == to.id()) continue;  // already done (a resumed rotation)
      auto dek = GP_TRY(unwrap(t.tenant, w, openers));
      const int64_t created_at = w.created_at;
      w = GP_TRY(wrap(t.tenant, w.version, dek.bytes, to, random));
      w.created_at = created_at;  // rewrapping is not rotation: the key is as old as it was
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
                                std::string_view plaintext, const Random& random) {
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
                                 std::string_view plaintext, const Random& random) {
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

Result<std::string> derive_volume_key(const Keyring& ring, std::span<const MasterKey> masters,
                                      std::string_view tenant) {
  const auto* t = GP_TRY(live_tenant(ring, tenant));
  auto dek = GP_TRY(data_key(*t, kVolumeKeyVersion, masters));
  auto key =
      GP_TRY(hmac(EVP_sha512(), dek.bytes, "gpuplane fscrypt volume key\n" + std::string(tenant)));
  return std::move(key.bytes);
}

bool needs_reseal(const Keyring& ring, const SealedSecret& s) {
  const auto* t = find_tenant(ring, s.tenant);
  return t && !t->destroyed && s.key_version != t->current_version;
}

Result<SealedSecret> reseal_secret(const Keyring& ring, std::span<const MasterKey> masters,
                                   const SealedSecret& s, const Random& random) {
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
                          {"ciphertext", base64url_encode(w.ciphertext)},
                          {"created_at", w.created_at}});
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
      w.created_at = vr.optional_integer("created_at", 0, INT64_MAX).value_or(0);
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

// ---- Sealed files ----

namespace {

constexpr size_t kFileIdBytes = 16;
constexpr size_t kKeyIdChars = 16;
constexpr size_t kSealedHeaderBytes = kSealedFileMagic.size() + kKeyIdChars + kFileIdBytes;

using File = std::unique_ptr<std::FILE, decltype(&std::fclose)>;

// The chunk key of one file: HMAC-SHA256(file key, label || file id).
Result<Wiped> chunk_key(const MasterKey& key, std::string_view file_id) {
  return hmac(EVP_sha256(), key.bytes(), "gpuplane sealed file chunk key\n" + std::string(file_id));
}

std::string chunk_nonce(uint64_t index) {
  std::string nonce(kNonceBytes, '\0');
  for (int i = 0; i < 8; ++i)
    nonce[kNonceBytes - 1 - i] = static_cast<char>((index >> (8 * i)) & 0xFF);
  return nonce;
}

std::string chunk_aad(std::string_view header, uint64_t index, bool last) {
  return aad("sealed-file", {header, std::to_string(index), last ? "last" : "more"});
}

}  // namespace

struct SealedFileWriter::State {
  File file{nullptr, &std::fclose};
  std::filesystem::path path;
  std::string header;
  Wiped key;
  std::string pending;
  uint64_t index = 0;
  bool finished = false;
};

SealedFileWriter::SealedFileWriter(std::unique_ptr<State> s) : s_(std::move(s)) {}
SealedFileWriter::SealedFileWriter(SealedFileWriter&&) noexcept = default;
SealedFileWriter& SealedFileWriter::operator=(SealedFileWriter&&) noexcept = default;
SealedFileWriter::~SealedFileWriter() {
  if (s_) OPENSSL_cleanse(s_->pending.data(), s_->pending.size());
}

Result<SealedFileWriter> SealedFileWriter::create(const std::filesystem::path& path,
                                                  const MasterKey& key, const Random& random) {
  auto s = std::make_unique<State>();
  s->path = path;
  const std::string file_id = GP_TRY(random_exact(random, kFileIdBytes));
  s->header = std::string(kSealedFileMagic) + key.id() + file_id;
  if (s->header.size() != kSealedHeaderBytes)
    return fail(Error::internal("a key id is 16 hex characters"));
  s->key = GP_TRY(chunk_key(key, file_id));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return fail(Error::unavailable(
        fmt::format("cannot create {}: {}", path.string(), std::strerror(errno))));
  s->file.reset(::fdopen(fd, "wb"));
  if (!s->file) {
    ::close(fd);
    return fail(Error::unavailable(fmt::format("cannot open {}", path.string())));
  }
  if (std::fwrite(s->header.data(), 1, s->header.size(), s->file.get()) != s->header.size())
    return fail(Error::unavailable(fmt::format("cannot write {}", path.string())));
  return SealedFileWriter(std::move(s));
}

Result<void> SealedFileWriter::seal_chunk(bool last) {
  const size_t n = std::min(s_->pending.size(), kSealedChunkBytes);
  auto sealed =
      GP_TRY(gcm_seal(s_->key.bytes, chunk_nonce(s_->index), chunk_aad(s_->header, s_->index, last),
                      std::string_view(s_->pending).substr(0, n)));
  OPENSSL_cleanse(s_->pending.data(), n);
  s_->pending.erase(0, n);
  char length[4];
  const auto size = static_cast<uint32_t>(sealed.size());
  for (int i = 0; i < 4; ++i) length[i] = static_cast<char>((size >> (24 - 8 * i)) & 0xFF);
  if (std::fwrite(length, 1, 4, s_->file.get()) != 4 ||
      std::fwrite(sealed.data(), 1, sealed.size(), s_->file.get()) != sealed.size())
    return fail(Error::unavailable(
        fmt::format("cannot write {}: {}", s_->path.string(), std::strerror(errno))));
  ++s_->index;
  return ok();
}

Result<void> SealedFileWriter::write(std::string_view bytes) {
  if (s_->finished) return fail(Error::internal("write after finish"));
  s_->pending.append(bytes);
  // A full chunk is sealed only once more follows, so the last one is always flagged last.
  while (s_->pending.size() > kSealedChunkBytes) GP_TRY_VOID(seal_chunk(false));
  return ok();
}

Result<void> SealedFileWriter::finish() {
  if (s_->finished) return ok();
  GP_TRY_VOID(seal_chunk(true));
  s_->finished = true;
  if (std::fflush(s_->file.get()) != 0 || ::fsync(::fileno(s_->file.get())) != 0)
    return fail(Error::unavailable(
        fmt::format("cannot sync {}: {}", s_->path.string(), std::strerror(errno))));
  if (std::fclose(s_->file.release()) != 0)
    return fail(Error::unavailable(fmt::format("cannot close {}", s_->path.string())));
  return ok();
}

struct SealedFileReader::State {
  File file{nullptr, &std::fclose};
  std::filesystem::path path;
  std::string header;
  Wiped key;
  uint64_t index = 0;
  bool done = false;
};

SealedFileReader::SealedFileReader(std::unique_ptr<State> s) : s_(std::move(s)) {}
SealedFileReader::SealedFileReader(SealedFileReader&&) noexcept = default;
SealedFileReader& SealedFileReader::operator=(SealedFileReader&&) noexcept = default;
SealedFileReader::~SealedFileReader() = default;

Result<SealedFileReader> SealedFileReader::open(const std::filesystem::path& path,
                                                const MasterKey& key) {
  auto s = std::make_unique<State>();
  s->path = path;
  s->file.reset(std::fopen(path.c_str(), "rbe"));
  if (!s->file)
    return fail(
        Error::not_found(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno))));
  s->header.resize(kSealedHeaderBytes);
  if (std::fread(s->header.data(), 1, s->header.size(), s->file.get()) != s->header.size() ||
      !s->header.starts_with(kSealedFileMagic))
    return fail(Error::invalid(fmt::format("{} is not a gpuplane sealed file", path.string())));
  const std::string key_id = s->header.substr(kSealedFileMagic.size(), kKeyIdChars);
  if (key_id != key.id())
    return fail(
        Error::denied(fmt::format("{} was sealed with key {}; the key given is {}: wrong key",
                                  path.string(), key_id, key.id())));
  s->key =
      GP_TRY(chunk_key(key, std::string_view(s->header).substr(kSealedHeaderBytes - kFileIdBytes)));
  return SealedFileReader(std::move(s));
}

Result<std::optional<std::string>> SealedFileReader::next() {
  if (s_->done) return std::optional<std::string>();
  const auto truncated = [&] {
    return fail(Error::invalid(
        fmt::format("{} ends before its last chunk: the file is truncated", s_->path.string())));
  };
  unsigned char length[4];
  if (std::fread(length, 1, 4, s_->file.get()) != 4) return truncated();
  const uint32_t size = (uint32_t{length[0]} << 24) | (uint32_t{length[1]} << 16) |
                        (uint32_t{length[2]} << 8) | uint32_t{length[3]};
  if (size < kTagBytes || size > kSealedChunkBytes + kTagBytes)
    return fail(
        Error::invalid(fmt::format("{}: chunk {} has an impossible length {}: the file "
                                   "was altered",
                                   s_->path.string(), s_->index, size)));
  std::string sealed(size, '\0');
  if (std::fread(sealed.data(), 1, size, s_->file.get()) != size) return truncated();
  const std::string nonce = chunk_nonce(s_->index);
  // A chunk authenticates either as a middle chunk or as the last one, never as both.
  for (bool last : {false, true}) {
    auto plain =
        GP_TRY(gcm_open(s_->key.bytes, nonce, chunk_aad(s_->header, s_->index, last), sealed));
    if (!plain) continue;
    ++s_->index;
    if (last) {
      if (std::fgetc(s_->file.get()) != EOF)
        return fail(Error::invalid(fmt::format(
            "{} has bytes after its last chunk: the file was altered", s_->path.string())));
      s_->done = true;
    }
    return std::optional<std::string>(std::move(*plain));
  }
  return fail(Error::invalid(
      fmt::format("{}: chunk {} does not authenticate: the file was altered or damaged",
                  s_->path.string(), s_->index)));
}

}  // namespace gp::storage
