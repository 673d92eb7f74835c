#include "tokenizer_allowlist.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace strata::sidecar {
namespace {

TokenizerAllowList List(std::map<std::string, std::string> named, std::string default_tokenizer) {
  StatusOr<TokenizerAllowList> list = TokenizerAllowList::Make(std::move(named), default_tokenizer);
  REQUIRE(list.ok());
  return std::move(list).value();
}

TEST_CASE("tokenizer allow-list: names resolve to the operator's specs", "[sidecar][tokenizers]") {
  TokenizerAllowList list = List({{"glm-5.3", "hf:/srv/glm/tokenizer.json"}}, "glm-5.3");
  CHECK(list.default_spec() == "hf:/srv/glm/tokenizer.json");
  CHECK(*list.Resolve("glm-5.3") == "hf:/srv/glm/tokenizer.json");
  // Specs that read no file are anyone's.
  CHECK(*list.Resolve("estimate") == "estimate");
  CHECK(*list.Resolve("estimate:3.5") == "estimate:3.5");
  // Tenants are shown the name, never the path.
  CHECK(list.Shown("hf:/srv/glm/tokenizer.json") == "glm-5.3");
  CHECK(list.Shown("estimate:2") == "estimate:2");
}

TEST_CASE("tokenizer allow-list: a default that reads a file is listed as \"default\"",
          "[sidecar][tokenizers]") {
  TokenizerAllowList list = List({{"small", "estimate:3"}}, "spm:/srv/model.model");
  CHECK(list.default_spec() == "spm:/srv/model.model");
  CHECK(*list.Resolve("default") == "spm:/srv/model.model");
  CHECK(list.Shown("spm:/srv/model.model") == "default");
  CHECK(*list.Resolve("small") == "estimate:3");
  // A default that reads no file needs no name.
  TokenizerAllowList plain = List({}, "estimate:4");
  CHECK(plain.default_spec() == "estimate:4");
  CHECK(plain.named().empty());
  // "default" taken by another spec: the file default cannot be named.
  StatusOr<TokenizerAllowList> clash =
      TokenizerAllowList::Make({{"default", "hf:/a.json"}}, "hf:/b.json");
  REQUIRE_FALSE(clash.ok());
  CHECK_THAT(clash.status().message(), Catch::Contains("give --tokenizer as one of the names"));
}

TEST_CASE("tokenizer allow-list: every file a tenant names gets the same refusal",
          "[sidecar][tokenizers]") {
  TokenizerAllowList list = List({{"glm-5.3", "hf:/srv/glm/tokenizer.json"}}, "estimate");
  const std::string expected =
      " is not one of the allowed tokenizers: glm-5.3 (or a spec that reads no file: estimate, "
      "estimate:BYTES_PER_TOKEN, estimate:FAMILY)";
  for (const std::string requested :
       {"hf:/etc/passwd", "hf:/nonexistent/tokenizer.json", "spm:/proc/self/environ",
        "hf:/srv/glm/tokenizer.json", "spm:/dev/zero", ""}) {
    INFO(requested);
    StatusOr<std::string> resolved = list.Resolve(requested);
    REQUIRE_FALSE(resolved.ok());
    CHECK(resolved.status().code() == StatusCode::kInvalidArgument);
    CHECK(resolved.status().message() == "tokenizer \"" + requested + "\"" + expected);
  }
  // A quoted value is cut and made printable.
  StatusOr<std::string> odd = list.Resolve("hf:/x\n" + std::string(200, 'y'));
  REQUIRE_FALSE(odd.ok());
  CHECK_THAT(odd.status().message(), Catch::StartsWith("tokenizer \"hf:/x?yyy") &&
                                         Catch::Contains("yyy...\" is not one of"));
}

TEST_CASE("tokenizer allow-list: names are checked", "[sidecar][tokenizers]") {
  StatusOr<TokenizerAllowList> bad = TokenizerAllowList::Make({{"a b", "estimate"}}, "estimate");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("tokenizers.a b") &&
                                         Catch::Contains("is not a tokenizer name"));
  StatusOr<TokenizerAllowList> empty = TokenizerAllowList::Make({{"x", ""}}, "estimate");
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.status().message(), Catch::Contains("tokenizers.x: the spec is empty"));
}

TEST_CASE("tokenizer allow-list: CheckAll names the key of a tokenizer that does not load",
          "[sidecar][tokenizers]") {
  CHECK(List({{"e", "estimate:3"}}, "estimate").CheckAll().ok());
  Status listed = List({{"glm", "hf:/nonexistent/tokenizer.json"}}, "estimate").CheckAll();
  CHECK(listed.code() == StatusCode::kNotFound);
  CHECK_THAT(listed.message(), Catch::StartsWith("tokenizers.glm: cannot open"));
  Status by_flag = List({}, "hf:/nonexistent/tokenizer.json").CheckAll();
  CHECK_THAT(by_flag.message(), Catch::StartsWith("tokenizer (--tokenizer): cannot open"));
  Status spec = List({}, "estimate:banana").CheckAll();
  CHECK(spec.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(spec.message(), Catch::StartsWith("tokenizer (--tokenizer): "));
  Status device = List({{"zero", "hf:/dev/zero"}}, "zero").CheckAll();
  CHECK_THAT(device.message(), Catch::Contains("tokenizers.zero: \"/dev/zero\" is a character "
                                               "device, not a regular file"));
}

}  // namespace
}  // namespace strata::sidecar
