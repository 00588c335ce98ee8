// RAII owners: destructors release handles; handles keep their plugin loaded.
#include "loader_test_util.hpp"

namespace accel::test {
namespace {

// The C plugin reports its live streams + events as allocated_bytes.
uint64_t live_handles(Plugin& plugin) { return plugin.memory_stats(0).allocated_bytes; }

std::shared_ptr<Plugin> initialised_c_plugin() {
  auto plugin = load_plugin(ACCEL_TEST_C_PLUGIN).plugin;
  if (plugin) plugin->init();
  return plugin;
}

TEST(Handles, DestructorsReleaseStreamsAndEvents) {
  auto plugin = initialised_c_plugin();
  ASSERT_TRUE(plugin);
  {
    Stream stream = plugin->create_stream(0);
    Event event = plugin->create_event(0, ACCEL_EVENT_TIMING);
    EXPECT_EQ(live_handles(*plugin), 2u);
    event.record(stream);
    stream.wait(event);
    EXPECT_TRUE(event.query());
    EXPECT_TRUE(stream.query());
    EXPECT_EQ(Event::elapsed_ms(event, event), 0.0);
  }
  EXPECT_EQ(live_handles(*plugin), 0u);
}

TEST(Handles, MoveTransfersOwnership) {
  auto plugin = initialised_c_plugin();
  ASSERT_TRUE(plugin);
  Stream a = plugin->create_stream(0);
  Stream b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  EXPECT_EQ(live_handles(*plugin), 1u);
  b = plugin->create_stream(0);  // the first stream is destroyed
  EXPECT_EQ(live_handles(*plugin), 1u);
  b.reset();
  EXPECT_EQ(live_handles(*plugin), 0u);
}

TEST(Handles, StreamKeepsThePluginLoaded) {
  Stream stream;
  {
    auto plugin = initialised_c_plugin();
    ASSERT_TRUE(plugin);
    stream = plugin->create_stream(0);
  }
  // The only owner of the plugin is now the stream: calls still work.
  ASSERT_TRUE(stream.plugin());
  EXPECT_EQ(stream.plugin().use_count(), 1);
  stream.synchronize();
  EXPECT_EQ(live_handles(*stream.plugin()), 1u);
}

TEST(Handles, ShutdownFirstThenDestructorsDoNotDoubleFree) {
  auto plugin = initialised_c_plugin();
  ASSERT_TRUE(plugin);
  Stream stream = plugin->create_stream(0);
  plugin->shutdown();
  stream.reset();  // shutdown destroyed it already: must not call stream_destroy again
  plugin->init();
  EXPECT_EQ(live_handles(*plugin), 0u);
}

TEST(Handles, HandleFromBeforeAReinitIsNotDestroyedTwice) {
  auto plugin = initialised_c_plugin();
  ASSERT_TRUE(plugin);
  Stream stale = plugin->create_stream(0);
  plugin->shutdown();  // destroyed the stream
  plugin->init();
  Stream fresh = plugin->create_stream(0);
  EXPECT_EQ(live_handles(*plugin), 1u);
  stale.reset();  // must not reach stream_destroy: the count would drop to 0
  EXPECT_EQ(live_handles(*plugin), 1u);
  fresh.reset();
  EXPECT_EQ(live_handles(*plugin), 0u);
}

TEST(Handles, HostFunctionRunsOnTheStream) {
  auto plugin = initialised_c_plugin();
  ASSERT_TRUE(plugin);
  Stream stream = plugin->create_stream(0);
  int ran = 0;
  stream.enqueue_host_fn(
      [](void* data) -> accel_error* {
        ++*static_cast<int*>(data);
        return nullptr;
      },
      &ran);
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace accel::test
