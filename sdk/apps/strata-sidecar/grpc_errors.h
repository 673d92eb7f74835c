// grpc_errors.h — messages for the gRPC errors that gRPC itself answers with an empty one.
//
// A request that does not parse as its method's message (a truncated or malformed protobuf, or a
// proto3 string field holding invalid UTF-8) never reaches the service: gRPC answers INTERNAL
// with an empty message. The interceptor made here turns that answer into INVALID_ARGUMENT
// saying what was wrong and naming the method.
//
// Thread safety: the factory and its interceptors are used by gRPC from any thread.
#ifndef STRATA_APPS_STRATA_SIDECAR_GRPC_ERRORS_H_
#define STRATA_APPS_STRATA_SIDECAR_GRPC_ERRORS_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace strata::sidecar {

// The message gRPC's empty INTERNAL answer to a request of `method` that did not parse gets.
std::string UnparsedRequestMessage(const std::string& method);

// For grpc::ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ExplainUnparsedRequests();

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_GRPC_ERRORS_H_
