// The main() of a fuzz target built without libFuzzer (GP_FUZZ=OFF, the g++ release build): it
// feeds every file under the folders or files on its command line to LLVMFuzzerTestOneInput
// once, in name order, and prints how many it ran. The release tests replay each seed corpus
// this way, so a fuzz target that no longer compiles, or a seed that now crashes, fails the fast
// suite and not only the clang stage of `make test`.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::filesystem::path> inputs_under(const std::filesystem::path& p) {
  std::vector<std::filesystem::path> out;
  if (std::filesystem::is_directory(p)) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(p))
      if (e.is_regular_file()) out.push_back(e.path());
  } else if (std::filesystem::is_regular_file(p)) {
    out.push_back(p);
  }
  std::ranges::sort(out);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    auto files = inputs_under(argv[i]);
    if (files.empty()) {
      std::fprintf(stderr, "%s: no inputs under %s\n", argv[0], argv[i]);
      return 2;
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], f.c_str());
        return 2;
      }
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++ran;
    }
  }
  std::printf("replayed %zu inputs\n", ran);
  return 0;
}
