// accel/secure_execution.hpp: whether this process runs with privileges its caller lacks.
//
// In a setuid/setgid process (AT_SECURE on Linux, issetugid() on macOS) the caller still
// controls the environment, the command line and its own files, so none of them may
// choose code to load or files to read with the process's privileges. The plugin search
// path, the loader and the config layers consult this; docs/security.md lists what each
// ignores or refuses.
#pragma once

namespace accel {

// True in a setuid/setgid (secure-execution) process. Cheap; never throws.
bool secure_execution();

}  // namespace accel
