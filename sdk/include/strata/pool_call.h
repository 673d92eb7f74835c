// strata/pool_call.h — what a call tells a PoolSet (strata/pools.h): the request's stable-prefix
// hash and the handler that shrinks the request when its pool is full.
//
// A PoolSet is a Transport that schedules requests by length: it routes by the kPrefixHashHeader
// call header, and its degradation ladder asks the CallOptions::degradation handler (a
// DegradationHandler) to compact or fork a request. These live in the transport's layer, beside
// CallOptions, rather than in strata/pools.h: the conversation's owner (the Agent) sets the header
// and implements the handler without linking the pools, which bring the gRPC transport.
//
//   class MyHandler : public strata::DegradationHandler { ... };   // Compact, Fork, OnDecision
//   MyHandler handler;
//   strata::CallOptions call;                                       // strata/transport.h
//   call.degradation = &handler;
//   call.headers.push_back({strata::kPrefixHashHeader, request.stable_prefix_hash});
//
// Thread safety: a PoolSet calls a handler from the thread that called Send(), so one handler
// given to concurrent calls must be thread-safe.
#ifndef STRATA_POOL_CALL_H_
#define STRATA_POOL_CALL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/record.h"
#include "strata/status.h"

namespace strata {

// Call header carrying the stable-prefix hash (strata/context.h BuiltRequest::stable_prefix_hash)
// to the PoolSet; removed before the request is forwarded.
inline constexpr char kPrefixHashHeader[] = "x-strata-prefix-hash";

// A smaller request produced by a DegradationHandler.
struct DegradedRequest {
  std::string body;          // the Chat Completions body to send instead
  int64_t input_tokens = 0;  // its exact input tokens
};

// Implemented by the owner of the conversation (the Agent): it alone can compact its history or
// fork its task. Both return a request of at most `target_tokens` input tokens, or an error (the
// step is then skipped and the error recorded).
class DegradationHandler {
 public:
  virtual ~DegradationHandler() = default;
  // Compacts the conversation of `body` (`input_tokens` tokens) to at most `target_tokens` so that
  // it fits pool `target_pool`.
  virtual StatusOr<DegradedRequest> Compact(std::string_view body, int64_t input_tokens,
                                            int64_t target_tokens,
                                            const std::string& target_pool) = 0;
  // Forks the task: a new request carrying what the fork needs, within `target_tokens`.
  virtual StatusOr<DegradedRequest> Fork(std::string_view body, int64_t input_tokens,
                                         int64_t target_tokens, const std::string& target_pool) = 0;
  // Called once per Send() of a handler given in CallOptions::degradation, before Send() returns
  // (also on refusal): `decision` holds the pool, endpoint (replica), queue_wait_ms, input_tokens,
  // degradation and degradation_notes. Default: nothing.
  virtual void OnDecision(const RequestRecord& decision) { (void)decision; }
};

}  // namespace strata

#endif  // STRATA_POOL_CALL_H_
