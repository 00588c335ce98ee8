// Questions on a terminal or a pipe, one line per answer: what `accelrun config` asks
// with. Works without a TTY (answers piped in, as the tests do), never loops forever:
// an invalid answer is re-asked with the reason a bounded number of times, and the end
// of the input is an error, not an endless run of defaults.
//
//   Questionnaire q(std::cin, std::cout, "use `accelrun config default`");
//   std::string name = q.ask("Which backend?", "cpu", check);  // "Which backend? [cpu]: "
//   bool yes = q.ask_yes_no("Overwrite it?", false);      // "Overwrite it? [y/N]: "
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>

namespace accelrun {

// The questionnaire could not get an answer: the input ended, or every try was invalid.
// what() is one line that names the question and says how to fix it.
class QuestionnaireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Questionnaire {
 public:
  // Returns why an answer is rejected, or nullopt to accept it.
  using Check = std::function<std::optional<std::string>(const std::string& answer)>;

  // `in` and `out` must outlive the questionnaire. `fix` ends every error message (what
  // the user can do instead). When echo is set, each answer read is written after its
  // prompt, so a transcript of piped input reads like a terminal session.
  Questionnaire(std::istream& in, std::ostream& out, std::string fix, bool echo = false,
                int max_tries = 3);

  // Prints `question [default]: ` and reads one line, trimmed. An empty line means the
  // default (an empty default passes "" to check). Re-asks with "  invalid: <reason>"
  // until check accepts, at most max_tries times; throws QuestionnaireError after that
  // or at the end of the input.
  std::string ask(const std::string& question, const std::string& default_answer,
                  const Check& check);
  // y/yes/n/no (any case); the default is shown as [Y/n] or [y/N].
  bool ask_yes_no(const std::string& question, bool default_answer);

  // Text that is not a question (a heading, a list of choices).
  void say(const std::string& text);

 private:
  std::optional<std::string> read_line();
  std::istream& in_;
  std::ostream& out_;
  std::string fix_;
  bool echo_;
  int max_tries_;
};

}  // namespace accelrun
