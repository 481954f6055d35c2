#include "common/cli_args.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/error.h"

namespace qt {

CliArgs::CliArgs(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  flag("-h,--help", "show this help and exit");
}

static void split_names(const std::string& names, std::string& short_name, std::string& long_name) {
  auto comma = names.find(',');
  if (comma == std::string::npos) {
    (names.rfind("--", 0) == 0 ? long_name : short_name) = names;
  } else {
    short_name = names.substr(0, comma);
    long_name = names.substr(comma + 1);
  }
  if (long_name.empty()) long_name = short_name;
}

CliArgs& CliArgs::option(const std::string& names, const std::string& value_name, const std::string& help,
                         std::optional<std::string> default_value) {
  Spec s;
  split_names(names, s.short_name, s.long_name);
  s.value_name = value_name;
  s.help = help;
  s.default_value = std::move(default_value);
  specs_.push_back(std::move(s));
  return *this;
}

CliArgs& CliArgs::flag(const std::string& names, const std::string& help) {
  Spec s;
  split_names(names, s.short_name, s.long_name);
  s.help = help;
  s.is_flag = true;
  specs_.push_back(std::move(s));
  return *this;
}

CliArgs::Spec& CliArgs::last_option(const char* what) {
  if (specs_.empty() || specs_.back().is_flag)
    throw Error(std::string("internal: ") + what + " must follow the option it applies to", kExitFailure);
  return specs_.back();
}

CliArgs& CliArgs::set_range(Range r, bool list) {
  Spec& s = last_option("range()");
  s.range = r;
  s.is_list = list;
  return *this;
}
CliArgs& CliArgs::range(IntRange r) { return set_range(r, false); }
CliArgs& CliArgs::range(UintRange r) { return set_range(r, false); }
CliArgs& CliArgs::range(RealRange r) { return set_range(r, false); }
CliArgs& CliArgs::list_range(IntRange r) { return set_range(r, true); }
CliArgs& CliArgs::allow_empty() {
  last_option("allow_empty()").allow_empty = true;
  return *this;
}

// A given value (or a default) against the option's declared range.
void CliArgs::check_value(const Spec& s, const std::string& value) {
  const std::string& name = s.long_name;
  if (const auto* r = std::get_if<IntRange>(&s.range)) {
    if (s.is_list) {
      for (int64_t v : parse_int_list(value, name))
        if (!contains(*r, v))
          throw Error(name + ": " + std::to_string(v) + " is out of range (" + range_text(*r) + ")");
    } else {
      parse_int_in(value, name, r->lo, r->hi);
    }
  } else if (const auto* u = std::get_if<UintRange>(&s.range)) {
    const uint64_t v = parse_uint(value, name);
    if (!contains(*u, v)) throw Error(name + ": " + value + " is out of range (" + range_text(*u) + ")");
  } else if (const auto* d = std::get_if<RealRange>(&s.range)) {
    if (!contains(*d, parse_double(value, name)))
      throw Error(name + ": " + value + " is out of range " + range_text(*d));
  }
}

CliArgs& CliArgs::positionals(const std::string& name, const std::string& help, int max) {
  positional_name_ = name;
  positional_help_ = help;
  max_positionals_ = max;
  return *this;
}

const CliArgs::Spec* CliArgs::find(const std::string& token) const {
  for (const auto& s : specs_)
    if (token == s.long_name || (!s.short_name.empty() && token == s.short_name)) return &s;
  return nullptr;
}

const CliArgs::Spec& CliArgs::spec_for(const std::string& long_name) const {
  for (const auto& s : specs_)
    if (s.long_name == long_name) return s;
  throw Error("internal: option " + long_name + " was never declared", kExitFailure);
}

bool CliArgs::parse(int argc, char** argv, int first) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) args.emplace_back(argv[i]);
  return parse(args);
}

