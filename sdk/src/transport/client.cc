// Client: a context's requests through the one turn (transport/turn.h), the reply appended.
#include "core/thread_annotations.h"
#include "strata/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>

#include "strata/isolation.h"
#include "transport/turn.h"

namespace strata {

using turn_internal::PrefixReference;
using turn_internal::TurnRun;

class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : SystemClock()),
        model_(options_.cache),
        prompt_(options_.chat_template, options_.tokenizer, options_.cache),
        ids_(clock_) {}

  std::string SaltFor(const AgentIdentity& agent) const {
    bool per_agent = std::find(options_.per_agent_salt_agents.begin(), options_.per_agent_salt_agents.end(),
                               agent.id) != options_.per_agent_salt_agents.end();
    return DeriveCacheSalt(options_.deployment_secret, IsolationKeyOf(agent, per_agent));
  }

  StatusOr<BuiltRequest> Preview(const Context& context, const std::string& request_id) const {
    return context.Preview(Options(context, request_id));
  }

  BuildOptions Options(const Context& context, const std::string& request_id) const {
    RequestFields fields;
    fields.stream = options_.stream;
    fields.max_output_tokens = options_.max_output_tokens;
    if (options_.send_cache_salt) fields.cache_salt = SaltFor(context.options().agent);
    fields.request_id = request_id;
    fields.thinking = options_.thinking;
    fields.reasoning_effort = options_.reasoning_effort;
    fields.keep_reasoning = !context.options().render.reasoning_field.empty();
    BuildOptions build;
    build.extra_fields = ProfileFields(options_.backend, fields);
    return build;
  }

  StatusOr<Completion> Complete(Context& context, const CompleteOptions& copt) {
    const AgentIdentity& agent = context.options().agent;
    turn_internal::TurnEnv env;
    env.transport = options_.transport;
    env.clock = clock_;
    env.model = &model_;
    env.prompt = &prompt_;
    env.salt = options_.send_cache_salt ? SaltFor(agent) : std::string();
    env.kv_bytes_per_token = options_.kv_bytes_per_token;
    env.kv_bytes_per_sequence = options_.kv_bytes_per_sequence;
    env.write_failures = &write_failures_;
    TurnRun run(env, context, !copt.request_id.empty() ? copt.request_id : ids_.Next(agent.id));
    run.record().pool = options_.pool;
    auto fail = [&](Status status) -> Status {
      run.Fail(status);
      run.Emit(options_.record_sink);
      return status;
    };
    // Build() (unlike Preview()) may compact the history first (budget and policy permitting).
    PrefixReference reference = ReferenceOf(agent.id);
    if (Status built = run.Build(context, Options(context, run.record().request_id), reference);
        !built.ok()) {
      return fail(built);
    }
    Completion done;
    CallOptions call;
    call.deadline = options_.deadline;
    call.cancel = copt.cancel;
    call.headers = copt.headers;
    if (Status sent = run.Send(run.CallFor(std::move(call)), &done.response); !sent.ok()) {
      return fail(sent);
    }
    const Response& resp = done.response;
    run.Finish(resp, &reference);
    if (copt.append_reply) {
      AssistantMessage message;
      message.content = resp.content;
      message.reasoning = resp.reasoning;
      message.tool_calls = resp.tool_calls;
      StatusOr<std::string> appended = context.AppendAssistant(std::move(message));
      if (!appended.ok()) {
        return fail(Status(appended.status().code(),
                           "the server's reply could not be appended: " + appended.status().message()));
      }
      done.assistant_segment_id = *appended;
    }
    Remember(agent.id, std::move(reference));
    run.Emit(options_.record_sink, options_.on_prefix_break);
    done.body = std::move(run.mutable_built().body);  // sent: the run needs it no more
    done.render_serial = run.built().render_serial;
    done.prefix_break = run.prefix_break();
    done.record = run.record();
    done.warnings = run.warnings();
    return done;
  }

  ClientOptions options_;
  Clock* clock_;  // options_.clock or SystemClock()
  PrefixCacheModel model_;
  std::atomic<int64_t> write_failures_{0};

 private:
  PrefixReference ReferenceOf(const std::string& agent_id) {
    internal::MutexLock lock(mu_);
    auto it = agents_.find(agent_id);
    return it == agents_.end() ? PrefixReference() : it->second;
  }

  // What the next request of this agent is compared with.
  void Remember(const std::string& agent_id, PrefixReference reference) {
    internal::MutexLock lock(mu_);
    agents_[agent_id] = std::move(reference);
  }

  turn_internal::TemplatePromptModel prompt_;
  turn_internal::RequestIds ids_;
  internal::Mutex mu_;
  std::map<std::string, PrefixReference> agents_ STRATA_GUARDED_BY(mu_);
};

StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.transport == nullptr) return InvalidArgumentError("ClientOptions.transport is required");
  if (options.cache.block_tokens == 0) return InvalidArgumentError("ClientOptions.cache.block_tokens must be > 0");
  if (options.cache.bytes_per_token == 0) {
    return InvalidArgumentError("ClientOptions.cache.bytes_per_token must be > 0");
  }
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(std::move(options))));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

StatusOr<Completion> Client::Complete(Context& context, const CompleteOptions& options) {
  return impl_->Complete(context, options);
}

StatusOr<BuiltRequest> Client::PreviewRequest(const Context& context,
                                              const std::string& request_id) const {
  return impl_->Preview(context, request_id);
}

std::string Client::CacheSaltFor(const AgentIdentity& agent) const { return impl_->SaltFor(agent); }

PrefixCacheModel& Client::cache_model() { return impl_->model_; }

int64_t Client::record_write_failures() const { return impl_->write_failures_.load(); }

}  // namespace strata
