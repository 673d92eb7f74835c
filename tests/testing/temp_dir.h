// TempDir: a fresh directory for one test, removed with everything in it when the test ends.
//
//   testing::TempDir dir;                       // $TMPDIR/strata-test-XXXXXX (or /tmp/...)
//   REQUIRE(!dir.path().empty());               // mkdtemp failed otherwise
//   std::ofstream(dir.File("trace.jsonl")) << line;
//
// mkdtemp gives each TempDir its own name, so tests running in parallel (ctest -j) and repeated
// runs never share a directory. Removal gives the owner back every permission on the directory
// first, so a test that made it read-only still leaves nothing behind.
#ifndef STRATA_TESTS_TESTING_TEMP_DIR_H_
#define STRATA_TESTS_TESTING_TEMP_DIR_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace strata::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its content on destruction. `prefix`
// starts its name (then six random characters), so that a leftover says which test made it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "strata-test-") {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "XXXXXX";
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The directory; "" when it could not be made.
  const std::string& path() const { return path_; }
  // `name` inside the directory.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_TEMP_DIR_H_
