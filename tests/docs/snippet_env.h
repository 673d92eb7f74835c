// What a docs/ code block may use without declaring it: the objects the page's story has open
// (a context, a store, an agent, a tool call) and the application's own functions (sending a body,
// running a command, logging). Only for compiling the snippets (tests/docs/CMakeLists.txt).
#ifndef STRATA_TESTS_DOCS_SNIPPET_ENV_H_
#define STRATA_TESTS_DOCS_SNIPPET_ENV_H_

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "strata/agent.h"
#include "strata/status.h"

namespace strata::docs {

struct Env {
  std::unique_ptr<Context> context;
  std::unique_ptr<Store> store;
  std::unique_ptr<Agent> agent;
  ToolCall call;
  int64_t now_unix_ms = 0;
};

// The application's side of the examples.
inline void post_to_server(const std::string&) {}
inline std::string run(const std::string& command) { return command; }

}  // namespace strata::docs

// The names a fragment may use, bound in the function that holds it.
#define STRATA_DOCS_ENV_NAMES(env)                       \
  [[maybe_unused]] auto& context = (env).context;        \
  [[maybe_unused]] auto& store = (env).store;            \
  [[maybe_unused]] auto& agent = (env).agent;            \
  [[maybe_unused]] auto& call = (env).call;              \
  [[maybe_unused]] auto now_unix_ms = (env).now_unix_ms; \
  using strata::docs::post_to_server;                    \
  using strata::docs::run

#endif  // STRATA_TESTS_DOCS_SNIPPET_ENV_H_
