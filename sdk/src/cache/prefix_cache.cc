// Block hash chains and an LRU block store: the prefix-cache rule of vLLM / SGLang.
#include "strata/prefix_cache.h"

#include <algorithm>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/thread_annotations.h"

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

// Recent block hash chains of token ids. An agent's successive prompts repeat the previous one and
// add to its end, so hashing every block of every prompt would make a run quadratic in its turns:
// HashPromptIds continues the kept chain (same salt and block size) whose ids share the longest
// prefix with the new ids, and hashes only the blocks after that prefix. The result is the same
// (each hash covers the blocks before it). Bounded: kMaxChains chains, kMaxIdBytes of ids.
struct IdChain {
  std::string salt;
  size_t block_tokens = 0;
  std::vector<int32_t> ids;
  std::vector<uint64_t> hashes;
};

class IdChains {
 public:
  static IdChains& Get() {
    static IdChains* chains = new IdChains();  // never destroyed: used until exit
    return *chains;
  }

  // The kept chain for (salt, block_tokens) whose ids share the longest prefix with `ids`, and the
  // length of that prefix in ids (comparisons outside the lock).
  std::shared_ptr<const IdChain> Closest(const std::vector<int32_t>& ids, std::string_view salt,
                                         size_t block_tokens, size_t* prefix) {
    std::vector<std::shared_ptr<const IdChain>> kept;
    {
      internal::MutexLock lock(mu_);
      kept.assign(kept_.begin(), kept_.end());
    }
    std::shared_ptr<const IdChain> best;
    *prefix = 0;
    for (auto& chain : kept) {
      if (chain->salt != salt || chain->block_tokens != block_tokens) continue;
      const size_t shared = SharedIds(chain->ids, ids);
      if (best == nullptr || shared > *prefix) {
        best = std::move(chain);
        *prefix = shared;
      }
    }
    return best;
  }

  // Keeps `chain` as the most recent, in place of `replaced` when given and still kept.
  void Keep(std::shared_ptr<const IdChain> chain, const IdChain* replaced) {
    const size_t bytes = chain->ids.size() * sizeof(int32_t);
    if (bytes > kMaxIdBytes / 4) return;
    internal::MutexLock lock(mu_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->get() != replaced) continue;
      bytes_ -= (*it)->ids.size() * sizeof(int32_t);
      kept_.erase(it);
      break;
    }
    bytes_ += bytes;
    kept_.push_front(std::move(chain));
    while (!kept_.empty() && (kept_.size() > kMaxChains || bytes_ > kMaxIdBytes)) {
      bytes_ -= kept_.back()->ids.size() * sizeof(int32_t);
      kept_.pop_back();
    }
  }

 private:
  static constexpr size_t kMaxChains = 8;
  static constexpr size_t kMaxIdBytes = 256u << 20;

  static size_t SharedIds(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    constexpr size_t kChunk = 1024;
    while (i + kChunk <= n && std::memcmp(a.data() + i, b.data() + i, kChunk * sizeof(int32_t)) == 0)
      i += kChunk;
    while (i < n && a[i] == b[i]) ++i;
    return i;
  }

  internal::Mutex mu_;
  std::list<std::shared_ptr<const IdChain>> kept_ STRATA_GUARDED_BY(mu_);  // most recent first
  size_t bytes_ STRATA_GUARDED_BY(mu_) = 0;  // ids bytes kept
};

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
  // The blocks inside the prefix shared with a kept chain are that chain's.
  IdChains& chains = IdChains::Get();
  size_t prefix = 0;
  std::shared_ptr<const IdChain> base = chains.Closest(ids, salt, block_tokens, &prefix);
  if (base != nullptr) {
    const size_t reused = std::min(prefix / block_tokens, base->hashes.size());
    blocks.hashes.assign(base->hashes.begin(), base->hashes.begin() + reused);
    if (reused > 0) h = blocks.hashes.back();
  }
  for (size_t start = blocks.hashes.size() * block_tokens; start + block_tokens <= ids.size();
       start += block_tokens) {
    h = Mix(Fnv(h, ids.data() + start, block_tokens * sizeof(int32_t)));
    blocks.hashes.push_back(h);
  }
  if (base == nullptr || prefix != ids.size() || base->ids.size() != ids.size()) {
    auto chain = std::make_shared<IdChain>();
    chain->salt = std::string(salt);
    chain->block_tokens = block_tokens;
    chain->ids = ids;
    chain->hashes = blocks.hashes;
    // In place of the base when this chain continues it (shares at least half of its ids).
    chains.Keep(std::move(chain),
                base != nullptr && prefix >= base->ids.size() / 2 ? base.get() : nullptr);
  }
  size_t limit = blocks.prompt_tokens > 0
                     ? static_cast<size_t>(blocks.prompt_tokens - 1) / block_tokens
                     : 0;
  blocks.cacheable_blocks = std::min(limit, blocks.hashes.size());
  return blocks;
}

