// The trajectories that ship with the repository (tests/data/traces; sources and licences in
// SOURCES.md there), for tests. Tests read only these: a missing file is a failure, never a skip.
#ifndef STRATA_TESTS_TESTING_TRACES_H_
#define STRATA_TESTS_TESTING_TRACES_H_

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::testing {

// tests/data/traces/<relative>, e.g. TestTracePath("swe-agent/ctf-crypto-BabyEncryption.jsonl").
inline std::string TestTracePath(const std::string& relative) {
  return std::string(STRATA_TEST_TRACES_DIR) + "/" + relative;
}

// Every trajectory of the fixture set (*.jsonl under tests/data/traces except manifest.jsonl), sorted.
inline std::vector<std::string> TestTraceFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(STRATA_TEST_TRACES_DIR)) {
    if (entry.path().extension() == ".jsonl" && entry.path().filename() != "manifest.jsonl") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    throw std::runtime_error(std::string("no trajectories in ") + STRATA_TEST_TRACES_DIR +
                             " (the repository's fixture set is missing)");
  }
  return files;
}

// Message contents (the "content" string of each line), one vector per trajectory, in file order.
inline std::vector<std::vector<std::string>> TestTraceContents() {
  std::vector<std::vector<std::string>> trajectories;
  for (const std::string& file : TestTraceFiles()) {
    std::ifstream in(file);
    std::string line;
    trajectories.emplace_back();
    while (std::getline(in, line)) {
      if (!line.empty()) {
        trajectories.back().push_back(nlohmann::json::parse(line).at("content").get<std::string>());
      }
    }
  }
  return trajectories;
}

// The non-blank text lines of every message content (CR of CRLF removed), at most `max_lines`.
inline std::vector<std::string> TestTraceTextLines(size_t max_lines) {
  std::vector<std::string> lines;
  for (const auto& trajectory : TestTraceContents()) {
    for (const std::string& content : trajectory) {
      std::istringstream in(content);
      std::string text_line;
      while (std::getline(in, text_line)) {
        if (!text_line.empty() && text_line.back() == '\r') text_line.pop_back();
        if (text_line.find_first_not_of(" \t") == std::string::npos) continue;
        lines.push_back(text_line);
        if (lines.size() >= max_lines) return lines;
      }
    }
  }
  return lines;
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_TRACES_H_
