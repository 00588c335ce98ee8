// The rendezvous store's port, chosen and checked before the store exists. On one
// machine the launcher forks its workers first and hosts the store while they load
// LibTorch (launcher.cpp), so the port must be known, and known to be free, before
// LibTorch is loaded. No LibTorch here.
#pragma once

#include <string>

namespace accel::launcher {

// `requested` when nothing listens on it, a free port when it is 0. Binds as c10d's
// listener does (IPv6 dual-stack, else IPv4, SO_REUSEADDR) and closes at once: a port
// another program takes between this check and the store's bind fails there instead,
// and the workers' run-id check (ACCEL_RUN_ID) stops them from using another store.
// Throws std::runtime_error with port_in_use_message for a taken port, or naming the
// failing call.
int choose_store_port(int requested);

// Whether a listener on every interface at `port` would fail with EADDRINUSE.
bool port_taken(int port);

// One line for a taken --main_process_port, with the fix. Inline: libaccel_rendezvous.so
// uses it too and links nothing of ours.
inline std::string port_in_use_message(int port) {
  return "main_process_port " + std::to_string(port) +
         " is already in use on this machine; pass --main_process_port 0 to pick a free one "
         "(or choose another port)";
}

// A fresh random identifier for this launch (16 hex digits): the launcher writes it into
// the store it hosts and passes it to its workers as ACCEL_RUN_ID.
std::string new_run_id();

}  // namespace accel::launcher
