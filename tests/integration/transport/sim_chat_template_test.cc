// strata-sim with each chat template (its --chat-template flag): the reported crash input, one
// 100 KB request with ~20,000-level nested tool-call arguments, is answered 400 naming the nesting
// limit, and the server keeps serving.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sim_server.h"
#include "strata/chat_template.h"
#include "strata/http_transport.h"
#include "strata/transport.h"

namespace strata {
namespace {

std::string DeepArgumentsRequest() {
  const size_t depth = 20000;
  std::string args = "{\"a\": " + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
  nlohmann::json body = {{"model", "glm-5.3-flash"},
                         {"messages",
                          {{{"role", "user"}, {"content", std::string(60000, 'x')}},
                           {{"role", "assistant"},
                            {"content", nullptr},
                            {"tool_calls",
                             {{{"id", "c1"},
                               {"type", "function"},
                               {"function", {{"name", "f"}, {"arguments", args}}}}}}},
                           {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}}}}};
  return body.dump();
}

TEST_CASE("strata-sim answers a deeply nested request 400 with every chat template",
          "[sim][chat_template]") {
  const std::string deep = DeepArgumentsRequest();
  REQUIRE(deep.size() > 100000);
  const std::string normal =
      R"({"model":"glm-5.3-flash","messages":[{"role":"user","content":"Say something."}]})";
  for (const std::string& name : {std::string("glm5"), std::string("glm-5.3"),
                                  std::string("glm-4.7"), std::string("generic")}) {
    INFO(name);
    auto chat_template = MakeChatTemplate(name);
    REQUIRE(chat_template.ok());
    sim::SimOptions options;
    options.chat_template = chat_template->get();
    auto sim = sim::SimServer::Start(std::move(options));
    REQUIRE(sim.ok());
    HttpTransportOptions http;
    http.base_url = (*sim)->base_url();
    http.retry.max_attempts = 1;
    http.timeouts.first_byte = std::chrono::milliseconds(10000);
    auto transport = MakeHttpTransport(std::move(http));
    REQUIRE(transport.ok());

    Response response;
    Status sent = (*transport)->Send(deep, {}, &response);
    CHECK(!sent.ok());
    CHECK(response.http_status == 400);
    CHECK_THAT(sent.message(), Catch::Contains("deeper than 512 levels"));

    Response again;
    Status ok = (*transport)->Send(normal, {}, &again);
    INFO(ok.ToString());
    CHECK(ok.ok());
    (*sim)->Stop();
  }
}

}  // namespace
}  // namespace strata
