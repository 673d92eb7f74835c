// A real PostgreSQL server (and PgBouncer in transaction pooling mode in front of it) for tests,
// and the store backends the store conformance suite runs against.
//
//   testing::PostgresServer& server = testing::SharedPostgres();  // started once per process
//   std::string url = server.NewDatabase();   // postgresql://postgres@127.0.0.1:PORT/t1
//
// The server runs from a temporary data directory on a free port of 127.0.0.1 with trust
// authentication; as root it runs as the unprivileged user `nobody` (PostgreSQL refuses root).
// The data directory is copied from a template made once per machine by initdb. It is stopped
// and removed when the process exits. Missing server binaries (scripts/setup installs Debian's
// postgresql and pgbouncer) fail the test: REQUIRE, never a skip.
#ifndef STRATA_TESTS_TESTING_POSTGRES_TESTING_H_
#define STRATA_TESTS_TESTING_POSTGRES_TESTING_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/store.h"
#include "testing/command.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

// REQUIRE(condition) with `message` (a std::string expression) reported when it fails.
#define STRATA_REQUIRE_MESSAGE(condition, message) \
  do {                                             \
    INFO(message);                                 \
    REQUIRE(condition);                            \
  } while (false)

namespace strata::testing {

// The directory of PostgreSQL's server programs (initdb, pg_ctl, postgres): the newest
// /usr/lib/postgresql/<version>/bin; "" when none is installed.
inline std::string PostgresBinDir() {
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string version = entry.path().filename().string();
    const int number = std::atoi(version.c_str());
    if (number > best_version && std::filesystem::exists(entry.path() / "bin" / "initdb")) {
      best_version = number;
      best = (entry.path() / "bin").string();
    }
  }
  return best;
}

// A port of 127.0.0.1 that was free a moment ago.
inline int FreeLocalPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

// "runuser -u nobody -- " when running as root (the servers refuse root), else "".
inline std::string AsServerUser() { return ::geteuid() == 0 ? "runuser -u nobody -- " : ""; }

inline std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `sql` on `url`; the error text, "" on success.
inline std::string RunSql(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* result = PQexec(conn, sql.c_str());
    ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) error = PQerrorMessage(conn);
    PQclear(result);
  }
  PQfinish(conn);
  return error;
}

// One PostgreSQL server of a test process.
class PostgresServer {
 public:
  // Starts a server from a copy of the initdb template. REQUIREs that it started.
  PostgresServer() {
    bin_ = PostgresBinDir();
    STRATA_REQUIRE_MESSAGE(!bin_.empty(), "no PostgreSQL server under /usr/lib/postgresql: run "
                                        "scripts/setup (it installs Debian's postgresql)");
    REQUIRE(!temp_.path().empty());
    dir_ = temp_.path();
    data_ = dir_ + "/data";
    const std::string tmpl = Template();
    Shell("cp -a " + ShellQuote(tmpl) + " " + ShellQuote(data_));
    if (::geteuid() == 0) Shell("chown -R nobody " + ShellQuote(dir_));
    // A port free a moment ago may be taken by another test process meanwhile: try another.
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = FreeLocalPort();
      if (RunCommand(StartCommand() + " 2>&1").exit_code == 0) return;
    }
    Start();  // fails the test with pg_ctl's output
  }
  ~PostgresServer() {
    RunCommand(AsServerUser() + ShellQuote(bin_ + "/pg_ctl") + " -D " + ShellQuote(data_) +
               " -m immediate -w stop >/dev/null 2>&1");
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  // The URL of database `name` on this server.
  std::string Url(const std::string& name = "postgres") const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + name;
  }
  // Creates an empty database and returns its URL.
  std::string NewDatabase() {
    const std::string name = "t" + std::to_string(++databases_);
    const std::string error = RunSql(Url(), "CREATE DATABASE " + name);
    STRATA_REQUIRE_MESSAGE(error.empty(), "CREATE DATABASE " + name + ": " + error);
    return Url(name);
  }
  // Stops the server (fast shutdown: sessions are cut, as in a database failover).
  void Stop() {
    Shell(AsServerUser() + ShellQuote(bin_ + "/pg_ctl") + " -D " + ShellQuote(data_) +
          " -m fast -w stop >/dev/null");
  }
  void Start() { Shell(StartCommand()); }

 private:
  std::string StartCommand() const {
    const std::string options = "-p " + std::to_string(port_) + " -k " + dir_ +
                                " -c listen_addresses=127.0.0.1 -c fsync=off"
                                " -c max_connections=200";
    return AsServerUser() + ShellQuote(bin_ + "/pg_ctl") + " -D " + ShellQuote(data_) + " -o " +
           ShellQuote(options) + " -l " + ShellQuote(dir_ + "/server.log") + " -w start >/dev/null";
  }

  void Shell(const std::string& command) {
    CommandResult result = RunCommand(command + " 2>&1");
    STRATA_REQUIRE_MESSAGE(result.exit_code == 0, command + " failed: " + result.output);
  }

  // The initdb'd data directory every server copies, made once per machine and version.
  std::string Template() {
    const char* base = std::getenv("TMPDIR");
    const std::string root = std::string(base != nullptr ? base : "/tmp") +
                             "/strata-pg-template-" +
                             std::filesystem::path(bin_).parent_path().filename().string();
    const std::string lock_path = root + ".lock";
    int lock = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0666);
    REQUIRE(lock >= 0);
    ::flock(lock, LOCK_EX);
    if (!std::filesystem::exists(root + "/data/PG_VERSION") ||
        !std::filesystem::exists(root + "/complete")) {
      std::error_code ec;
      std::filesystem::remove_all(root, ec);
      std::filesystem::create_directories(root + "/data");
      if (::geteuid() == 0) Shell("chown -R nobody " + ShellQuote(root));
      Shell(AsServerUser() + ShellQuote(bin_ + "/initdb") + " -D " + ShellQuote(root + "/data") +
            " -A trust -U postgres -E UTF8 --no-sync >/dev/null");
      std::ofstream(root + "/complete") << "ok\n";
    }
    ::flock(lock, LOCK_UN);
    ::close(lock);
    return root + "/data";
  }

  std::string bin_;
  TempDir temp_{"strata-pg-"};  // removed after the server stopped
  std::string dir_;
  std::string data_;
  int port_ = 0;
  int databases_ = 0;
};

