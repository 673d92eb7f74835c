// Block hash chains and an LRU block store: the prefix-cache rule of vLLM / SGLang.
#include "strata/prefix_cache.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace strata {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ULL;
constexpr uint64_t kFnvPrime = 1099511628211ULL;

uint64_t Fnv(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

// Final avalanche (splitmix64) so that chained FNV values spread over the whole 64 bits.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SaltSeed(std::string_view salt) {
  static const char kDomain[] = "strata-block-chain-v1";
  uint64_t h = Fnv(kFnvOffset, kDomain, sizeof(kDomain) - 1);
  uint64_t n = salt.size();
  h = Fnv(h, &n, sizeof(n));
  return Mix(Fnv(h, salt.data(), salt.size()));
}

}  // namespace

PromptBlocks HashPrompt(std::string_view text, std::string_view salt, const Tokenizer* tokenizer,
                        const PrefixCacheOptions& options) {
  PromptBlocks blocks;
  blocks.salt = std::string(salt);
  const size_t block_tokens = std::max<size_t>(1, options.block_tokens);
  blocks.block_tokens = block_tokens;
  uint64_t h = SaltSeed(salt);
  std::vector<int32_t> ids;
  bool exact = tokenizer != nullptr && !tokenizer->IsEstimate();
  if (exact) {
    ids = tokenizer->Encode(text);
    if (ids.empty() && !text.empty()) exact = false;
  }
  if (exact) return HashPromptIds(ids, salt, options);
  {
    const size_t bpt = std::max<size_t>(1, options.bytes_per_token);
    const size_t block_bytes = block_tokens * bpt;
    blocks.prompt_tokens = static_cast<int64_t>((text.size() + bpt - 1) / bpt);
    for (size_t start = 0; start + block_bytes <= text.size(); start += block_bytes) {
      h = Mix(Fnv(h, text.data() + start, block_bytes));
      blocks.hashes.push_back(h);
    }
  }
  size_t limit = blocks.prompt_tokens > 0
                     ? static_cast<size_t>(blocks.prompt_tokens - 1) / block_tokens
                     : 0;
  blocks.cacheable_blocks = std::min(limit, blocks.hashes.size());
  return blocks;
}

PromptBlocks HashPromptIds(const std::vector<int32_t>& ids, std::string_view salt,
                           const PrefixCacheOptions& options) {
  PromptBlocks blocks;
  blocks.salt = std::string(salt);
  const size_t block_tokens = std::max<size_t>(1, options.block_tokens);
  blocks.block_tokens = block_tokens;
  uint64_t h = SaltSeed(salt);
  blocks.prompt_tokens = static_cast<int64_t>(ids.size());
  blocks.hashes.reserve(ids.size() / block_tokens);
  for (size_t start = 0; start + block_tokens <= ids.size(); start += block_tokens) {
    h = Mix(Fnv(h, ids.data() + start, block_tokens * sizeof(int32_t)));
    blocks.hashes.push_back(h);
  }
  size_t limit = blocks.prompt_tokens > 0
                     ? static_cast<size_t>(blocks.prompt_tokens - 1) / block_tokens
                     : 0;
  blocks.cacheable_blocks = std::min(limit, blocks.hashes.size());
  return blocks;
}

class PrefixCacheModel::Impl {
 public:
  explicit Impl(PrefixCacheOptions options) : options_(options) {
    if (options_.block_tokens == 0) options_.block_tokens = 16;
    if (options_.bytes_per_token == 0) options_.bytes_per_token = 4;
  }

  int64_t Lookup(const PromptBlocks& blocks) const {
    std::lock_guard<std::mutex> lock(mu_);
    return LookupLocked(blocks);
  }

  void Insert(const PromptBlocks& blocks) {
    std::lock_guard<std::mutex> lock(mu_);
    InsertLocked(blocks);
  }

  int64_t LookupAndInsert(const PromptBlocks& blocks) {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t cached = LookupLocked(blocks);
    InsertLocked(blocks);
    return cached;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return index_.size();
  }

  size_t for_salt(std::string_view salt) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = salt_blocks_.find(std::string(salt));
    return it == salt_blocks_.end() ? 0 : it->second;
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    lru_.clear();
    index_.clear();
    salt_blocks_.clear();
  }

  PrefixCacheOptions options_;

 private:
  struct Node {
    uint64_t hash;
    std::string salt;
  };

  int64_t LookupLocked(const PromptBlocks& blocks) const {
    size_t hits = 0;
    while (hits < blocks.cacheable_blocks && index_.count(blocks.hashes[hits]) > 0) ++hits;
    return static_cast<int64_t>(hits * blocks.block_tokens);
  }

  void InsertLocked(const PromptBlocks& blocks) {
    for (uint64_t hash : blocks.hashes) {
      auto it = index_.find(hash);
      if (it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        continue;
      }
      lru_.push_front(Node{hash, blocks.salt});
      index_[hash] = lru_.begin();
      ++salt_blocks_[blocks.salt];
    }
    while (index_.size() > options_.capacity_blocks && !lru_.empty()) {
      const Node& victim = lru_.back();
      auto count = salt_blocks_.find(victim.salt);
      if (count != salt_blocks_.end() && --count->second == 0) salt_blocks_.erase(count);
      index_.erase(victim.hash);
      lru_.pop_back();
    }
  }

  mutable std::mutex mu_;
  std::list<Node> lru_;                                           // guarded by mu_; front = newest
  std::unordered_map<uint64_t, std::list<Node>::iterator> index_;  // guarded by mu_
  std::unordered_map<std::string, size_t> salt_blocks_;           // guarded by mu_
};

PrefixCacheModel::PrefixCacheModel(PrefixCacheOptions options)
    : impl_(std::make_unique<Impl>(options)) {}
PrefixCacheModel::~PrefixCacheModel() = default;
const PrefixCacheOptions& PrefixCacheModel::options() const { return impl_->options_; }
int64_t PrefixCacheModel::Lookup(const PromptBlocks& blocks) const { return impl_->Lookup(blocks); }
void PrefixCacheModel::Insert(const PromptBlocks& blocks) { impl_->Insert(blocks); }
int64_t PrefixCacheModel::LookupAndInsert(const PromptBlocks& blocks) {
  return impl_->LookupAndInsert(blocks);
}
size_t PrefixCacheModel::size_blocks() const { return impl_->size(); }
size_t PrefixCacheModel::blocks_for_salt(std::string_view salt) const {
  return impl_->for_salt(salt);
}
void PrefixCacheModel::Clear() { impl_->Clear(); }

}  // namespace strata
