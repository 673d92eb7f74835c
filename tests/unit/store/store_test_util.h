// Helpers shared by the store tests: temporary directories and segment comparison.
#ifndef STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_
#define STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "strata/segment.h"

namespace strata::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its content on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/strata-store-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Every field of a segment as text, for exact comparison in assertions.
inline std::string Describe(const Segment& s) {
  std::ostringstream out;
  out << s.id << "|" << s.seq << "|" << s.position << "|" << static_cast<int>(s.kind) << "|"
      << static_cast<int>(s.layer) << "|" << s.content << "|" << s.reasoning << "|";
  for (const ToolCall& c : s.tool_calls)
    out << "[" << c.id << "," << c.name << "," << c.arguments << "]";
  out << "|" << s.tool_call_id << "|" << s.name << "|" << s.version << "|" << s.order << "|"
      << s.turn << "|" << s.tokens << "|" << s.pinned << "|"
      << static_cast<int>(s.state) << "|" << static_cast<int>(s.hygiene) << "|" << s.recall_id
      << "|" << s.duplicate_of;
  return out.str();
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_
