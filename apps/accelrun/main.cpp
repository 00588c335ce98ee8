// accelrun: dispatches to one subcommand. Errors reach the user as one line and an
// exit code (0 ok, 1 failure, 2 usage).
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "accel/backend.h"
#include "build_info.hpp"
#include "cli_common.hpp"

namespace accelrun {

int plugins_test_command(const Args& args);  // accelrun plugins test PATH [--ranks N]

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const Args& args);
};

// One row per subcommand; later issues add launch, config and test here.
constexpr Command kCommands[] = {
    {"launch", "run a training program in supervised workers (the default command)",
     launch_command},
    {"plugins", "the backend plugins found and why any did not load; `plugins check|test PATH`",
     plugins_command},
    {"env", "versions, plugin directories, plugins and devices: paste it into a bug report",
     env_command},
    {"config", "write the config by questions (`config default`: none); `config show`",
     config_command},
    {"test", "check the backend end to end: rendezvous, every collective, a few training steps",
     test_command},
};

void print_help() {
  std::cout << "accelrun: train LibTorch programs on any accelerator, with backends as plugins\n"
               "\n"
               "Usage: accelrun <command> [options]\n"
               "       accelrun [launch] [options] PROGRAM [--] [ARGS...]\n"
               "\n"
               "Commands:\n";
  for (const auto& command : kCommands) {
    std::cout << "  " << command.name << std::string(10 - std::strlen(command.name), ' ')
              << command.summary << "\n";
  }
  std::cout << "\n"
               "Options:\n"
               "  -h, --help     this help; `accelrun <command> --help` for a command's\n"
               "  --version      accelrun's version and the plugin ABI it speaks\n"
               "\n"
               "Examples:\n"
               "  accelrun --num_processes 2 ./libtrain.so -- --epochs 3\n"
               "  accelrun plugins\n"
               "  accelrun plugins check ./libbackend_musa.so\n"
               "  accelrun env > env.txt\n";
}

std::string command_names() {
  std::string names;
  for (const auto& command : kCommands)
    names += (names.empty() ? "" : ", ") + std::string(command.name);
  return names;
}

int dispatch(const Args& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    print_help();
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    std::cout << "accelrun " << accel::build_info::kVersion << " (plugin ABI "
              << ACCEL_ABI_VERSION_MAJOR << "." << ACCEL_ABI_VERSION_MINOR << ")\n";
    return kExitOk;
  }
  if (args[0] == "__worker") return worker_command(Args(args.begin() + 1, args.end()));
  // `plugins test PATH` runs the conformance kit (plugins_test_command.cpp).
  if (args.size() >= 2 && args[0] == "plugins" && args[1] == "test") {
    return plugins_test_command(Args(args.begin() + 2, args.end()));
  }
  for (const auto& command : kCommands) {
    if (args[0] == command.name) return command.run(Args(args.begin() + 1, args.end()));
  }
  // A bare word that is no file is a mistyped command more likely than a program.
  std::error_code ec;
  if (args[0].find_first_of("/.-") == std::string::npos && !std::filesystem::exists(args[0], ec)) {
    throw UsageError("unknown command '" + args[0] + "'", "the commands are " + command_names() +
                                                              ", or give a program's path (./" +
                                                              args[0] + "); see `accelrun --help`");
  }
  // Anything else is `accelrun [flags] PROGRAM`: launch is the default command.
  return launch_command(args);
}

}  // namespace
}  // namespace accelrun

int main(int argc, char** argv) {
  // Output piped into `head` or a closed terminal must not kill the launcher (and its
  // workers with it) by SIGPIPE: writes fail instead, and supervision goes on.
  std::signal(SIGPIPE, SIG_IGN);
  spdlog::set_level(spdlog::level::warn);  // plugin chatter only when it matters
  try {
    return accelrun::dispatch(accelrun::Args(argv + 1, argv + argc));
  } catch (const accelrun::UsageError& e) {
    std::cerr << "accelrun: " << e.what() << " (" << e.fix() << ")\n";
    return accelrun::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "accelrun: " << e.what() << "\n";
    return accelrun::kExitFailure;
  }
}
