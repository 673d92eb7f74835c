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
// is held through internal::MutexLock, or through internal::UniqueMutexLock where the scope lets go
// of it for a while (around a call that must not hold it). A function that needs the mutex held by
// its caller says STRATA_REQUIRES(mu_); it may release it and take it again (mu_.unlock(), then
// mu_.lock()), and waits on a std::condition_variable_any with mu_ itself as the lock.
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

// Holds a Mutex for its scope, and may release it and take it again meanwhile (std::unique_lock,
// annotated): the destructor releases it only when held.
class STRATA_SCOPED_CAPABILITY UniqueMutexLock {
 public:
  explicit UniqueMutexLock(Mutex& mu) STRATA_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~UniqueMutexLock() STRATA_RELEASE() {
    if (held_) mu_.unlock();
  }
  UniqueMutexLock(const UniqueMutexLock&) = delete;
  UniqueMutexLock& operator=(const UniqueMutexLock&) = delete;

  // Releases the mutex; requires it held.
  void Unlock() STRATA_RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  // Takes the mutex again; requires it released by Unlock().
  void Lock() STRATA_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

}  // namespace strata::internal

#endif  // STRATA_SRC_CORE_THREAD_ANNOTATIONS_H_