namespace {

// Blocks of `blocks` kept when its first `unchanged` units (ids or bytes) stay, `unit` units a
// block; the chain value to continue from.
uint64_t KeepBlocks(size_t unchanged, size_t unit, PromptBlocks* blocks) {
  blocks->hashes.resize(std::min(blocks->hashes.size(), unchanged / unit));
  return blocks->hashes.empty() ? SaltSeed(blocks->salt) : blocks->hashes.back();
}

void SetCacheable(PromptBlocks* blocks) {
  const size_t limit = blocks->prompt_tokens > 0
                           ? static_cast<size_t>(blocks->prompt_tokens - 1) / blocks->block_tokens
                           : 0;
  blocks->cacheable_blocks = std::min(limit, blocks->hashes.size());
}

}  // namespace

void ContinuePromptIds(const std::vector<int32_t>& ids, size_t unchanged,
                       const PrefixCacheOptions& options, PromptBlocks* blocks) {
  const size_t block_tokens = std::max<size_t>(1, options.block_tokens);
  if (blocks->block_tokens != block_tokens) unchanged = 0;
  blocks->block_tokens = block_tokens;
  uint64_t h = KeepBlocks(unchanged, block_tokens, blocks);
  for (size_t start = blocks->hashes.size() * block_tokens; start + block_tokens <= ids.size();
       start += block_tokens) {
    h = Mix(Fnv(h, ids.data() + start, block_tokens * sizeof(int32_t)));
    blocks->hashes.push_back(h);
  }
  blocks->prompt_tokens = static_cast<int64_t>(ids.size());
  SetCacheable(blocks);
}

void ContinuePromptText(std::string_view text, size_t unchanged, const PrefixCacheOptions& options,
                        PromptBlocks* blocks) {
  const size_t block_tokens = std::max<size_t>(1, options.block_tokens);
  const size_t bpt = std::max<size_t>(1, options.bytes_per_token);
  if (blocks->block_tokens != block_tokens) unchanged = 0;
  blocks->block_tokens = block_tokens;
  const size_t block_bytes = block_tokens * bpt;
  uint64_t h = KeepBlocks(unchanged, block_bytes, blocks);
  for (size_t start = blocks->hashes.size() * block_bytes; start + block_bytes <= text.size();
       start += block_bytes) {
    h = Mix(Fnv(h, text.data() + start, block_bytes));
    blocks->hashes.push_back(h);
  }
  blocks->prompt_tokens = static_cast<int64_t>((text.size() + bpt - 1) / bpt);
  SetCacheable(blocks);
}