bool CliArgs::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& tok = args[i];
    if (tok.size() > 1 && tok[0] == '-' && !(tok.size() > 1 && (std::isdigit((unsigned char)tok[1]) || tok[1] == '.'))) {
      if (tok == "--") {
        for (size_t j = i + 1; j < args.size(); ++j) positional_.push_back(args[j]);
        break;
      }
      std::string name = tok, inline_value;
      bool has_inline = false;
      if (auto eq = tok.find('='); eq != std::string::npos && tok.rfind("--", 0) == 0) {
        name = tok.substr(0, eq);
        inline_value = tok.substr(eq + 1);
        has_inline = true;
      }
      const Spec* s = find(name);
      if (!s) throw Error("unknown option '" + name + "' (see " + program_ + " --help)");
      if (s->long_name == "--help") {
        std::fputs(help().c_str(), stdout);
        return false;
      }
      if (s->is_flag) {
        if (has_inline) throw Error("option " + s->long_name + " takes no value");
        values_[s->long_name] = "1";
        continue;
      }
      if (!has_inline && i + 1 >= args.size())
        throw Error("option " + s->long_name + " needs a value <" + s->value_name + ">");
      const std::string& value = has_inline ? inline_value : args[++i];
      if (value.empty() && !s->allow_empty)
        throw Error("option " + s->long_name + " needs a value <" + s->value_name + ">, got an empty one");
      check_value(*s, value);
      values_[s->long_name] = value;
    } else {
      if (max_positionals_ >= 0 && static_cast<int>(positional_.size()) >= max_positionals_)
        throw Error("unexpected argument '" + tok + "' (see " + program_ + " --help)");
      positional_.push_back(tok);
    }
  }
  for (const Spec& s : specs_)  // a default outside its own range is a bug of the tool; say so early
    if (s.default_value && !values_.count(s.long_name)) check_value(s, *s.default_value);
  return true;
}

bool CliArgs::given(const std::string& long_name) const {
  spec_for(long_name);
  return values_.count(long_name) > 0;
}

bool CliArgs::has(const std::string& long_name) const {
  return given(long_name) || spec_for(long_name).default_value.has_value();
}

std::optional<std::string> CliArgs::get_optional(const std::string& long_name) const {
  const Spec& s = spec_for(long_name);
  if (auto it = values_.find(long_name); it != values_.end()) return it->second;
  return s.default_value;
}

std::string CliArgs::get(const std::string& long_name) const {
  auto v = get_optional(long_name);
  if (!v) throw Error("missing required option " + long_name + " (see " + program_ + " --help)");
  return *v;
}

int64_t CliArgs::get_int(const std::string& long_name) const { return parse_int(get(long_name), long_name); }
double CliArgs::get_double(const std::string& long_name) const { return parse_double(get(long_name), long_name); }
bool CliArgs::get_flag(const std::string& long_name) const {
  spec_for(long_name);
  return values_.count(long_name) > 0;
}

std::string CliArgs::help() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [options]";
  if (!positional_name_.empty()) out << " " << positional_name_;
  out << "\n" << summary_ << "\n\n";
  if (!positional_name_.empty()) out << "  " << positional_name_ << "  " << positional_help_ << "\n";
  for (const auto& s : specs_) {
    std::string left = s.short_name.empty() || s.short_name == s.long_name ? s.long_name
                                                                          : s.short_name + ", " + s.long_name;
    if (!s.is_flag) left += " <" + s.value_name + ">";
    out << "  " << left;
    if (left.size() < 28) out << std::string(28 - left.size(), ' ');
    else out << "\n" << std::string(30, ' ');
    out << s.help;
    std::visit([&](const auto& r) {
      if constexpr (!std::is_same_v<std::decay_t<decltype(r)>, std::monostate>)
        out << (s.is_list ? " (each " : " (") << range_text(r) << ")";
    }, s.range);
    if (s.default_value) out << " (default: " << *s.default_value << ")";
    out << "\n";
  }
  return out.str();
}

int64_t parse_int(const std::string& text, const std::string& what) {
  if (text.empty()) throw Error(what + ": expected an integer, got an empty value");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0')
    throw Error(what + ": expected an integer, got '" + text + "'");
  return v;
}

uint64_t parse_uint(const std::string& text, const std::string& what) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    throw Error(what + ": expected a non-negative integer, got '" + text + "'");
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    throw Error(what + ": expected a non-negative integer below 2^64, got '" + text + "'");
  return v;
}

int64_t parse_int_in(const std::string& text, const std::string& what, int64_t lo, int64_t hi) {
  const size_t sign = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (text.size() == sign || text.find_first_not_of("0123456789", sign) != std::string::npos)
    throw Error(what + ": expected an integer, got '" + text + "'");
  errno = 0;
  long long v = std::strtoll(text.c_str(), nullptr, 10);  // ERANGE past int64: out of range as well
  if (errno == ERANGE || v < lo || v > hi)
    throw Error(what + ": " + text + " is out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
  return v;
}

double parse_double(const std::string& text, const std::string& what) {
  if (text.empty()) throw Error(what + ": expected a number, got an empty value");
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v))
    throw Error(what + ": expected a finite number, got '" + text + "'");
  return v;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  if (!text.empty() && text.back() == ',') throw Error(what + ": empty item in list '" + text + "'");
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    if (item.empty()) throw Error(what + ": empty item in list '" + text + "'");
    out.push_back(parse_int(item, what));
  }
  return out;
}

}  // namespace qt
