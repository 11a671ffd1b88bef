#include "audit/signer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "common/crypto.h"
#include "common/files.h"

namespace gp::audit {

void detail::PkeyDeleter::operator()(evp_pkey_st* pkey) const { EVP_PKEY_free(pkey); }

namespace {

constexpr size_t kEd25519SignatureSize = 64;
constexpr size_t kEd25519PublicKeySize = 32;

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

// Drains OpenSSL's thread-local error queue into one line, so failures don't leak into the
// next, unrelated OpenSSL call on this thread.
std::string openssl_errors() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "gp::audit: %s failed: %s\n", what, openssl_errors().c_str());
  std::abort();
}

BioPtr memory_bio(std::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string bio_contents(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(len));
}

bool is_ed25519(const EVP_PKEY* pkey) { return EVP_PKEY_get_id(pkey) == EVP_PKEY_ED25519; }

// First 16 hex digits of SHA-256 over the raw public key.
std::string key_id_of(const EVP_PKEY* pkey) {
  unsigned char raw[kEd25519PublicKeySize];
  size_t len = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(pkey, raw, &len) != 1 || len != sizeof raw) {
    die("EVP_PKEY_get_raw_public_key");
  }
  return hex_encode(sha256(std::string_view(reinterpret_cast<char*>(raw), len))).substr(0, 16);
}

std::string public_pem_of(EVP_PKEY* pkey) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), pkey) != 1) die("PEM_write_bio_PUBKEY");
  return bio_contents(bio.get());
}

}  // namespace

// ---- Verifier ---------------------------------------------------------------------------------

Verifier::Verifier(detail::PkeyPtr pkey, std::string key_id)
    : pkey_(std::move(pkey)), key_id_(std::move(key_id)) {}

Result<Verifier> Verifier::from_public_pem(std::string_view public_pem) {
  BioPtr bio = memory_bio(public_pem);
  if (!bio) return fail(Error::internal("audit verifier: " + openssl_errors()));
  detail::PkeyPtr pkey(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!pkey) {
    return fail(Error::invalid("audit verifier: not a PEM public key: " + openssl_errors()));
  }
  if (!is_ed25519(pkey.get())) {
    return fail(Error::invalid("audit verifier: public key is not Ed25519"));
  }
  std::string key_id = key_id_of(pkey.get());
  return Verifier(std::move(pkey), std::move(key_id));
}

std::string Verifier::public_pem() const { return public_pem_of(pkey_.get()); }

bool Verifier::verify(std::string_view message, std::string_view signature_b64url) const {
  std::optional<std::string> sig = base64url_decode(signature_b64url);
  // Only the canonical encoding is accepted, so one signature has exactly one textual form.
  if (!sig || sig->size() != kEd25519SignatureSize || base64url_encode(*sig) != signature_b64url) {
    return false;
  }
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) die("EVP_MD_CTX_new");
  bool ok =
      EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey_.get()) == 1 &&
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig->data()), sig->size(),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  if (!ok) ERR_clear_error();  // a bad signature is an answer, not an error to keep around
  return ok;
}

// ---- Signer -----------------------------------------------------------------------------------

Signer::Signer(detail::PkeyPtr pkey, std::string key_id)
    : pkey_(std::move(pkey)), key_id_(std::move(key_id)) {}

Result<Signer> Signer::generate() {
  detail::PkeyPtr pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!pkey) return fail(Error::internal("audit signer: key generation: " + openssl_errors()));
  std::string key_id = key_id_of(pkey.get());
  return Signer(std::move(pkey), std::move(key_id));
}

Result<Signer> Signer::from_pem(std::string_view private_pem) {
  BioPtr bio = memory_bio(private_pem);
  if (!bio) return fail(Error::internal("audit signer: " + openssl_errors()));
  // An empty passphrase callback result makes an encrypted PEM fail instead of prompting on the
  // terminal.
  auto no_passphrase = [](char*, int, int, void*) { return 0; };
  detail::PkeyPtr pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  if (!pkey) {
    return fail(
        Error::invalid("audit signer: not an unencrypted PEM private key: " + openssl_errors()));
  }
  if (!is_ed25519(pkey.get())) {
    return fail(Error::invalid("audit signer: private key is not Ed25519"));
  }
  std::string key_id = key_id_of(pkey.get());
  return Signer(std::move(pkey), std::move(key_id));
}

std::string Signer::private_pem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), pkey_.get(), nullptr, nullptr, 0, nullptr,
                                       nullptr) != 1) {
    die("PEM_write_bio_PrivateKey");
  }
  return bio_contents(bio.get());
}

std::string Signer::public_pem() const { return public_pem_of(pkey_.get()); }

std::string Signer::sign(std::string_view message) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) die("EVP_MD_CTX_new");
  if (EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, pkey_.get()) != 1) {
    die("EVP_DigestSignInit");
  }
  unsigned char sig[kEd25519SignatureSize];
  size_t len = sizeof sig;
  if (EVP_DigestSign(ctx.get(), sig, &len, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1) {
    die("EVP_DigestSign");
  }
  return base64url_encode(std::string_view(reinterpret_cast<char*>(sig), len));
}