// PgBouncer in transaction pooling mode in front of `server` (any database name).
class PgBouncer {
 public:
  explicit PgBouncer(const PostgresServer& server) : dir_(server.dir() + "/pgbouncer") {
    STRATA_REQUIRE_MESSAGE(std::filesystem::exists("/usr/sbin/pgbouncer"),
                    "no /usr/sbin/pgbouncer: run scripts/setup (it installs Debian's pgbouncer)");
    std::filesystem::create_directories(dir_);
    port_ = FreeLocalPort();
    std::ofstream(dir_ + "/pgbouncer.ini")
        << "[databases]\n* = host=127.0.0.1 port=" << server.port() << " user=postgres\n"
        << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port_
        << "\nunix_socket_dir =\nauth_type = any\npool_mode = transaction\n"
        << "max_client_conn = 200\ndefault_pool_size = 20\nlogfile = " << dir_
        << "/pgbouncer.log\npidfile = " << dir_ << "/pgbouncer.pid\n";
    if (::geteuid() == 0) RunCommand("chown -R nobody " + ShellQuote(dir_));
    CommandResult started = RunCommand(AsServerUser() + "/usr/sbin/pgbouncer -d " +
                                       ShellQuote(dir_ + "/pgbouncer.ini") + " 2>&1");
    STRATA_REQUIRE_MESSAGE(started.exit_code == 0, "pgbouncer did not start: " + started.output);
    REQUIRE(WaitFor([&] { return RunSql(Url("postgres"), "SELECT 1").empty(); }));
  }
  ~PgBouncer() {
    std::ifstream pid_file(dir_ + "/pgbouncer.pid");
    int pid = 0;
    if (pid_file >> pid && pid > 0) ::kill(pid, SIGTERM);
  }
  std::string Url(const std::string& name) const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + name;
  }

 private:
  std::string dir_;
  int port_ = 0;
};

// The process's server, started at first use and stopped at exit.
inline PostgresServer& SharedPostgres() {
  static PostgresServer* server = new PostgresServer();
  static struct Stopper {
    ~Stopper() { delete server; }
  } stopper;
  return *server;
}

inline PgBouncer& SharedPgBouncer() {
  static PgBouncer* bouncer = new PgBouncer(SharedPostgres());
  static struct Stopper {
    ~Stopper() { delete bouncer; }
  } stopper;
  return *bouncer;
}

// The backends of the store conformance suite.
enum class StoreBackend { kSqlite, kPostgres, kPgBouncer };

inline const char* BackendName(StoreBackend backend) {
  switch (backend) {
    case StoreBackend::kSqlite:
      return "sqlite";
    case StoreBackend::kPostgres:
      return "postgresql";
    case StoreBackend::kPgBouncer:
      return "postgresql through pgbouncer (transaction mode)";
  }
  return "?";
}

// Where one test's store lives: a file in a temporary directory, or a fresh database.
class BackendLocation {
 public:
  explicit BackendLocation(StoreBackend backend) : backend_(backend) {
    if (backend == StoreBackend::kSqlite) {
      temp_.emplace("strata-store-");
      REQUIRE(!temp_->path().empty());
      location_ = temp_->File("a.db");
      return;
    }
    location_ = SharedPostgres().NewDatabase();
    if (backend == StoreBackend::kPgBouncer) {
      location_ = SharedPgBouncer().Url(location_.substr(location_.rfind('/') + 1));
    }
  }
  StoreBackend backend() const { return backend_; }
  bool is_sqlite() const { return backend_ == StoreBackend::kSqlite; }
  // The file path or URL (OpenStore takes either).
  const std::string& location() const { return location_; }
  StatusOr<std::unique_ptr<Store>> Open(StoreOptions options = {}) const {
    return OpenStore(location_, std::move(options));
  }

 private:
  StoreBackend backend_;
  std::optional<TempDir> temp_;  // SQLite: the directory of the store file
  std::string location_;
};

// Every backend, for GENERATE(values(...)).
inline std::vector<StoreBackend> AllStoreBackends() {
  return {StoreBackend::kSqlite, StoreBackend::kPostgres, StoreBackend::kPgBouncer};
}

}  // namespace strata::testing

// Declares `name`, a BackendLocation, once per backend: the test case runs for each (GENERATE),
// and a failure names the backend.
#define STRATA_FOR_EACH_STORE_BACKEND(name)                                                   \
  const ::strata::testing::StoreBackend name##_backend = GENERATE(values(                     \
      {::strata::testing::StoreBackend::kSqlite, ::strata::testing::StoreBackend::kPostgres,  \
       ::strata::testing::StoreBackend::kPgBouncer}));                                        \
  INFO("store backend: " << ::strata::testing::BackendName(name##_backend));                  \
  ::strata::testing::BackendLocation name(name##_backend)

#endif  // STRATA_TESTS_TESTING_POSTGRES_TESTING_H_
