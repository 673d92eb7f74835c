// Clang thread-safety annotations (after abseil's thread_annotations.h), and a mutex clang can
// check them against. A field written `T field_ STRATA_GUARDED_BY(mu_);` may be read or written
// only while `mu_` is held; clang's -Wthread-safety reports an access that does not hold it (the
// ctest test "style: clang's -Wthread-safety finds no unguarded access" compiles the annotated
// files with it). Other compilers ignore the annotations.
//
//   internal::Mutex mu_;
//   int count_ STRATA_GUARDED_BY(mu_) = 0;
//   void Add() { internal::MutexLock lock(mu_); ++count_; }
//   void AddLocked() STRATA_REQUIRES(mu_) { ++count_; }
//
// std::mutex is not annotated in libstdc++, so a guarded field's mutex is an internal::Mutex and
// is held through internal::MutexLock.
#ifndef STRATA_SRC_CORE_THREAD_ANNOTATIONS_H_
#define STRATA_SRC_CORE_THREAD_ANNOTATIONS_H_

#include <mutex>

#if defined(__clang__)
#define STRATA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define STRATA_THREAD_ANNOTATION(x)
#endif

#define STRATA_CAPABILITY(name) STRATA_THREAD_ANNOTATION(capability(name))
#define STRATA_SCOPED_CAPABILITY STRATA_THREAD_ANNOTATION(scoped_lockable)
#define STRATA_GUARDED_BY(mu) STRATA_THREAD_ANNOTATION(guarded_by(mu))
#define STRATA_PT_GUARDED_BY(mu) STRATA_THREAD_ANNOTATION(pt_guarded_by(mu))
#define STRATA_REQUIRES(...) STRATA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define STRATA_EXCLUDES(...) STRATA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define STRATA_ACQUIRE(...) STRATA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define STRATA_RELEASE(...) STRATA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define STRATA_NO_THREAD_SAFETY_ANALYSIS STRATA_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace strata::internal {

// A std::mutex clang knows to be a capability.
class STRATA_CAPABILITY("mutex") Mutex {
 public:
  void lock() STRATA_ACQUIRE() { mu_.lock(); }
  void unlock() STRATA_RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::lock_guard, annotated).
class STRATA_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) STRATA_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() STRATA_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace strata::internal

#endif  // STRATA_SRC_CORE_THREAD_ANNOTATIONS_H_
