// Messages for gRPC's own empty errors (grpc_errors.h).
#include "grpc_errors.h"

#include <string>

namespace strata::sidecar {
namespace {

class ExplainUnparsed final : public grpc::experimental::Interceptor {
 public:
  explicit ExplainUnparsed(grpc::experimental::ServerRpcInfo* info)
      : method_(info->method() != nullptr ? info->method() : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      // The service never answers INTERNAL without a message: this one is gRPC's own.
      if (status.error_code() == grpc::StatusCode::INTERNAL && status.error_message().empty()) {
        methods->ModifySendStatus(
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, UnparsedRequestMessage(method_)));
      }
    }
    methods->Proceed();
  }

 private:
  std::string method_;
};

class ExplainUnparsedFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new ExplainUnparsed(info);
  }
};

}  // namespace

std::string UnparsedRequestMessage(const std::string& method) {
  return "the request of " + (method.empty() ? std::string("this call") : method) +
         " does not parse as its protobuf message: it is truncated or malformed, or a string "
         "field holds bytes that are not UTF-8 (proto3 strings must be valid UTF-8)";
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ExplainUnparsedRequests() {
  return std::make_unique<ExplainUnparsedFactory>();
}

}  // namespace strata::sidecar
