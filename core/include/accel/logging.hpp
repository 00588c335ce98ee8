// accel/logging.hpp: a logger that knows which process it runs in (spdlog underneath).
//
//   accel::Logger log = accel::get_logger("train");   // rank and level from the environment
//   log.info("epoch {} loss {:.4f}", epoch, loss);     // main process only (the default)
//   log.all_processes().warn("rank-local: {} samples skipped", n);
//
// Every line carries the process in its prefix:
//   [2024-05-01 12:00:00.123] [rank 1/4] [warning] [train] rank-local: 3 samples skipped
//
// As in Accelerate's get_logger(...).info(..., main_process_only=True), a Logger prints
// on the main process (rank 0) only unless made with main_process_only = false or
// viewed through all_processes(). The process comes from RANK and WORLD_SIZE (set by
// accelrun for its workers; 0 and 1 when absent); the level from the config key
// log_level's variables, ACCEL_LOG_LEVEL then ACCELERATE_LOG_LEVEL ("trace".."error";
// "info" when neither is set), unless given.
//
// Threads: loggers are cheap values that share one spdlog logger; logging is thread safe.
// Output goes to stderr unless a sink is given (tests pass an ostream sink).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "accel/run_config.hpp"

namespace accel {

struct LoggerOptions {
  std::optional<int> process_index;  // default: $RANK, else 0
  std::optional<int> num_processes;  // default: $WORLD_SIZE, else 1
  std::optional<LogLevel> level;     // default: $ACCEL_LOG_LEVEL, $ACCELERATE_LOG_LEVEL, info
  bool main_process_only = true;
  spdlog::sink_ptr sink;  // default: a colour stderr sink
};

class Logger {
 public:
  // Throws LaunchError for a malformed or inconsistent RANK/WORLD_SIZE (as
  // decode_worker_rank), std::invalid_argument for an unparsable level variable (named
  // in the message) or a given rank outside 0..num_processes-1.
  Logger(std::string name, LoggerOptions options = {});

  // The same logger printing on every process.
  Logger all_processes() const;
  // The same logger printing only on the main process.
  Logger main_process_only() const;

  int process_index() const { return process_index_; }
  int num_processes() const { return num_processes_; }
  bool is_main_process() const { return process_index_ == 0; }
  // Whether this logger prints here at all (main process, or all_processes()).
  bool enabled() const { return !main_only_ || is_main_process(); }
  void set_level(LogLevel level);
  // The underlying spdlog logger, for sinks and patterns beyond these options.
  const std::shared_ptr<spdlog::logger>& spdlog_logger() const { return logger_; }

  template <typename... Args>
  void trace(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::trace, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void debug(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::debug, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void info(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::info, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::warn, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void error(spdlog::format_string_t<Args...> fmt, Args&&... args) const {
    log(spdlog::level::err, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void log(spdlog::level::level_enum level, spdlog::format_string_t<Args...> fmt,
           Args&&... args) const {
    if (enabled()) logger_->log(level, fmt, std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  int process_index_ = 0;
  int num_processes_ = 1;
  bool main_only_ = true;
};

// A Logger named `name` with the defaults above (Accelerate's get_logger).
inline Logger get_logger(std::string name, LoggerOptions options = {}) {
  return Logger(std::move(name), std::move(options));
}

// "trace".."error" (also "warning"), case ignored, to a LogLevel; std::invalid_argument
// otherwise.
LogLevel parse_log_level(const std::string& text);
spdlog::level::level_enum to_spdlog(LogLevel level);

}  // namespace accel
