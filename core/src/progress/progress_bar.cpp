// ProgressBar: tqdm-style lines, redrawn in place on a terminal, throttled to whole lines
// every few percent elsewhere (see accel/progress.hpp).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

#include "accel/progress.hpp"

namespace accel {
namespace {

std::string rate_text(std::size_t count, double elapsed_s, std::string_view unit) {
  char buffer[64];
  const double rate = elapsed_s > 0 ? static_cast<double>(count) / elapsed_s : 0.0;
  if (count == 0 || rate <= 0 || !std::isfinite(rate)) return "?" + std::string(unit) + "/s";
  // Below one per second tqdm turns the rate over (s/it): "0.25it/s" reads worse.
  if (rate >= 1)
    std::snprintf(buffer, sizeof buffer, "%.2f", rate);
  else
    std::snprintf(buffer, sizeof buffer, "%.2fs/", 1 / rate);
  return rate >= 1 ? buffer + std::string(unit) + "/s" : buffer + std::string(unit);
}

std::string bar_text(std::size_t count, std::size_t total, std::size_t width) {
  const std::size_t filled = std::min(width, count * width / total);
  return "|" + std::string(filled, '#') + std::string(width - filled, ' ') + "|";
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(seconds);
  char buffer[48];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", total / 3600, total / 60 % 60,
                  total % 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%02lld:%02lld", total / 60, total % 60);
  }
  return buffer;
}

std::string format_progress_line(std::string_view description, std::size_t count, std::size_t total,
                                 double elapsed_s, std::string_view unit, std::string_view postfix,
                                 std::size_t bar_width) {
  std::string line = description.empty() ? "" : std::string(description) + ": ";
  const bool timed = count > 0 && elapsed_s > 0;
  if (total > 0) {
    char percent[16];
    std::snprintf(percent, sizeof percent, "%3zu%%", count * 100 / total);
    line += percent;
    if (bar_width > 0) line += bar_text(count, total, bar_width);
    line += " " + std::to_string(count) + "/" + std::to_string(total);
    const double eta = timed && count <= total ? static_cast<double>(total - count) * elapsed_s /
                                                     static_cast<double>(count)
                                               : -1.0;
    line += " [" + format_duration(elapsed_s) + "<" + format_duration(eta);
  } else {
    line += std::to_string(count) + std::string(unit) + " [" + format_duration(elapsed_s);
  }
  line += ", " + rate_text(count, elapsed_s, unit);
  if (!postfix.empty()) line += ", " + std::string(postfix);
  return line + "]";
}

ProgressBar::ProgressBar(std::size_t total, ProgressBarOptions options)
    : total_(total), options_(std::move(options)) {
  stream_ = options_.stream ? options_.stream : &std::cerr;
  interactive_ =
      options_.interactive.value_or(options_.stream == nullptr && ::isatty(STDERR_FILENO) == 1);
  options_.log_every_percent = std::clamp(options_.log_every_percent, 1, 100);
  next_logged_percent_ = static_cast<std::size_t>(options_.log_every_percent);
  if (options_.enabled && interactive_) print(false);  // show 0% at once, as tqdm does
}

ProgressBar::~ProgressBar() { close(); }

void ProgressBar::update(std::size_t n) {
  count_ += n;
  if (!options_.enabled || closed_) return;
  if (interactive_) {
    if (elapsed_since_draw_s() >= options_.min_interval_s) print(false);
    return;
  }
  if (total_ == 0) return;
  const std::size_t percent = count_ * 100 / total_;
  if (percent < next_logged_percent_) return;
  print(false);
  // Skip the milestones a big update jumped over: one line, not several equal ones.
  const auto step = static_cast<std::size_t>(options_.log_every_percent);
  next_logged_percent_ = (percent / step + 1) * step;
}

void ProgressBar::set_postfix(std::string postfix) { postfix_ = std::move(postfix); }

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  if (!options_.enabled) return;
  // Not interactive: the last milestone line may already say it all.
  if (!interactive_ && count_ == last_printed_count_ && total_ > 0 && count_ > 0) return;
  print(true);
}

double ProgressBar::elapsed_s() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

double ProgressBar::elapsed_since_draw_s() const {
  return std::chrono::duration<double>(Clock::now() - last_draw_).count();
}

void ProgressBar::print(bool final_line) {
  const std::string line = format_progress_line(options_.description, count_, total_, elapsed_s(),
                                                options_.unit, postfix_, options_.bar_width);
  std::string text;
  if (interactive_) {
    // Blank what is left of a longer previous line, then end the line only when closing.
    text =
        "\r" + line + std::string(last_width_ > line.size() ? last_width_ - line.size() : 0, ' ');
    if (final_line) text += '\n';
  } else {
    text = line + '\n';
  }
  stream_->write(text.data(), static_cast<std::streamsize>(text.size()));
  stream_->flush();
  last_width_ = line.size();
  last_draw_ = Clock::now();
  last_printed_count_ = count_;
}

}  // namespace accel
