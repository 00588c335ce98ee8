// The subcommands of accelrun. Each lives in its own file and takes the arguments
// after its name; main.cpp dispatches. To add one (launch, config, test), write
// <name>_command.cpp and add a row to kCommands in main.cpp.
#pragma once

#include <string>
#include <vector>

namespace accelrun {

using Args = std::vector<std::string>;

int plugins_command(const Args& args);  // accelrun plugins [check PATH]
int env_command(const Args& args);      // accelrun env
int launch_command(const Args& args);   // accelrun [launch] [flags] PROGRAM [--] [ARGS]
int worker_command(const Args& args);   // accelrun __worker SYMBOL PROGRAM (internal)
int config_command(const Args& args);   // accelrun config [default|show]
int test_command(const Args& args);     // accelrun test [launch flags]: the sanity check

// Launches `program` with the launch flags `flags` (a program among them is a usage
// error naming `command`); returns the launcher's exit code.
int launch_program(const char* command, const Args& flags, const std::string& program,
                   const Args& program_args);

}  // namespace accelrun
