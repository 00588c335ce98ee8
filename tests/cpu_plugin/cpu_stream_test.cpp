// The CPU plugin's streams and events: order, query, waits across streams, timing,
// failures, the calling-thread stream, and destruction while busy. No upper bounds on
// time: the machine is shared; gates (futures) make the orderings deterministic.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "plugin_fixture.h"

namespace cpu_plugin_test {
namespace {

using namespace std::chrono_literals;

// Owns a stream or an event for one test; movable, never copied.
struct StreamOwner {
  accel_stream* stream = nullptr;
  StreamOwner() = default;
  StreamOwner(StreamOwner&& other) noexcept : stream(std::exchange(other.stream, nullptr)) {}
  StreamOwner& operator=(StreamOwner&&) = delete;
  ~StreamOwner() { take(api().stream_destroy(stream)); }
};
struct EventOwner {
  accel_event* event = nullptr;
  EventOwner() = default;
  EventOwner(EventOwner&& other) noexcept : event(std::exchange(other.event, nullptr)) {}
  EventOwner& operator=(EventOwner&&) = delete;
  ~EventOwner() { take(api().event_destroy(event)); }
};

StreamOwner new_stream() {
  StreamOwner owner;
  EXPECT_TRUE(ok(api().stream_create(0, &owner.stream)));
  return owner;
}

EventOwner new_event(uint32_t flags = ACCEL_EVENT_DEFAULT) {
  EventOwner owner;
  EXPECT_TRUE(ok(api().event_create(0, flags, &owner.event)));
  return owner;
}

// A host function as a C callback over a std::function (kept alive by the test).
using Work = std::function<accel_error*()>;
accel_error* call_work(void* work) { return (*static_cast<Work*>(work))(); }

void enqueue(accel_stream* stream, Work& work) {
  ASSERT_TRUE(ok(api().stream_enqueue_host_fn(stream, call_work, &work)));
}

// A task that holds its stream until the test opens the gate (or 10 s pass, so a
// broken plugin fails the test instead of hanging it).
struct Gate {
  std::promise<void> open_promise;
  std::shared_future<void> opened = open_promise.get_future().share();
  std::atomic<bool> timed_out{false};
  Work task = [this]() -> accel_error* {
    if (opened.wait_for(10s) != std::future_status::ready) timed_out = true;
    return nullptr;
  };
  void open() { open_promise.set_value(); }
};

bool stream_done(accel_stream* stream) {
  bool done = false;
  EXPECT_TRUE(ok(api().stream_query(stream, &done)));
  return done;
}

bool event_done(accel_event* event) {
  bool done = false;
  EXPECT_TRUE(ok(api().event_query(event, &done)));
  return done;
}

TEST(CpuStream, RunsTasksInOrder) {
  StreamOwner s = new_stream();
  std::vector<int> order;  // only the stream's worker writes it
  std::vector<Work> tasks;
  for (int i = 0; i < 50; ++i) {
    tasks.push_back([&order, i]() -> accel_error* {
      if (i % 10 == 0) std::this_thread::sleep_for(2ms);  // give reordering a chance
      order.push_back(i);
      return nullptr;
    });
  }
  for (Work& task : tasks) enqueue(s.stream, task);
  ASSERT_TRUE(ok(api().stream_synchronize(s.stream)));
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[i] = i;
  EXPECT_EQ(order, expected);
}

TEST(CpuStream, QueryIsFalseWhileATaskBlocksAndTrueAfter) {
  StreamOwner s = new_stream();
  EXPECT_TRUE(stream_done(s.stream));
  Gate gate;
  enqueue(s.stream, gate.task);
  EventOwner e = new_event();
  ASSERT_TRUE(ok(api().event_record(e.event, s.stream)));
  EXPECT_FALSE(stream_done(s.stream));
  EXPECT_FALSE(event_done(e.event));
  gate.open();
  ASSERT_TRUE(ok(api().stream_synchronize(s.stream)));
  EXPECT_TRUE(stream_done(s.stream));
  EXPECT_TRUE(event_done(e.event));
  EXPECT_FALSE(gate.timed_out);
}

// B waits for an event recorded on A behind a held task: wait_event returns at once,
// B's later work waits, and observes A's task done.
TEST(CpuStream, WaitEventOrdersAcrossStreams) {
  StreamOwner a = new_stream();
  StreamOwner b = new_stream();
  Gate gate;
  std::atomic<bool> a_done{false};
  Work a_task = [&]() -> accel_error* {
    gate.task();
    a_done = true;
    return nullptr;
  };
  std::atomic<bool> b_saw_a_done{false};
  Work b_task = [&]() -> accel_error* {
    b_saw_a_done = a_done.load();
    return nullptr;
  };
  EventOwner e = new_event();
  enqueue(a.stream, a_task);
  ASSERT_TRUE(ok(api().event_record(e.event, a.stream)));
  ASSERT_TRUE(ok(api().stream_wait_event(b.stream, e.event)));  // must not block
  enqueue(b.stream, b_task);
  EXPECT_FALSE(stream_done(b.stream));
  gate.open();
  ASSERT_TRUE(ok(api().stream_synchronize(b.stream)));
  EXPECT_TRUE(b_saw_a_done);
  EXPECT_FALSE(gate.timed_out) << "stream_wait_event blocked its caller";
}

TEST(CpuEvent, QueryAndSynchronize) {
  EventOwner never = new_event();
  EXPECT_TRUE(event_done(never.event));  // never recorded counts as done
  EXPECT_TRUE(ok(api().event_synchronize(never.event)));
  StreamOwner s = new_stream();
  Gate gate;
  enqueue(s.stream, gate.task);
  EventOwner e = new_event();
  ASSERT_TRUE(ok(api().event_record(e.event, s.stream)));
  EXPECT_FALSE(event_done(e.event));
  std::thread opener([&] {
    std::this_thread::sleep_for(20ms);
    gate.open();
  });
  EXPECT_TRUE(ok(api().event_synchronize(e.event)));
  EXPECT_TRUE(event_done(e.event));
  opener.join();
}

// Events on one stream complete in the order they were recorded.
TEST(CpuEvent, EventsOnOneStreamCompleteInOrder) {
  StreamOwner s = new_stream();
  Gate first_gate, second_gate;
  EventOwner first = new_event(), second = new_event();
  enqueue(s.stream, first_gate.task);
  ASSERT_TRUE(ok(api().event_record(first.event, s.stream)));
  enqueue(s.stream, second_gate.task);
  ASSERT_TRUE(ok(api().event_record(second.event, s.stream)));
  first_gate.open();
  ASSERT_TRUE(ok(api().event_synchronize(first.event)));
  EXPECT_FALSE(event_done(second.event));
  second_gate.open();
  ASSERT_TRUE(ok(api().event_synchronize(second.event)));
  EXPECT_TRUE(event_done(second.event));
}

TEST(CpuEvent, ElapsedTimeCoversASleep) {
  StreamOwner s = new_stream();
  EventOwner start = new_event(ACCEL_EVENT_TIMING), end = new_event(ACCEL_EVENT_TIMING);
  Work sleep = []() -> accel_error* {
    std::this_thread::sleep_for(50ms);
    return nullptr;
  };
  ASSERT_TRUE(ok(api().event_record(start.event, s.stream)));
  enqueue(s.stream, sleep);
  ASSERT_TRUE(ok(api().event_record(end.event, s.stream)));
  ASSERT_TRUE(ok(api().event_synchronize(end.event)));
  double ms = -1;
  ASSERT_TRUE(ok(api().event_elapsed_ms(start.event, end.event, &ms)));
  EXPECT_GE(ms, 49.0);  // sleep_for sleeps at least 50 ms; steady_clock is monotonic
}

TEST(CpuEvent, ElapsedTimeNeedsCompletedTimingEvents) {
  EventOwner plain = new_event(), timing = new_event(ACCEL_EVENT_TIMING);
  EventOwner unrecorded = new_event(ACCEL_EVENT_TIMING);
  double ms = 0;
  EXPECT_EQ(take(api().event_elapsed_ms(plain.event, timing.event, &ms)).code,
            ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(take(api().event_elapsed_ms(timing.event, unrecorded.event, &ms)).code,
            ACCEL_STATUS_FAILED_PRECONDITION);
  StreamOwner s = new_stream();
  Gate gate;
  ASSERT_TRUE(ok(api().event_record(timing.event, s.stream)));
  enqueue(s.stream, gate.task);
  ASSERT_TRUE(ok(api().event_record(unrecorded.event, s.stream)));
  EXPECT_EQ(take(api().event_elapsed_ms(timing.event, unrecorded.event, &ms)).code,
            ACCEL_STATUS_FAILED_PRECONDITION);  // pending
  gate.open();
  EXPECT_TRUE(ok(api().stream_synchronize(s.stream)));
}

// The host can only make an accel_error through the plugin: a failing call gives one.
accel_error* failing_host_fn(void*) { return api().device_set_current(99); }

TEST(CpuStream, FailedHostFnIsReportedBySynchronize) {
  StreamOwner s = new_stream();
  std::atomic<bool> later_ran{false};
  Work later = [&]() -> accel_error* {
    later_ran = true;
    return nullptr;
  };
  ASSERT_TRUE(ok(api().stream_enqueue_host_fn(s.stream, failing_host_fn, nullptr)));
  enqueue(s.stream, later);
  EventOwner after = new_event();
  ASSERT_TRUE(ok(api().event_record(after.event, s.stream)));
  Status from_event = take(api().event_synchronize(after.event));
  EXPECT_EQ(from_event.code, ACCEL_STATUS_INVALID_ARGUMENT);
  Status status = take(api().stream_synchronize(s.stream));
  EXPECT_EQ(status.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(status.message.find("99"), std::string::npos) << status.message;
  EXPECT_TRUE(later_ran);                               // a failure does not skip later work
  EXPECT_TRUE(ok(api().stream_synchronize(s.stream)));  // reported once
}

TEST(CpuStream, WrappedNullNativeStreamRunsInline) {
  StreamOwner s;
  ASSERT_TRUE(ok(api().stream_wrap_native(0, nullptr, &s.stream)));
  std::thread::id ran_on;
  Work record_thread = [&]() -> accel_error* {
    ran_on = std::this_thread::get_id();
    return nullptr;
  };
  enqueue(s.stream, record_thread);
  EXPECT_EQ(ran_on, std::this_thread::get_id());  // already ran, on this thread
  EXPECT_TRUE(stream_done(s.stream));
  EXPECT_TRUE(ok(api().stream_synchronize(s.stream)));
  int not_a_stream = 0;
  accel_stream* other = nullptr;
  EXPECT_EQ(take(api().stream_wrap_native(0, &not_a_stream, &other)).code,
            ACCEL_STATUS_INVALID_ARGUMENT);
}

// The calling-thread stream waits for an event from a worker stream before its next
// work, without blocking in stream_wait_event itself.
TEST(CpuStream, InlineStreamWaitsForEventBeforeItsNextWork) {
  StreamOwner worker = new_stream();
  StreamOwner caller;
  ASSERT_TRUE(ok(api().stream_wrap_native(0, nullptr, &caller.stream)));
  Gate gate;
  std::atomic<bool> worker_done{false};
  Work worker_task = [&]() -> accel_error* {
    gate.task();
    worker_done = true;
    return nullptr;
  };
  enqueue(worker.stream, worker_task);
  EventOwner e = new_event();
  ASSERT_TRUE(ok(api().event_record(e.event, worker.stream)));
  ASSERT_TRUE(ok(api().stream_wait_event(caller.stream, e.event)));
  EXPECT_FALSE(stream_done(caller.stream));
  gate.open();
  bool saw_done = false;
  Work check = [&]() -> accel_error* {
    saw_done = worker_done.load();
    return nullptr;
  };
  enqueue(caller.stream, check);
  EXPECT_TRUE(saw_done);
  EXPECT_FALSE(gate.timed_out);
}

TEST(CpuStream, DestroyWhileBusyDrainsAndJoins) {
  const int threads_before = thread_count();
  accel_stream* stream = nullptr;
  ASSERT_TRUE(ok(api().stream_create(0, &stream)));
  std::atomic<int> ran{0};
  Work slow = [&]() -> accel_error* {
    std::this_thread::sleep_for(20ms);
    ++ran;
    return nullptr;
  };
  for (int i = 0; i < 3; ++i) enqueue(stream, slow);
  ASSERT_TRUE(ok(api().stream_destroy(stream)));
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(thread_count(), threads_before);
}

TEST(CpuStream, DeviceSynchronizeWaitsForEveryStream) {
  StreamOwner a = new_stream(), b = new_stream();
  std::atomic<int> ran{0};
  Work slow = [&]() -> accel_error* {
    std::this_thread::sleep_for(20ms);
    ++ran;
    return nullptr;
  };
  enqueue(a.stream, slow);
  enqueue(b.stream, slow);
  ASSERT_TRUE(ok(api().device_synchronize(0)));
  EXPECT_EQ(ran.load(), 2);
}

TEST(CpuStream, BadArgumentsAreErrorsNotCrashes) {
  accel_stream* stream = nullptr;
  EXPECT_EQ(take(api().stream_create(1, &stream)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(take(api().stream_create(0, nullptr)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(take(api().event_create(0, 0x80u, nullptr)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(ok(api().stream_destroy(nullptr)));
  EXPECT_TRUE(ok(api().event_destroy(nullptr)));
  bool done = false;
  EXPECT_EQ(take(api().stream_query(nullptr, &done)).code, ACCEL_STATUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace cpu_plugin_test
