#pragma once
// A small, strict command-line parser shared by the tools: long (--name) and short (-n) options, values
// as the next argument or --name=value, positionals, generated --help. Unknown flags, missing or empty
// values, malformed numbers and numbers outside an option's declared range are qt::Error (exit code 2)
// naming the flag, never silently ignored.
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/value_range.h"

namespace qt {

class CliArgs {
 public:
  CliArgs(std::string program, std::string summary);

  // Declare an option. `names` is "--long" or "-s,--long". A flag takes no value.
  CliArgs& option(const std::string& names, const std::string& value_name, const std::string& help,
                  std::optional<std::string> default_value = std::nullopt);
  CliArgs& flag(const std::string& names, const std::string& help);
  // The option declared last takes a number in `r` (a list: integers, each in `r`). parse() checks the value,
  // so an out-of-range one fails before any work starts; --help shows the range.
  CliArgs& range(IntRange r);
  CliArgs& range(UintRange r);
  CliArgs& range(RealRange r);
  CliArgs& list_range(IntRange r);
  // The option declared last may be given an empty value (otherwise `--out ""` is a usage error).
  CliArgs& allow_empty();
  // Declare that positional arguments are accepted (for help text); at most `max` (-1 = unlimited).
  CliArgs& positionals(const std::string& name, const std::string& help, int max = -1);

  // Parses argv[first..argc). Returns false if --help was given (help already printed to stdout).
  bool parse(int argc, char** argv, int first = 1);
  bool parse(const std::vector<std::string>& args);

  bool has(const std::string& long_name) const;  // given on the command line, or has a default
  bool given(const std::string& long_name) const;  // given on the command line
  std::string get(const std::string& long_name) const;  // throws if absent without default
  std::optional<std::string> get_optional(const std::string& long_name) const;
  int64_t get_int(const std::string& long_name) const;
  // The value as T, range-checked at T's full width (a value that does not fit is an error, never cut).
  template <typename T>
  T get_int_as(const std::string& long_name) const;
  double get_double(const std::string& long_name) const;
  bool get_flag(const std::string& long_name) const;
  const std::vector<std::string>& positional() const { return positional_; }

  std::string help() const;

 private:
  using Range = std::variant<std::monostate, IntRange, UintRange, RealRange>;
  struct Spec {
    std::string long_name, short_name, value_name, help;
    bool is_flag = false;
    std::optional<std::string> default_value;
    Range range;
    bool is_list = false, allow_empty = false;
  };
  const Spec* find(const std::string& token) const;
  const Spec& spec_for(const std::string& long_name) const;
  Spec& last_option(const char* what);
  CliArgs& set_range(Range r, bool list);
  static void check_value(const Spec& s, const std::string& value);

  std::string program_, summary_;
  std::vector<Spec> specs_;
  std::string positional_name_, positional_help_;
  int max_positionals_ = 0;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// Parse helpers that throw qt::Error naming `what` on malformed input.
int64_t parse_int(const std::string& text, const std::string& what);
double parse_double(const std::string& text, const std::string& what);
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);  // "1,2,3"
uint64_t parse_uint(const std::string& text, const std::string& what);  // no sign, up to 2^64-1
// An integer that must fit `lo..hi`; the error names `what`, the value and the range.
int64_t parse_int_in(const std::string& text, const std::string& what, int64_t lo, int64_t hi);

template <typename T>
T CliArgs::get_int_as(const std::string& long_name) const {
  static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
  if constexpr (std::is_unsigned_v<T>) {
    const uint64_t v = parse_uint(get(long_name), long_name);
    if (v > std::numeric_limits<T>::max())
      return static_cast<T>(parse_int_in(get(long_name), long_name, 0, int64_t(std::numeric_limits<T>::max())));
    return static_cast<T>(v);
  } else {
    return static_cast<T>(
        parse_int_in(get(long_name), long_name, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  }
}

}  // namespace qt
