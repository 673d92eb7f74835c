// SentencePiece backend. This is the only strata file that includes sentencepiece_processor.h, for
// two reasons:
//  - the 0.1.97 header declares `namespace absl { using std::string_view; }`, which breaks any
//    translation unit that also sees real absl (gRPC): no gRPC/absl includes here, and no
//    sentencepiece types outside this file (pimpl);
//  - Debian's libsentencepiece.so.0 exports its own bundled copy of protobuf-lite (1,600
//    google::protobuf symbols of another protobuf version). Linked into a process that also loads
//    libprotobuf.so (gRPC: the CLI, strata-sim), the two copies interpose each other and the
//    process crashes in protobuf's static initializers before main(). So strata does not link
//    libsentencepiece: it loads it on first use with dlopen(RTLD_LOCAL | RTLD_DEEPBIND), which
//    keeps its symbols out of the global scope and binds its protobuf references to its own copy.
//    Everything called on the processor is virtual (through its vtable); the constructor, the
//    Status destructor and Status::error_message are looked up with dlsym.
#include <dlfcn.h>
#include <sentencepiece_processor.h>

#include <mutex>
#include <new>

#include "core/text_util.h"
#include "tokenize/exact_tokenizer.h"

// AddressSanitizer and ThreadSanitizer builds, whose runtimes refuse dlopen(RTLD_DEEPBIND) (the
// TSan runtime ends the process in dlopen): GCC defines __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__, clang reports the features instead.
#if defined(__SANITIZE_ADDRESS__)
#define STRATA_SPM_NO_DEEPBIND "AddressSanitizer"
#elif defined(__SANITIZE_THREAD__)
#define STRATA_SPM_NO_DEEPBIND "ThreadSanitizer"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_SPM_NO_DEEPBIND "AddressSanitizer"
#elif __has_feature(thread_sanitizer)
#define STRATA_SPM_NO_DEEPBIND "ThreadSanitizer"
#endif
#endif

namespace strata::tokenize_internal {
namespace {

using sentencepiece::SentencePieceProcessor;

struct SpmLibrary {
  void* handle = nullptr;
  void (*construct)(void* self) = nullptr;       // SentencePieceProcessor::SentencePieceProcessor()
  void (*destroy_status)(void* self) = nullptr;  // util::Status::~Status()
  const char* (*status_message)(const void* self) = nullptr;  // util::Status::error_message()
  std::string error;
};

#if defined(STRATA_SPM_NO_DEEPBIND)
// Why a sanitizer build refuses to load libsentencepiece into a process with libprotobuf.
constexpr char kSpmNeedsDeepbind[] =
    "this " STRATA_SPM_NO_DEEPBIND " build cannot load libsentencepiece into a process that also "
    "links libprotobuf (gRPC): the sanitizer runtime refuses dlopen(RTLD_DEEPBIND), which isolates "
    "sentencepiece's own protobuf copy; use a build without the sanitizer, or an hf: tokenizer";
#endif

int DlopenFlags() {
  int flags = RTLD_NOW | RTLD_LOCAL;
#if !defined(STRATA_SPM_NO_DEEPBIND)
  flags |= RTLD_DEEPBIND;  // sanitizer runtimes refuse RTLD_DEEPBIND
#endif
  return flags;
}

const SpmLibrary& Library() {
  static const SpmLibrary* library = [] {
    auto* lib = new SpmLibrary();
#if defined(STRATA_SPM_NO_DEEPBIND)
    // Without RTLD_DEEPBIND, libsentencepiece's protobuf copy binds to a libprotobuf the process
    // already has (gRPC), and its static initializers throw on the version mismatch inside dlopen.
    if (dlsym(RTLD_DEFAULT, "_ZN6google8protobuf8internal13VerifyVersionEiiPKc") != nullptr) {
      lib->error = std::string(kSpmNeedsDeepbind);
      return lib;
    }
#endif
    std::string tried;
    const std::string candidates[] = {
        "libsentencepiece.so.0",
#ifdef STRATA_SENTENCEPIECE_LIBDIR
        std::string(STRATA_SENTENCEPIECE_LIBDIR) + "/libsentencepiece.so.0",
#endif
        "libsentencepiece.so",
    };
    for (const std::string& name : candidates) {
      lib->handle = dlopen(name.c_str(), DlopenFlags());
      if (lib->handle != nullptr) break;
      const char* err = dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (err != nullptr ? err : name);
    }
    if (lib->handle == nullptr) {
      lib->error = "cannot load libsentencepiece (apt-get install libsentencepiece0): " + tried;
      return lib;
    }
    lib->construct = reinterpret_cast<void (*)(void*)>(
        dlsym(lib->handle, "_ZN13sentencepiece22SentencePieceProcessorC1Ev"));
    lib->destroy_status =
        reinterpret_cast<void (*)(void*)>(dlsym(lib->handle, "_ZN13sentencepiece4util6StatusD1Ev"));
    lib->status_message = reinterpret_cast<const char* (*)(const void*)>(
        dlsym(lib->handle, "_ZNK13sentencepiece4util6Status13error_messageEv"));
    if (lib->construct == nullptr || lib->destroy_status == nullptr ||
        lib->status_message == nullptr)
      lib->error =
          "libsentencepiece lacks the expected 0.1.9x symbols (SentencePieceProcessor constructor, "
          "util::Status); strata was built against the 0.1.97 header";
    return lib;
  }();
  return *library;
}

// A util::Status returned by value, constructed in place and destroyed through the library.
class SpmStatus {
 public:
  template <typename F>
  explicit SpmStatus(F&& call) {
    ::new (&storage_.status) sentencepiece::util::Status(call());
  }
  ~SpmStatus() { Library().destroy_status(&storage_.status); }
  SpmStatus(const SpmStatus&) = delete;
  SpmStatus& operator=(const SpmStatus&) = delete;
  bool ok() const { return storage_.status.ok(); }
  std::string message() const {
    const char* m = Library().status_message(&storage_.status);
    return m != nullptr ? m : "";
  }

