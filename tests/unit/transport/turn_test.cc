// The turn module shared by the Client and the Agent (transport/turn.h): signatures, break causes,
// request ids.
#include "transport/turn.h"

#include <catch2/catch.hpp>
#include <set>

#include "testing/fake_clock.h"

namespace strata::turn_internal {
namespace {

std::unique_ptr<Context> NewContext() {
  ContextOptions options;
  options.agent.id = "turn-agent";
  auto context = Context::Create(options).value();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", "Guide one.", "v1", 0}).ok());
  REQUIRE(context->AppendUser("Hello.").ok());
  return context;
}

TEST_CASE("request ids are <agent>-<tag>-<n>, the tag from the clock", "[transport][turn]") {
  testing::FakeClock clock;
  RequestIds ids(&clock);
  const std::string first = ids.Next("a");
  REQUIRE(first.size() == std::string("a-xxxxxx-1").size());
  CHECK(first.rfind("a-", 0) == 0);
  CHECK(first.substr(first.size() - 2) == "-1");
  CHECK(ids.Next("b").substr(1) == first.substr(1, first.size() - 2) + "2");
  testing::FakeClock same;
  CHECK(RequestIds(&same).Next("a") == first);  // the same clock gives the same tag
}

TEST_CASE("signatures leave the volatile layer out and follow every rendered byte",
          "[transport][turn]") {
  auto context = NewContext();
  std::vector<SegmentSignature> before = Signatures(*context);
  REQUIRE(before.size() == 3);
  REQUIRE(context->SetVolatile("now", "12:00").ok());
  CHECK(Signatures(*context).size() == 3);
  REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", "Guide two.", "v2", 0}).ok());
  std::vector<SegmentSignature> after = Signatures(*context);
  REQUIRE(after.size() == 3);
  std::string first_id;
  Layer first_layer = Layer::kHistory;
  std::vector<std::string> causes = BreakCauses(before, after, false, {}, &first_id, &first_layer);
  CHECK(causes == std::vector<std::string>{"doc version change (v1 -> v2)"});
  CHECK(first_layer == Layer::kDocs);
  CHECK(JoinCauses(causes) == "doc version change (v1 -> v2)");
  CHECK(JoinCauses({"a", "b", "c"}) == "a, b and c");
  CHECK(JoinCauses({}) == "unknown");
  causes = BreakCauses(before, after, true, {}, &first_id, &first_layer);
  CHECK(causes == std::vector<std::string>{"doc version change (v1 -> v2)", "compaction"});
}

TEST_CASE("Fnv64 continues from the hash it is given", "[transport][turn]") {
  CHECK(Fnv64("") == 1469598103934665603ULL);
  // The offset basis stored signatures and cache states were written with (not FNV's published
  // 14695981039346656037): a changed value would make every stored cache state unreadable.
  CHECK(Fnv64("a") == 0x44bd8ad473cd9906ULL);
  CHECK(Fnv64("b", Fnv64("a")) == Fnv64("ab"));
}

}  // namespace
}  // namespace strata::turn_internal
