// The store's row and blob decoding: a store holding one agent (a small trace from tests/data
// replayed with hygiene, so it has tool calls, zstd blobs and recall originals) is damaged by the
// input, then opened, listed and restored, as `strata inspect` and OpenContext do. The input is a
// list of edits, each an op byte (which table and column), a row byte and a value: 8 bytes for an
// integer column, else a length byte and that many bytes. Loading a damaged row must give an error
// that says what is wrong (or a context that renders), never a crash.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_paths.h"
#include "fuzz_util.h"
#include "strata/context.h"
#include "strata/replay/trace.h"
#include "strata/store.h"

namespace fs = std::filesystem;

namespace {

const std::string& WorkDir() {
  static const std::string dir = [] {
    fs::path d = fs::temp_directory_path() / ("strata-fuzz-store-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d.string();
  }();
  return dir;
}

void RemoveDb(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix);
}

// The bytes of a healthy store, made once per process.
const std::string& PristineStore() {
  static const std::string bytes = [] {
    const std::string path = WorkDir() + "/pristine.db";
    RemoveDb(path);
    {
      auto trace = strata::ReadTrace(STRATA_FUZZ_TRACE);
      if (!trace.ok()) strata::fuzz::Fail(trace.status().ToString());
      auto store = strata::OpenSqliteStore(path);
      if (!store.ok()) strata::fuzz::Fail(store.status().ToString());
      strata::ContextOptions options;
      options.agent.id = "fuzz";
      options.hygiene.max_segment_tokens = 64;  // masked results keep recall originals
      auto context = strata::CreateContext(**store, options);
      if (!context.ok()) strata::fuzz::Fail(context.status().ToString());
      strata::Status s = strata::ReplayTrace(*trace, **context, [](auto&, auto&) {
        return strata::Status::Ok();
      });
      if (!s.ok()) strata::fuzz::Fail(s.ToString());
    }
    std::ifstream in(path, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    RemoveDb(path);
    return data;
  }();
  return bytes;
}

struct Column {
  const char* table;
  const char* column;
  bool integer;
};

// The primary key of each table, to address the n-th row in key order.
const char* KeyOf(const std::string& table) {
  if (table == "agents") return "agent";
  if (table == "segments") return "agent, id";
  if (table == "blobs") return "hash";
  return "agent, recall_id";  // originals
}

constexpr Column kColumns[] = {
    {"segments", "seq", true},           {"segments", "position", true},
    {"segments", "kind", true},          {"segments", "layer", true},
    {"segments", "state", true},         {"segments", "hygiene", true},
    {"segments", "turn", true},          {"segments", "tokens", true},
    {"segments", "pinned", true},        {"segments", "ord", true},
    {"segments", "version", false},      {"segments", "name", false},
    {"segments", "tool_call_id", false}, {"segments", "recall_id", false},
    {"segments", "duplicate_of", false}, {"segments", "reasoning", false},
    {"segments", "tool_calls", false},   {"segments", "content", false},
    {"segments", "content_hash", false}, {"segments", "policy", false},
    {"blobs", "raw_size", true},         {"blobs", "codec", true},
    {"blobs", "data", false},            {"blobs", "hash", false},
    {"agents", "options", false},        {"agents", "tokenizer", false},
    {"agents", "turn", true},            {"originals", "content", false},
    {"originals", "content_hash", false}, {"originals", "recall_id", false},
};

// Applies the edits of the input to the database at `path` with plain SQL. A text or blob value
// of length byte 0xff is NULL.
void Damage(const std::string& path, const uint8_t* data, size_t size) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) strata::fuzz::Fail("sqlite3_open");
  size_t pos = 0;
  while (pos + 2 <= size) {
    const Column& c = kColumns[data[pos] % (sizeof kColumns / sizeof kColumns[0])];
    const int row = data[pos + 1];
    pos += 2;
    const std::string key = KeyOf(c.table);
    const std::string sql = std::string("UPDATE ") + c.table + " SET " + c.column + " = ?1 WHERE (" +
                            key + ") IN (SELECT " + key + " FROM " + c.table + " ORDER BY " + key +
                            " LIMIT 1 OFFSET ?2)";
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      strata::fuzz::Fail(std::string("prepare: ") + sqlite3_errmsg(db) + ": " + sql);
    }
    if (c.integer) {
      if (pos + 8 > size) {
        sqlite3_finalize(stmt);
        break;
      }
      int64_t value;
      std::memcpy(&value, data + pos, 8);
      pos += 8;
      sqlite3_bind_int64(stmt, 1, value);
    } else {
      const size_t n = pos < size ? data[pos++] : 0;
      const size_t len = std::min(n, size - pos);
      if (n == 0xff) {
        sqlite3_bind_null(stmt, 1);
      } else {
        sqlite3_bind_blob(stmt, 1, data + pos, static_cast<int>(len), SQLITE_TRANSIENT);
        pos += len;
      }
    }
    sqlite3_bind_int(stmt, 2, row);
    sqlite3_step(stmt);  // constraint violations (NOT NULL, UNIQUE) leave the row as it was
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& pristine = PristineStore();
  const std::string path = WorkDir() + "/damaged.db";
  RemoveDb(path);
  std::ofstream(path, std::ios::binary).write(pristine.data(), static_cast<std::streamsize>(pristine.size()));
  Damage(path, data, size);

  auto store = strata::OpenSqliteStore(path);
  if (!store.ok()) {
    STRATA_FUZZ_CHECK(!store.status().message().empty(), "a refused store without a reason");
    return 0;
  }
  auto agents = (*store)->ListAgents();
  STRATA_FUZZ_CHECK(agents.ok() || !agents.status().message().empty(), "ListAgents failed without a reason");
  auto context = strata::OpenContext(**store, "fuzz");
  if (!context.ok()) {
    STRATA_FUZZ_CHECK(!context.status().message().empty(), "a refused agent without a reason");
    return 0;
  }
  auto built = (*context)->Build();
  STRATA_FUZZ_CHECK(built.ok() || !built.status().message().empty(), "Build failed without a reason");
  (void)(*context)->Segments();
  return 0;
}
