// accel::comm::KvStoreBridge's get(timeout) against a real TCPStore client connection:
// a get that times out must leave the connection usable. LibTorch 1.13's TCPStore
// `wait` does not (a timed-out wait leaves its reply pending on the socket, and the
// next call on that connection reads it and goes out of step, or hangs), so the bridge
// must not use it.
#include "comm/kv_store.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<c10d::TCPStore> make_store(bool server, uint16_t port) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = server;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(10);
  return std::make_shared<c10d::TCPStore>("127.0.0.1", options);
}

void sink(void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->assign(static_cast<const char*>(data), size);
}

// Runs fn on a thread; a call still blocked after the deadline is a hang: fail loudly
// and leave the process (the blocked thread cannot be joined).
template <class Fn>
auto bounded(Fn fn, std::chrono::seconds deadline) {
  auto task = std::async(std::launch::async, fn);
  if (task.wait_for(deadline) != std::future_status::ready) {
    std::fprintf(stderr, "the store call hung for %lld s after a timed-out get\n",
                 static_cast<long long>(deadline.count()));
    std::_Exit(1);
  }
  return task.get();
}

TEST(KvStoreBridge, TimedOutGetLeavesTheConnectionUsable) {
  auto server = make_store(true, 0);
  auto client = make_store(false, server->getPort());
  accel::comm::KvStoreBridge bridge(client, accel::comm::KvStoreBridge::prefix_for("poll"));
  const accel_kv_store* kv = bridge.kv_store();

  // A short poll on a key nobody has set yet, as a plugin waiting for a peer does.
  std::string got;
  const auto start = Clock::now();
  EXPECT_EQ(kv->get(kv->user_data, "late", 30, sink, &got), ACCEL_STATUS_TIMEOUT);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);

  // The key appears later, through another connection; a reply to the abandoned wait
  // would now be waiting on the bridge's socket.
  server->set("accel/comm/poll/late", std::vector<uint8_t>{'o', 'k'});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  // Every later operation on the bridge's connection is answered in step.
  int64_t total = 0;
  EXPECT_EQ(
      bounded([&] { return kv->add(kv->user_data, "n", 5, &total); }, std::chrono::seconds(20)),
      ACCEL_STATUS_OK);
  EXPECT_EQ(total, 5);
  EXPECT_EQ(bounded([&] { return kv->get(kv->user_data, "late", 5000, sink, &got); },
                    std::chrono::seconds(20)),
            ACCEL_STATUS_OK);
  EXPECT_EQ(got, "ok");
  const char value[] = "v2";
  EXPECT_EQ(
      bounded([&] { return kv->set(kv->user_data, "next", value, 2); }, std::chrono::seconds(20)),
      ACCEL_STATUS_OK);
  EXPECT_EQ(bounded([&] { return kv->get(kv->user_data, "next", 1000, sink, &got); },
                    std::chrono::seconds(20)),
            ACCEL_STATUS_OK);
  EXPECT_EQ(got, "v2");
  EXPECT_EQ(
      bounded([&] { return kv->add(kv->user_data, "n", 1, &total); }, std::chrono::seconds(20)),
      ACCEL_STATUS_OK);
  EXPECT_EQ(total, 6);
}

}  // namespace
