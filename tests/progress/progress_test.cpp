// accel::ProgressBar: the tqdm-style line, and how often it prints on a terminal, on a log
// stream and when disabled. Times are given to the pure formatter, never measured.
#include "accel/progress.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

accel::ProgressBarOptions to(std::ostringstream& out, bool interactive) {
  accel::ProgressBarOptions options;
  options.description = "epoch 0";
  options.stream = &out;
  options.interactive = interactive;
  options.min_interval_s = 0;  // interactive: redraw on every update
  return options;
}

TEST(FormatDuration, MinutesSecondsAndHours) {
  EXPECT_EQ(accel::format_duration(0), "00:00");
  EXPECT_EQ(accel::format_duration(12.9), "00:12");
  EXPECT_EQ(accel::format_duration(307), "05:07");
  EXPECT_EQ(accel::format_duration(3723), "1:02:03");
  EXPECT_EQ(accel::format_duration(-1), "?");
  EXPECT_EQ(accel::format_duration(std::numeric_limits<double>::infinity()), "?");
}

TEST(FormatProgressLine, LikeTqdm) {
  EXPECT_EQ(accel::format_progress_line("epoch 0", 423, 938, 12.0, "it", "loss=0.4123"),
            "epoch 0:  45%|####      | 423/938 [00:12<00:14, 35.25it/s, loss=0.4123]");
}

TEST(FormatProgressLine, StartAndEnd) {
  EXPECT_EQ(accel::format_progress_line("", 0, 50, 0.0), "  0%|          | 0/50 [00:00<?, ?it/s]");
  EXPECT_EQ(accel::format_progress_line("train", 50, 50, 25.0, "batch"),
            "train: 100%|##########| 50/50 [00:25<00:00, 2.00batch/s]");
}

TEST(FormatProgressLine, SlowRatesTurnOver) {
  EXPECT_EQ(accel::format_progress_line("", 2, 10, 8.0),
            " 20%|##        | 2/10 [00:08<00:32, 4.00s/it]");
}

TEST(FormatProgressLine, UnknownTotalHasNoBarOrEta) {
  EXPECT_EQ(accel::format_progress_line("eval", 30, 0, 3.0), "eval: 30it [00:03, 10.00it/s]");
}

TEST(FormatProgressLine, CountPastTotalAndNoBar) {
  EXPECT_EQ(accel::format_progress_line("", 12, 10, 1.0, "it", "", 0),
            "120% 12/10 [00:01<?, 12.00it/s]");
}

TEST(ProgressBar, LogStreamPrintsAWholeLineEveryTenPercent) {
  std::ostringstream out;
  {
    accel::ProgressBar bar(100, to(out, false));
    EXPECT_FALSE(bar.interactive());
    for (int i = 0; i < 100; ++i) {
      bar.set_postfix("step=" + std::to_string(i));
      bar.update();
    }
    EXPECT_EQ(bar.count(), 100u);
  }  // the destructor closes; the 100% line was already printed
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 10u) << out.str();
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  EXPECT_EQ(lines.front().rfind("epoch 0:  10%|#         | 10/100 [", 0), 0u) << lines.front();
  EXPECT_NE(lines.front().find(", step=9]"), std::string::npos) << lines.front();
  EXPECT_EQ(lines.back().rfind("epoch 0: 100%|##########| 100/100 [", 0), 0u) << lines.back();
}

TEST(ProgressBar, LogStreamWithFewStepsPrintsEachMilestoneOnce) {
  std::ostringstream out;
  accel::ProgressBar bar(3, to(out, false));
  for (int i = 0; i < 3; ++i) bar.update();  // 33%, 66%, 100%
  bar.close();
  bar.close();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_NE(lines[0].find(" 1/3 "), std::string::npos);
  EXPECT_NE(lines[2].find(" 3/3 "), std::string::npos);
}

TEST(ProgressBar, LogStreamClosedEarlyPrintsWhereItStopped) {
  std::ostringstream out;
  accel::ProgressBarOptions options = to(out, false);
  options.log_every_percent = 50;
  accel::ProgressBar bar(10, options);
  for (int i = 0; i < 7; ++i) bar.update();
  bar.close();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_NE(lines[0].find(" 5/10 "), std::string::npos);
  EXPECT_NE(lines[1].find(" 7/10 "), std::string::npos);
  bar.update();  // after close: nothing more
  EXPECT_EQ(lines_of(out.str()).size(), 2u);
}

TEST(ProgressBar, TerminalRedrawsOneLineInPlace) {
  std::ostringstream out;
  accel::ProgressBar bar(4, to(out, true));
  EXPECT_TRUE(bar.interactive());
  bar.set_postfix("loss=1.2345");
  bar.update();
  bar.set_postfix("");
  bar.update(3);
  bar.close();
  const std::string text = out.str();
  // 0% at construction, two updates and the final line: four draws, one newline at the end.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 4);
  ASSERT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  EXPECT_EQ(text.back(), '\n');
  // A shorter line blanks the rest of the longer one before it.
  const std::size_t third = text.find('\r', text.find('\r', text.find('\r') + 1) + 1);
  const std::size_t fourth = text.find('\r', third + 1);
  const std::string redraw = text.substr(third + 1, fourth - third - 1);
  EXPECT_EQ(redraw.rfind("epoch 0: 100%|##########| 4/4 [", 0), 0u) << redraw;
  EXPECT_EQ(redraw.back(), ' ');
}

TEST(ProgressBar, TerminalThrottlesRedraws) {
  std::ostringstream out;
  accel::ProgressBarOptions options = to(out, true);
  options.min_interval_s = 3600;  // no redraw between the first and the last line
  accel::ProgressBar bar(1000, options);
  for (int i = 0; i < 1000; ++i) bar.update();
  bar.close();
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 2) << text;
  EXPECT_NE(text.find(" 1000/1000 "), std::string::npos);
}

TEST(ProgressBar, DisabledPrintsNothingButCounts) {
  std::ostringstream out;
  accel::ProgressBarOptions options = to(out, true);
  options.enabled = false;
  {
    accel::ProgressBar bar(10, options);
    for (int i = 0; i < 10; ++i) bar.update();
    EXPECT_EQ(bar.count(), 10u);
    EXPECT_FALSE(bar.enabled());
  }
  EXPECT_TRUE(out.str().empty()) << out.str();
}

TEST(ProgressBar, UnknownTotalPrintsOnlyAtClose) {
  std::ostringstream out;
  accel::ProgressBar bar(0, to(out, false));
  for (int i = 0; i < 25; ++i) bar.update();
  EXPECT_TRUE(out.str().empty());
  bar.close();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("epoch 0: 25it [", 0), 0u) << lines[0];
}

TEST(ProgressBar, AnOtherStreamIsNotATerminalUnlessSaidSo) {
  std::ostringstream out;
  accel::ProgressBarOptions options;
  options.stream = &out;
  accel::ProgressBar bar(10, options);
  EXPECT_FALSE(bar.interactive());
}

}  // namespace
