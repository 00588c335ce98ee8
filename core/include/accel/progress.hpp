// accel/progress.hpp: a progress bar for training loops, as Accelerate's examples use tqdm
// with disable=not accelerator.is_local_main_process.
//
//   accel::ProgressBarOptions options;
//   options.description = "epoch 0";
//   options.enabled = accelerator.is_local_main_process();
//   accel::ProgressBar bar(loader.size(), options);
//   for (accel::Batch& batch : loader) {
//     ...
//     bar.set_postfix("loss=" + std::to_string(loss.item<double>()));
//     bar.update();
//   }
//   bar.close();   // the final line; the destructor closes too
//
// A line looks like tqdm's:
//   epoch 0:  45%|#####     | 423/938 [00:12<00:14, 35.21it/s, loss=0.4123]
//
// Output: on an interactive stream (stderr that is a terminal) one line is redrawn in
// place with '\r', at most every min_interval_s. Otherwise (a file, a pipe, accelrun's
// workers, whose output the launcher reads line by line) a whole line is printed each
// time the count crosses another log_every_percent of the total, and at close(), so logs
// stay readable: about 10 lines per bar. With total 0 (unknown), only close() prints.
// A disabled bar prints nothing and costs a branch per call.
//
// Errors: none thrown; a failed write leaves the stream's state as the stream sets it
// (a progress bar must never stop training). Not thread safe: update it from the thread that runs
// the loop. The stream must outlive the bar.
#pragma once

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace accel {

struct ProgressBarOptions {
  std::string description;  // printed before the bar ("epoch 0"); may be empty
  std::string unit = "it";  // the rate's unit: "35.21it/s"
  bool enabled = true;      // false on processes that should not print
  // Where lines go; null: std::cerr.
  std::ostream* stream = nullptr;
  // Redraw in place with '\r'. Unset: true when `stream` is null and stderr is a
  // terminal; false for any other stream.
  std::optional<bool> interactive;
  double min_interval_s = 0.1;  // interactive: the shortest time between redraws
  int log_every_percent = 10;   // not interactive: a line per this many percent (1..100)
  std::size_t bar_width = 10;   // characters between the '|'s; 0 hides the bar
};

// One progress line, a pure function (what the bar prints, and what tests check).
// total 0 means unknown: no percentage, bar or ETA. elapsed_s <= 0 or count 0 give no rate
// ("?it/s") and no ETA ("?"). Times are MM:SS, or H:MM:SS from one hour.
std::string format_progress_line(std::string_view description, std::size_t count, std::size_t total,
                                 double elapsed_s, std::string_view unit = "it",
                                 std::string_view postfix = "", std::size_t bar_width = 10);

// "05:07", or "1:02:03" from one hour; negative or non-finite seconds give "?".
std::string format_duration(double seconds);

class ProgressBar {
 public:
  // `total`: the number of updates expected (a loader's size()); 0 when unknown.
  explicit ProgressBar(std::size_t total, ProgressBarOptions options = {});
  ~ProgressBar();  // close()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Counts n more; prints when the output policy above says so.
  void update(std::size_t n = 1);
  // Text after the rate, such as "loss=0.4123"; shown from the next printed line on.
  void set_postfix(std::string postfix);
  // Prints the final line (ending in '\n') once; later updates print nothing.
  void close();

  std::size_t count() const { return count_; }
  std::size_t total() const { return total_; }
  bool enabled() const { return options_.enabled; }
  bool interactive() const { return interactive_; }

 private:
  using Clock = std::chrono::steady_clock;
  void print(bool final_line);
  double elapsed_s() const;
  double elapsed_since_draw_s() const;

  std::size_t total_;
  ProgressBarOptions options_;
  std::ostream* stream_;
  bool interactive_ = false;
  bool closed_ = false;
  std::size_t count_ = 0;
  std::size_t next_logged_percent_ = 0;  // not interactive: the next milestone to print
  std::size_t last_printed_count_ = 0;
  std::string postfix_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
  std::size_t last_width_ = 0;  // interactive: characters to blank when a line shrinks
};

}  // namespace accel
