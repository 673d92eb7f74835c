// strata-sim in a test's own process (127.0.0.1, port 0): starting it, a simulator that counts
// tokens as an agent configured with the repository's test SentencePiece model does, and reading
// its HTTP endpoints. Tests that include this link strata_sim_lib.
#ifndef STRATA_TESTS_TESTING_SIM_TESTING_H_
#define STRATA_TESTS_TESTING_SIM_TESTING_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "sim_server.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"
#include "testing/skip.h"
#include "testing/status_testing.h"

namespace strata::testing {

// The tokenizer spec of the SentencePiece model in tests/data (the one TestSim counts with).
inline std::string TestSpmSpec() {
  return std::string("spm:") + STRATA_TEST_DATA_DIR + "/strata-test-spm.model";
}

// The tokenizer of TestSpmSpec(). A skip, not a failure, in an ASan or TSan build of a binary
// that links libprotobuf, where the SentencePiece backend cannot be isolated (RTLD_DEEPBIND).
inline std::unique_ptr<Tokenizer> TestSpmTokenizer() {
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = MakeTokenizer(TestSpmSpec());
  if (!tokenizer.ok() && tokenizer.status().message().find("RTLD_DEEPBIND") != std::string::npos) {
    STRATA_SKIP(tokenizer.status().message());
  }
  return Must(std::move(tokenizer));
}

// Starts strata-sim with `options`; throws (failing the test) with the status when it cannot.
inline std::unique_ptr<sim::SimServer> StartSim(sim::SimOptions options = {}) {
  return Must(sim::SimServer::Start(std::move(options)));
}

// A simulator counting and caching as an agent with tokenizer TestSpmSpec() and the GLM-5 chat
// template predicts: same tokenizer, same template. `options` sets everything else (its tokenizer
// and chat template are replaced).
struct TestSim {
  std::unique_ptr<Tokenizer> tokenizer = TestSpmTokenizer();
  std::unique_ptr<ChatTemplate> glm = MakeGlm5ChatTemplate();
  std::unique_ptr<sim::SimServer> server;

  explicit TestSim(sim::SimOptions options = {}) {
    options.tokenizer = tokenizer.get();
    options.chat_template = glm.get();
    server = StartSim(std::move(options));
  }
};

// GETs `path` from 127.0.0.1:`port` over a plain socket (HTTP/1.1, Connection: close) and returns
// the whole response, status line and headers included; throws when it cannot connect or send.
inline std::string HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("HttpGet: socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    throw std::runtime_error("HttpGet: cannot send GET " + path +
                             " to 127.0.0.1:" + std::to_string(port));
  }
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_SIM_TESTING_H_
