// accel::Logger: rank-aware prefixes and main-process filtering over spdlog.
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cctype>
#include <stdexcept>

#include "accel/config_layers.hpp"
#include "accel/logging.hpp"
#include "accel/worker_env.hpp"

namespace accel {
namespace {

spdlog::sink_ptr default_sink() {
  // One stderr sink for all loggers so their lines never interleave mid-line.
  static spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  return sink;
}

}  // namespace

LogLevel parse_log_level(const std::string& text) {
  // Case ignored, as the config's environment layer does: Accelerate users write "DEBUG".
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "trace") return LogLevel::kTrace;
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warn" || lower == "warning") return LogLevel::kWarn;
  if (lower == "error") return LogLevel::kError;
  throw std::invalid_argument("logging: log level '" + text +
                              "' is not one of trace, debug, info, warn, error");
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

Logger::Logger(std::string name, LoggerOptions options) {
  if (!options.process_index || !options.num_processes) {
    const WorkerRank from_env = decode_worker_rank(current_environment());
    process_index_ = options.process_index.value_or(from_env.rank);
    num_processes_ = options.num_processes.value_or(from_env.world_size);
  } else {
    process_index_ = *options.process_index;
    num_processes_ = *options.num_processes;
  }
  if (num_processes_ < 1 || process_index_ < 0 || process_index_ >= num_processes_) {
    throw std::invalid_argument("logging: rank " + std::to_string(process_index_) +
                                " is outside 0.." + std::to_string(num_processes_ - 1));
  }
  LogLevel level = LogLevel::kInfo;
  if (options.level) {
    level = *options.level;
  } else if (auto setting = environment_setting(current_environment(), "log_level")) {
    // The schema's variables, so ACCELERATE_LOG_LEVEL works here as it does for accelrun.
    try {
      level = parse_log_level(setting->text);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(std::string(error.what()) + " (from " + setting->variable +
                                  "; set it to one of those or unset it)");
    }
  }
  main_only_ = options.main_process_only;
  // Not registered in spdlog's global registry: loggers of the same name in one process
  // (tests, several Accelerators) must not collide.
  logger_ = std::make_shared<spdlog::logger>(std::move(name),
                                             options.sink ? options.sink : default_sink());
  logger_->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(process_index_) + "/" +
                       std::to_string(num_processes_) + "] [%^%l%$] [%n] %v");
  set_level(level);
}

Logger Logger::all_processes() const {
  Logger copy = *this;
  copy.main_only_ = false;
  return copy;
}

Logger Logger::main_process_only() const {
  Logger copy = *this;
  copy.main_only_ = true;
  return copy;
}

void Logger::set_level(LogLevel level) {
  logger_->set_level(to_spdlog(level));
  // Warnings and errors reach the terminal at once even if the process dies next.
  logger_->flush_on(spdlog::level::warn);
}

}  // namespace accel
