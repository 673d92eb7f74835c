// Helpers shared by the sources of the strata._strata extension: Status -> exception conversion,
// the state of a blocking call made with the GIL released (Python exceptions raised by callbacks,
// Ctrl-C), and the JSON of the result types. Everything here requires the GIL unless it says
// otherwise.
#ifndef STRATA_PYTHON_COMMON_H_
#define STRATA_PYTHON_COMMON_H_

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/agent.h"
#include "strata/builtin_policies.h"
#include "strata/client.h"
#include "strata/compaction_policy.h"
#include "strata/status.h"
#include "strata/tokenizer.h"
#include "strata/transport.h"

namespace strata_py {

namespace py = pybind11;
using json = nlohmann::json;

// Raises the strata.Error subclass of `status`. Requires the GIL.
[[noreturn]] inline void Raise(const strata::Status& status) {
  py::object errors = py::module_::import("strata._errors");
  py::object exc = errors.attr("from_status")(static_cast<int>(status.code()), status.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

inline void Check(const strata::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Take(strata::StatusOr<T>&& value) {
  if (!value.ok()) Raise(value.status());
  return std::move(*value);
}

// A Python object kept by C++ (a tool handler): released with the GIL held, whatever thread drops
// the last reference.
inline std::shared_ptr<py::object> Hold(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* p) {
    if (!Py_IsInitialized()) return;  // interpreter gone: nothing left to release into
    py::gil_scoped_acquire gil;
    delete p;
  });
}

// The state of one blocking call made with the GIL released. Python code run during the call
// (tool handlers, the delta callback) may raise an exception that must stop the whole call
// (KeyboardInterrupt, or any exception from the delta callback): it is kept here, the call is
// cancelled through `token`, and the exception is re-raised once the call returns.
struct CallState {
  strata::CancellationToken own_token;
  strata::CancellationToken* token = &own_token;
  std::optional<py::error_already_set> pending;  // touched only with the GIL held

  // Requires the GIL. Keeps the current Python exception and cancels the call.
  void Abort() {
    if (!pending) pending.emplace();
    else PyErr_Clear();
    token->Cancel();
  }
  // Requires the GIL. Re-raises a kept exception.
  void RethrowPending() {
    if (pending) {
      py::error_already_set e = std::move(*pending);
      pending.reset();
      throw e;
    }
  }
};
inline thread_local CallState* current_call = nullptr;

// Sets current_call for the duration of a call on this thread.
class CallScope {
 public:
  explicit CallScope(CallState* state) : previous_(current_call) { current_call = state; }
  ~CallScope() { current_call = previous_; }

 private:
  CallState* previous_;
};

// Requires the GIL. Ctrl-C during a blocking call: Python's handler only sets a flag, which is
// checked here each time the call comes back into Python (a delta, a tool call).
inline void CheckSignals(CallState* state) {
  if (state != nullptr && PyErr_CheckSignals() != 0) state->Abort();
}

inline strata::ToolHandler MakeToolHandler(py::object fn) {
  std::shared_ptr<py::object> handler = Hold(std::move(fn));
  return [handler](const std::string& arguments) -> strata::ToolOutput {
    py::gil_scoped_acquire gil;
    CallState* state = current_call;
    CheckSignals(state);
    if (state != nullptr && state->pending) {
      throw std::runtime_error("interrupted");  // the call is cancelled; this result is never sent
    }
    try {
      py::tuple result = (*handler)(arguments);
      return strata::ToolOutput{result[0].cast<std::string>(), result[1].cast<bool>()};
    } catch (py::error_already_set& e) {
      // An ordinary exception is the tool's error result; KeyboardInterrupt, SystemExit and
      // GeneratorExit stop the run.
      if (!e.matches(PyExc_Exception) && state != nullptr) {
        e.restore();
        state->Abort();
        throw std::runtime_error("interrupted");
      }
      std::string type = py::str(e.type().attr("__name__"));
      std::string message = py::str(e.value());
      throw std::runtime_error(type + ": " + message);
    }
  };
}

inline strata::DeltaCallback MakeDeltaCallback(py::object fn) {
  std::shared_ptr<py::object> callback = fn.is_none() ? nullptr : Hold(std::move(fn));
  return [callback](const strata::StreamDelta& delta) {
    py::gil_scoped_acquire gil;
    CallState* state = current_call;
    CheckSignals(state);
    if (state != nullptr && state->pending) return;
    if (!callback) return;
    static const char* const kKinds[] = {"content", "reasoning", "tool_call_arguments"};
    try {
      (*callback)(kKinds[static_cast<int>(delta.kind)], py::bytes(delta.text), delta.tool_call_index,
                  delta.tool_call_id, delta.tool_name);
    } catch (py::error_already_set& e) {
      e.restore();
      if (state != nullptr) state->Abort();
      else PyErr_Clear();
    }
  };
}

// ---- JSON of the result types --------------------------------------------------------------

inline json ToolCallsJson(const std::vector<strata::ToolCall>& calls) {
  json out = json::array();
  for (const strata::ToolCall& c : calls) {
    out.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

inline json ResponseJson(const strata::Response& r) {
  json usage = {{"reported", r.usage.reported},
                {"prompt_tokens", r.usage.prompt_tokens},
                {"completion_tokens", r.usage.completion_tokens},
                {"total_tokens", r.usage.total_tokens},
                {"cached_tokens", r.usage.cached_tokens ? json(*r.usage.cached_tokens) : json()},
                {"reasoning_tokens", r.usage.reasoning_tokens}};
  json timings = {{"ttft_ms", r.timings.ttft_ms},
                  {"decode_ms", r.timings.decode_ms},
                  {"total_ms", r.timings.total_ms},
                  {"retry_wait_ms", r.timings.retry_wait_ms}};
  return {{"id", r.id},
          {"model", r.model},
          {"content", r.content},
          {"reasoning", r.reasoning},
          {"tool_calls", ToolCallsJson(r.tool_calls)},
          {"finish_reason", r.finish_reason},
          {"usage", usage},
          {"timings", timings},
          {"streamed", r.streamed},
          {"attempts", r.attempts},
          {"http_status", r.http_status}};
}

// The report's JSON (CompactionReportJson) plus "explanation": ExplainCompaction's text (what
// `strata replay --explain` prints; "" when the policy gave none).
inline json ReportJson(const strata::CompactionReport& report) {
  json out = json::parse(strata::CompactionReportJson(report));
  out["explanation"] = strata::ExplainCompaction(report);
  return out;
}

// A sub-object of AgentConfig parsed with AgentConfigFromJson, so that its errors name the key
// path exactly like the C++ configuration's ("budget.window: expected an integer").
inline strata::StatusOr<strata::AgentConfig> ConfigWith(const char* key, const std::string& value_json) {
  json doc = json::parse(value_json, nullptr, false);
  if (doc.is_discarded()) {
    return strata::InvalidArgumentError(std::string(key) + ": not valid JSON");
  }
  return strata::AgentConfigFromJson(json{{key, doc}}.dump());
}

// A request body held by C++ and read by Python through the buffer protocol, without a copy
// (`str(memoryview(body), "utf-8")` decodes it; strata.Turn.body and strata.Completion.body do on
// first access): at 1M tokens a body is 4 MB. Registered as strata._strata.Body.
struct PyBody {
  std::string data;
};

// Requires the GIL. `body` as a strata._strata.Body (moved, not copied).
inline py::object BodyObject(std::string body) {
  return py::cast(new PyBody{std::move(body)}, py::return_value_policy::take_ownership);
}

// Runs `f` with the GIL released; the result (a Status or StatusOr) is checked after.
template <typename F>
auto Unlocked(F&& f) {
  py::gil_scoped_release release;
  return f();
}

// Ctrl-C during a blocking call that waits with the GIL released (a non-streaming request waits
// for the whole answer with no callback into Python): Python's C-level SIGINT handler only sets a
// flag, which nothing would look at until the call returns. While a SignalWatch lives on the main
// thread, Python's signal wakeup fd (signal.set_wakeup_fd) is a pipe read by a watcher thread,
// which cancels `token` when SIGINT's byte arrives (so the transport stops the request within
// ~50 ms); the bytes are forwarded to the wakeup fd that was set before (asyncio's), which is
// restored afterwards. Other signals are left alone: their Python handlers run once the call
// returns. On other threads (whose calls Python's signal handlers never interrupt) it does nothing.
class SignalWatch {
 public:
  // Requires the GIL. `token` must outlive the watch.
  explicit SignalWatch(strata::CancellationToken* token);
  // Requires the GIL. Restores the previous wakeup fd.
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

 private:
  strata::CancellationToken* token_;
  bool active_ = false;
  int previous_fd_ = -1;  // the wakeup fd before this watch, -1 for none
};

// Runs `call` (which must not touch Python objects) with the GIL released, as one blocking call:
// Python callbacks made meanwhile see `state` (CallScope), Ctrl-C cancels it (SignalWatch and, once
// the call returned, PyErr_CheckSignals), and a Python exception kept by a callback or the signal
// handler is raised instead of the call's result. Returns what `call` returned.
template <typename F>
auto BlockingCall(CallState& state, F&& call) {
  std::optional<decltype(call())> out;
  {
    CallScope scope(&state);
    SignalWatch watch(state.token);
    {
      py::gil_scoped_release release;
      out.emplace(call());
    }
    // The watcher may have cancelled the call: the SIGINT handler raises KeyboardInterrupt now.
    CheckSignals(&state);
  }
  state.RethrowPending();
  return std::move(*out);
}

// trim_messages (trim.cc): `messages_json` trimmed into the budget configuration `budget_json`
// with the policy named `policy`, counted with `tokenizer` and the chat template named
// `chat_template` ("" for none). Returns {"kept": [...], "input_tokens", "report"}: each kept entry
// is {"i": index of the input message} (plus "content" when compaction masked it, "drop": the keys
// it removed) or {"message": a message strata wrote (a summary)}. Does not need the GIL.
strata::StatusOr<std::string> TrimMessagesJson(const std::string& messages_json,
                                               const std::string& budget_json,
                                               const std::string& policy,
                                               const strata::Tokenizer& tokenizer,
                                               const std::string& chat_template, bool hygiene);

// Defines Context, Transport and Client on the module (lowlevel.cc).
void DefineLowLevel(py::module_& m);

}  // namespace strata_py

#endif  // STRATA_PYTHON_COMMON_H_
