// TCPStore hosting and the agreement protocol. Keys live under "accel/launch/".
#include "launch/rendezvous.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace accel::launcher {
namespace {

const std::string kPlanKey = "accel/launch/plan/";
const std::string kVerdictKey = "accel/launch/verdict";
const std::string kAckKey = "accel/launch/ack/";

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string text(const std::vector<uint8_t>& value) { return {value.begin(), value.end()}; }

bool port_in_use(const std::string& message) {
  return message.find("Address already in use") != std::string::npos ||
         message.find("errno: 98") != std::string::npos;
}

// Whether binding `port` on every interface fails with EADDRINUSE, as c10d's listener
// (IPv6 dual-stack, then IPv4, with SO_REUSEADDR) would. Checked first so the user sees
// one line instead of c10d's glog warnings and a stack trace.
bool port_taken(int port) {
  for (int family : {AF_INET6, AF_INET}) {
    const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    int rc = 0;
    if (family == AF_INET6) {
      sockaddr_in6 addr{};
      addr.sin6_family = AF_INET6;
      addr.sin6_addr = in6addr_any;
      addr.sin6_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    } else {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_ANY);
      addr.sin_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    }
    const int error = errno;
    ::close(fd);
    return rc != 0 && error == EADDRINUSE;
  }
  return false;
}

std::runtime_error port_in_use_error(int port) {
  return std::runtime_error("main_process_port " + std::to_string(port) +
                            " is already in use on this machine; pass --main_process_port 0 "
                            "to pick a free one (or choose another port)");
}

// The first line of a LibTorch message, without its C++ stack trace.
std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

}  // namespace

struct Rendezvous::Impl {
  std::shared_ptr<c10d::TCPStore> store;
  std::chrono::milliseconds timeout{};
  std::string where;  // "addr:port", for messages
};

Rendezvous::Rendezvous(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Rendezvous::~Rendezvous() = default;

std::unique_ptr<Rendezvous> Rendezvous::host(const std::string& addr, int port,
                                             std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = timeout;
  if (port != 0 && port_taken(port)) throw port_in_use_error(port);
  auto impl = std::make_unique<Impl>();
  try {
    impl->store = std::make_shared<c10d::TCPStore>(addr, options);
  } catch (const std::exception& e) {
    if (port_in_use(e.what())) throw port_in_use_error(port);
    throw std::runtime_error("cannot host the rendezvous store on port " + std::to_string(port) +
                             ": " + first_line(e.what()));
  }
  impl->timeout = timeout;
  impl->where = addr + ":" + std::to_string(impl->store->getPort());
  return std::unique_ptr<Rendezvous>(new Rendezvous(std::move(impl)));
}

std::unique_ptr<Rendezvous> Rendezvous::join(const std::string& addr, int port,
                                             std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.timeout = timeout;
  auto impl = std::make_unique<Impl>();
  impl->where = addr + ":" + std::to_string(port);
  try {
    impl->store = std::make_shared<c10d::TCPStore>(addr, options);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot reach the rendezvous store of machine 0 at " + impl->where +
                             " (is its launcher running with the same --main_process_ip and "
                             "--main_process_port?): " +
                             first_line(e.what()));
  }
  impl->timeout = timeout;
  return std::unique_ptr<Rendezvous>(new Rendezvous(std::move(impl)));
}

int Rendezvous::port() const { return impl_->store->getPort(); }

void Rendezvous::agree(const LaunchPlan& plan) {
  auto& store = *impl_->store;
  const std::string mine = encode_agreement(plan);
  const int me = plan.machine_rank;
  store.set(kPlanKey + std::to_string(me), bytes(mine));
  if (me != 0) {
    std::string verdict;
    try {
      const std::string host_plan = text(store.get(kPlanKey + "0"));
      const std::string difference = agreement_difference(mine, me, host_plan, 0);
      if (!difference.empty()) {
        verdict = "machine " + std::to_string(me) +
                  " disagrees with machine 0 about the launch plan: " + difference;
      } else {
        verdict = text(store.get(kVerdictKey));
      }
      store.set(kAckKey + std::to_string(me), bytes("seen"));
    } catch (const c10::Error& e) {
      throw std::runtime_error("rendezvous at " + impl_->where +
                               " failed waiting for machine 0: " + first_line(e.what()));
    }
    if (verdict != "ok") throw std::runtime_error(verdict);
    return;
  }
  // Publishes the failure and gives the machines that joined a moment to read it before
  // this launcher (and its store) exits.
  const auto fail = [&](const std::string& why) {
    store.set(kVerdictKey, bytes(why));
    for (int machine = 1; machine < plan.num_machines; ++machine) {
      try {
        if (store.check({kPlanKey + std::to_string(machine)}))
          store.wait({kAckKey + std::to_string(machine)}, std::chrono::seconds(5));
      } catch (const c10::Error&) {
      }
    }
    throw std::runtime_error(why);
  };
  for (int machine = 1; machine < plan.num_machines; ++machine) {
    const std::string key = kPlanKey + std::to_string(machine);
    try {
      store.wait({key}, impl_->timeout);
    } catch (const c10::Error&) {
      const std::string why =
          "machine " + std::to_string(machine) + " did not join the rendezvous at " + impl_->where +
          " within " + std::to_string(impl_->timeout.count() / 1000) +
          " s (start its launcher with --machine_rank " + std::to_string(machine) +
          " and the same --main_process_ip and --main_process_port)";
      fail(why);
    }
    const std::string difference = agreement_difference(text(store.get(key)), machine, mine, 0);
    if (!difference.empty()) {
      const std::string why = "machine " + std::to_string(machine) +
                              " disagrees with machine 0 about the launch plan: " + difference;
      fail(why);
    }
  }
  store.set(kVerdictKey, bytes("ok"));
}

}  // namespace accel::launcher