size_t SharedChainPrefix(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t low = 0;  // a[i] == b[i] for every i < low
  size_t high = std::min(a.size(), b.size());  // and differ at high, unless it is the end
  while (low < high) {
    const size_t mid = low + (high - low) / 2;
    if (a[mid] == b[mid]) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low;
}

class PrefixCacheModel::Impl {
 public:
  explicit Impl(PrefixCacheOptions options) : options_(options) {
    if (options_.block_tokens == 0) options_.block_tokens = 16;
    if (options_.bytes_per_token == 0) options_.bytes_per_token = 4;
  }

  int64_t Lookup(const PromptBlocks& blocks) const {
    internal::MutexLock lock(mu_);
    return LookupLocked(blocks, SharedWithLast(blocks));
  }

  void Insert(const PromptBlocks& blocks) {
    internal::MutexLock lock(mu_);
    InsertLocked(blocks, SharedWithLast(blocks));
  }

  int64_t LookupAndInsert(const PromptBlocks& blocks) {
    internal::MutexLock lock(mu_);
    const size_t shared = SharedWithLast(blocks);
    int64_t cached = LookupLocked(blocks, shared);
    InsertLocked(blocks, shared);
    return cached;
  }

  size_t size() const {
    internal::MutexLock lock(mu_);
    return index_.size();
  }

  size_t for_salt(std::string_view salt) const {
    internal::MutexLock lock(mu_);
    auto it = salt_blocks_.find(std::string(salt));
    return it == salt_blocks_.end() ? 0 : it->second;
  }

  void Clear() {
    internal::MutexLock lock(mu_);
    lru_.clear();
    index_.clear();
    salt_blocks_.clear();
    last_chain_.clear();
    front_valid_ = false;
  }

  PrefixCacheOptions options_;

 private:
  // A salt and the number of blocks held for it: an entry of salt_blocks_, which every block of
  // that salt points to (entries of an unordered_map stay where they are until erased, and an
  // entry is erased only with its last block).
  using SaltEntry = std::pair<const std::string, size_t>;

  struct Node {
    uint64_t hash;
    SaltEntry* salt;
    size_t index;  // the block's index in the chain that last inserted it
  };

  // The leading blocks `blocks` shares with the chain inserted last, while the first nodes of lru_
  // are exactly that chain's blocks, its last block first, as its insertion left them
  // (front_valid_); 0 otherwise. An agent's successive prompts share most of their blocks, so a
  // lookup and an insert then cost the new blocks: every shared block is known to be held, and
  // moving each shared block to the front in turn leaves them first and the rest of the last
  // chain after them, which one splice does.
  size_t SharedWithLast(const PromptBlocks& blocks) const STRATA_REQUIRES(mu_) {
    return front_valid_ ? SharedChainPrefix(last_chain_, blocks.hashes) : 0;
  }

  int64_t LookupLocked(const PromptBlocks& blocks, size_t shared) const STRATA_REQUIRES(mu_) {
    size_t hits = std::min(shared, blocks.cacheable_blocks);
    while (hits < blocks.cacheable_blocks && index_.count(blocks.hashes[hits]) > 0) ++hits;
    return static_cast<int64_t>(hits * blocks.block_tokens);
  }

  void InsertLocked(const PromptBlocks& blocks, size_t shared) STRATA_REQUIRES(mu_) {
    const size_t m = last_chain_.size();
    if (shared > 0 && shared < m) {
      // [c(m-1) .. c(k), c(k-1) .. c(0), older] -> [c(k-1) .. c(0), c(m-1) .. c(k), older]
      auto last_shared = index_.find(last_chain_[shared - 1]);
      auto first = index_.find(last_chain_[0]);
      if (last_shared == index_.end() || first == index_.end()) {
        shared = 0;  // not reached: front_valid_ means every block of the last chain is held
      } else {
        lru_.splice(std::next(first->second), lru_, lru_.begin(), last_shared->second);
      }
    }
    // The chain's blocks are distinct (so that they are the first nodes of lru_, last first) when
    // no block found here was inserted at another index: a repeated hash within a chain is found
    // at its earlier index (a block hash is a chain hash, so one hash sits at one index).
    bool distinct = true;
    SaltEntry* salt = nullptr;  // found at the first new block: the salt is not copied per block
    for (size_t b = shared; b < blocks.hashes.size(); ++b) {
      const uint64_t hash = blocks.hashes[b];
      auto it = index_.find(hash);
      if (it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        if (it->second->index != b) distinct = false;
        it->second->index = b;
        continue;
      }
      if (salt == nullptr) salt = &*salt_blocks_.try_emplace(blocks.salt, 0).first;
      lru_.push_front(Node{hash, salt, b});
      index_[hash] = lru_.begin();
      ++salt->second;
    }
    while (index_.size() > options_.capacity_blocks && !lru_.empty()) {
      const Node& victim = lru_.back();
      if (--victim.salt->second == 0) salt_blocks_.erase(salt_blocks_.find(victim.salt->first));
      index_.erase(victim.hash);
      lru_.pop_back();
    }
    // The chain's leading `shared` hashes are the last chain's already: only the rest is copied.
    last_chain_.resize(std::min(shared, last_chain_.size()));
    last_chain_.insert(last_chain_.end(), blocks.hashes.begin() + last_chain_.size(),
                       blocks.hashes.end());
    // Eviction takes the oldest blocks: a chain no longer than the capacity keeps all of its own.
    front_valid_ = distinct && blocks.hashes.size() <= options_.capacity_blocks;
  }

  mutable internal::Mutex mu_;
  std::list<Node> lru_ STRATA_GUARDED_BY(mu_);  // front = newest
  // Block hash -> its node. An open-addressing table: a long agent's turn inserts and looks up
  // its new blocks among millions held, and node-based maps spent a cache miss per bucket step.
  absl::flat_hash_map<uint64_t, std::list<Node>::iterator> index_ STRATA_GUARDED_BY(mu_);
  std::unordered_map<std::string, size_t> salt_blocks_ STRATA_GUARDED_BY(mu_);
  std::vector<uint64_t> last_chain_ STRATA_GUARDED_BY(mu_);  // the hashes of the chain inserted last
  bool front_valid_ STRATA_GUARDED_BY(mu_) = false;  // see SharedWithLast
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
