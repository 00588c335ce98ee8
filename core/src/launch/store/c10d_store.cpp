// libaccel_rendezvous.so: the launcher's rendezvous store over c10d::TCPStore. The only
// launch code that touches LibTorch; the launcher dlopens it (rendezvous_store.hpp).
#include <stdexcept>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "launch/rendezvous_store.hpp"
#include "launch/store_port.hpp"

namespace accel::launcher {
namespace {

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string text(const std::vector<uint8_t>& value) { return {value.begin(), value.end()}; }

// The first line of a LibTorch message, without its C++ stack trace.
std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

bool port_in_use(const std::string& message) {
  return message.find("Address already in use") != std::string::npos ||
         message.find("errno: 98") != std::string::npos;
}

std::runtime_error port_in_use_error(int port) {
  return std::runtime_error(port_in_use_message(port));
}

class C10dStore : public RendezvousStore {
 public:
  C10dStore(std::shared_ptr<c10d::TCPStore> store, std::string where)
      : store_(std::move(store)), where_(std::move(where)) {}

  int port() const override { return store_->getPort(); }

  void set(const std::string& key, const std::string& value) override {
    guarded([&] { store_->set(key, bytes(value)); });
  }

  std::string get(const std::string& key) override {
    std::string value;
    guarded([&] { value = text(store_->get(key)); });
    return value;
  }

  bool check(const std::string& key) override {
    bool found = false;
    guarded([&] { found = store_->check({key}); });
    return found;
  }

  bool wait(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      store_->wait({key}, timeout);
      return true;
    } catch (const c10::Error&) {
      return false;  // c10d reports a timeout as a plain c10::Error
    }
  }

 private:
  template <typename F>
  void guarded(F&& call) {
    try {
      call();
    } catch (const c10::Error& e) {
      throw std::runtime_error("rendezvous store at " + where_ + ": " + first_line(e.what()));
    }
  }

  std::shared_ptr<c10d::TCPStore> store_;
  std::string where_;  // "addr:port", for messages
};

class C10dStoreFactory : public RendezvousStoreFactory {
 public:
  std::unique_ptr<RendezvousStore> host(const std::string& addr, int port,
                                        std::chrono::milliseconds timeout) const override {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.isServer = true;
    options.waitWorkers = false;
    options.timeout = timeout;
    std::shared_ptr<c10d::TCPStore> store;
    try {
      store = std::make_shared<c10d::TCPStore>(addr, options);
    } catch (const std::exception& e) {
      if (port_in_use(e.what())) throw port_in_use_error(port);
      throw std::runtime_error("cannot host the rendezvous store on port " + std::to_string(port) +
                               ": " + first_line(e.what()));
    }
    const std::string where = addr + ":" + std::to_string(store->getPort());
    return std::make_unique<C10dStore>(std::move(store), where);
  }

  std::unique_ptr<RendezvousStore> join(const std::string& addr, int port,
                                        std::chrono::milliseconds timeout) const override {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.isServer = false;
    options.timeout = timeout;
    const std::string where = addr + ":" + std::to_string(port);
    try {
      return std::make_unique<C10dStore>(std::make_shared<c10d::TCPStore>(addr, options), where);
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot reach the rendezvous store of machine 0 at " + where +
                               " (is its launcher running with the same --main_process_ip and "
                               "--main_process_port?): " +
                               first_line(e.what()));
    }
  }
};

}  // namespace
}  // namespace accel::launcher

extern "C" __attribute__((visibility("default"))) const accel::launcher::RendezvousStoreFactory*
accel_rendezvous_store_factory(int interface_version) {
  static const accel::launcher::C10dStoreFactory factory;
  if (interface_version != accel::launcher::kRendezvousInterfaceVersion) return nullptr;
  return &factory;
}
