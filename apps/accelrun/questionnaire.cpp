// Questions and answers over plain streams; see questionnaire.hpp.
#include "questionnaire.hpp"

#include <algorithm>
#include <cctype>
#include <istream>
#include <ostream>

namespace accelrun {
namespace {

std::string trim(const std::string& text) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  auto begin = std::find_if_not(text.begin(), text.end(), space);
  auto end = std::find_if_not(text.rbegin(), text.rend(), space).base();
  return begin < end ? std::string(begin, end) : std::string();
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

Questionnaire::Questionnaire(std::istream& in, std::ostream& out, std::string fix, bool echo,
                             int max_tries)
    : in_(in), out_(out), fix_(std::move(fix)), echo_(echo), max_tries_(std::max(1, max_tries)) {}

std::optional<std::string> Questionnaire::read_line() {
  std::string line;
  if (!std::getline(in_, line)) return std::nullopt;
  if (echo_) out_ << line << "\n";
  return trim(line);
}

std::string Questionnaire::ask(const std::string& question, const std::string& default_answer,
                               const Check& check) {
  std::string reason;
  for (int attempt = 0; attempt < max_tries_; ++attempt) {
    out_ << question << (default_answer.empty() ? "" : " [" + default_answer + "]") << ": "
         << std::flush;
    const std::optional<std::string> line = read_line();
    if (!line) {
      out_ << "\n";
      throw QuestionnaireError("the input ended before an answer to \"" + question + "\" (" + fix_ +
                               ")");
    }
    std::string answer = line->empty() ? default_answer : *line;
    const std::optional<std::string> complaint = check(answer);
    if (!complaint) return answer;
    reason = *complaint;
    out_ << "  invalid: " << reason << "\n";
  }
  throw QuestionnaireError("no valid answer to \"" + question + "\" after " +
                           std::to_string(max_tries_) + " tries: " + reason + " (" + fix_ + ")");
}

bool Questionnaire::ask_yes_no(const std::string& question, bool default_answer) {
  const std::string prompt = question + (default_answer ? " [Y/n]" : " [y/N]");
  const std::string answer = ask(prompt, "", [](const std::string& text) {
    const std::string word = lower(text);
    if (word.empty() || word == "y" || word == "yes" || word == "n" || word == "no")
      return std::optional<std::string>();
    return std::optional<std::string>("answer yes or no (y/n), or press Enter for the default");
  });
  if (answer.empty()) return default_answer;
  return lower(answer)[0] == 'y';
}

void Questionnaire::say(const std::string& text) { out_ << text << std::flush; }

}  // namespace accelrun