 private:
  union Storage {
    Storage() {}
    ~Storage() {}
    sentencepiece::util::Status status;
  } storage_;
};

class SentencePieceTokenizer final : public ExactTokenizer {
 public:
  SentencePieceTokenizer(std::unique_ptr<SentencePieceProcessor> processor, std::string name)
      : processor_(std::move(processor)), name_(std::move(name)) {}

  std::string Name() const override { return "spm:" + name_; }

  // SentencePieceProcessor's const methods are thread-safe once a model is loaded.
  // (The inline helpers EncodeAsIds/DecodeIds are not used: they destroy a util::Status in this
  // TU.)
  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int> ids = EncodeInts(text);
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  size_t Count(std::string_view text) const override { return EncodeInts(text).size(); }

  StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override {
    int size = processor_->GetPieceSize();
    for (int32_t id : ids)
      if (id < 0 || id >= size)
        return OutOfRangeError("token id " + std::to_string(id) + " is not in the vocabulary of " +
                               Name() + " (ids 0.." + std::to_string(size - 1) + ")");
    std::string text;
    const std::vector<int> ints(ids.begin(), ids.end());
    SpmStatus status([&] { return processor_->Decode(ints, &text); });
    if (!status.ok()) return InternalError("sentencepiece decode failed: " + status.message());
    return text;
  }

  StatusOr<int32_t> TokenId(std::string_view token) const override {
    int id = processor_->PieceToId(token);
    if (id == processor_->unk_id() && token != processor_->IdToPiece(id))
      return NotFoundError("no piece \"" + std::string(token) + "\" in " + Name());
    return id;
  }

 private:
  std::vector<int> EncodeInts(std::string_view text) const {
    std::vector<int> ids;
    // Fails only without a loaded model, which the constructor rules out.
    SpmStatus status([&] { return processor_->Encode(text, &ids); });
    return ids;
  }

  std::unique_ptr<SentencePieceProcessor> processor_;
  std::string name_;
};

}  // namespace

StatusOr<std::unique_ptr<ExactTokenizer>> MakeSentencePiece(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  const SpmLibrary& lib = Library();
  if (!lib.error.empty()) return UnavailableError("spm:" + path + ": " + lib.error);
  void* memory = ::operator new(sizeof(SentencePieceProcessor));
  lib.construct(memory);
  // The virtual destructor (the library's deleting destructor) frees `memory` with operator delete.
  std::unique_ptr<SentencePieceProcessor> processor(static_cast<SentencePieceProcessor*>(memory));
  SpmStatus status([&] { return processor->LoadFromSerializedProto(bytes); });
  if (!status.ok())
    return DataLossError("\"" + path + "\" is not a SentencePiece model: " + status.message() +
                         " (for Hugging Face tokenizer.json files use --tokenizer hf:PATH)");
  return std::unique_ptr<ExactTokenizer>(
      std::make_unique<SentencePieceTokenizer>(std::move(processor), internal::Sha256Hex(bytes)));
}

}  // namespace strata::tokenize_internal