Verifier Signer::verifier() const {
  if (EVP_PKEY_up_ref(pkey_.get()) != 1) die("EVP_PKEY_up_ref");
  // Sharing the key object is safe: neither class mutates it after construction.
  return Verifier(detail::PkeyPtr(pkey_.get()), key_id_);
}

// ---- load_or_create ---------------------------------------------------------------------------

namespace {

Error io_error(const std::string& what, const std::string& path, int err) {
  return Error::unavailable(fmt::format("audit key: {} {}: {}", what, path, std::strerror(err)));
}

struct KeyFile {
  std::string contents;
  mode_t mode;
};

// Reads a regular file without following a symlink at the last component. nullopt if absent.
Result<std::optional<KeyFile>> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<KeyFile>();
    return fail(io_error("open", path, errno));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail(io_error("stat", path, errno));
  if (!S_ISREG(st.st_mode)) {
    return fail(Error::unavailable(fmt::format("audit key: {} is not a regular file", path)));
  }
  KeyFile file{{}, st.st_mode & 07777};
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(io_error("read", path, errno));
    }
    if (n == 0) break;
    file.contents.append(buf, static_cast<size_t>(n));
  }
  return file;
}

// Writes `contents` to a fresh temporary file next to `path` with exactly `mode`, fsynced.
// Returns the temporary's path; the caller publishes it with link() or rename().
Result<std::string> write_temp(const std::string& path, std::string_view contents, mode_t mode) {
  const std::string tmp = temp_path_beside(path);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0) return fail(io_error("create", tmp, errno));
  auto cleanup_fail = [&](const char* what) {
    int err = errno;
    ::unlink(tmp.c_str());
    return fail(io_error(what, tmp, err));
  };
  if (::fchmod(fd.get(), mode) != 0) return cleanup_fail("chmod");  // umask must not matter
  while (!contents.empty()) {
    ssize_t n = ::write(fd.get(), contents.data(), contents.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return cleanup_fail("write");
    }
    contents.remove_prefix(static_cast<size_t>(n));
  }
  if (::fsync(fd.get()) != 0) return cleanup_fail("fsync");
  return tmp;
}

Result<void> sync_dir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) return fail(io_error("fsync", dir, errno));
  return ok();
}

// Makes sure dir/audit-signing.pub holds `signer`'s public key.
Result<void> ensure_public_file(const std::string& dir, const Signer& signer) {
  std::string path = dir + "/" + std::string(kPublicKeyFile);
  std::string pem = signer.public_pem();
  std::optional<KeyFile> existing = GP_TRY(read_file(path));
  if (existing) {
    if (existing->contents == pem) return ok();
    auto published = Verifier::from_public_pem(existing->contents);
    if (published && published->key_id() == signer.key_id()) return ok();  // same key, reformatted
    return fail(Error::conflict(fmt::format(
        "audit key: {} does not match the signing key {} (restore it or remove it to have it "
        "rewritten)",
        path, signer.key_id())));
  }
  std::string tmp = GP_TRY(write_temp(path, pem, 0644));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return fail(io_error("rename to", path, err));
  }
  return sync_dir(dir);
}

// Parses an existing key file, refusing one that group or others could read or write.
Result<Signer> signer_from_file(const std::string& path, const KeyFile& file) {
  if (file.mode & 077) {
    return fail(ErrorCode::kPermissionDenied,
                fmt::format("audit key: {} has mode {:04o}; it must not be accessible to group "
                            "or others (chmod 600)",
                            path, file.mode));
  }
  auto signer = Signer::from_pem(file.contents);
  if (!signer) {
    return fail(signer.error().code, fmt::format("{}: {}", path, signer.error().message));
  }
  return signer;
}

}  // namespace

Result<Signer> load_or_create(const std::string& dir) {
  std::string key_path = dir + "/" + std::string(kSigningKeyFile);
  std::optional<KeyFile> existing = GP_TRY(read_file(key_path));
  if (!existing) {
    std::error_code ec;
    if (std::filesystem::create_directories(dir, ec)) {
      std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
    }
    if (ec) return fail(io_error("create directory", dir, ec.value()));

    Signer fresh = GP_TRY(Signer::generate());
    std::string tmp = GP_TRY(write_temp(key_path, fresh.private_pem(), 0600));
    // link() publishes the complete file atomically and, unlike rename(), never replaces a key
    // another process created meanwhile.
    int link_rc = ::link(tmp.c_str(), key_path.c_str());
    int link_err = errno;
    ::unlink(tmp.c_str());
    if (link_rc == 0) {
      GP_TRY_VOID(sync_dir(dir));
      GP_TRY_VOID(ensure_public_file(dir, fresh));
      return fresh;
    }
    if (link_err != EEXIST) return fail(io_error("link", key_path, link_err));
    existing = GP_TRY(read_file(key_path));  // lost the race: use the winner's key
    if (!existing) return fail(io_error("open", key_path, ENOENT));
  }
  Signer signer = GP_TRY(signer_from_file(key_path, *existing));
  GP_TRY_VOID(ensure_public_file(dir, signer));
  return signer;
}

}  // namespace gp::audit
